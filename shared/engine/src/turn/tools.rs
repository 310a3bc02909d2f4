//! Running the tools an answer asked for, each result recorded as its call finishes.

use super::{Asked, Turn};
use crate::{EngineError, TurnEvent};
use ::tools::ToolCall;
use serde_json::{Value, json};
use tracing::Instrument;
use transcript::{Part, Role};

/// The most tool calls of one answer that run. A model can ask for hundreds in one answer
/// (its output allowance is the only bound), each a tool run and a recorded result; the rest
/// are answered `NOT EXECUTED` and may be asked for again in the next answer, under the
/// turn's cycle ceiling.
pub const MAX_CALLS_PER_ANSWER: usize = 16;

/// The key of call `call_id` asked for by the message at `asked_at` in `conversation`: its
/// receipt's, and its idempotency key for an outside system.
pub(crate) fn call_key(
    conversation: &transcript::ConversationId,
    asked_at: u64,
    call_id: &str,
) -> String {
    format!("{conversation}#{asked_at}#{call_id}")
}

/// The result of a call past [`MAX_CALLS_PER_ANSWER`]: nothing ran.
fn not_run(call: &ToolCall) -> ::tools::ToolOutcome {
    ::tools::ToolOutcome {
        part: Part::ToolResult {
            tool_use_id: call.id.clone(),
            content: json!({"error": format!(
                "NOT EXECUTED: at most {MAX_CALLS_PER_ANSWER} tool calls of one answer run, and \
                 this one came after them. Call it again in your next answer if it is still needed."
            )}),
            is_error: true,
        },
        is_error: true,
        effects: None,
    }
}

impl Turn<'_> {
    /// Run the calls one after another, recording each result the moment the call finishes
    /// (DESIGN invariant 10), then write them together as one tool message — the last call's
    /// result in the same write as the message where the store offers it (nothing happens
    /// between the two, so no crash point moves). A resumed turn
    /// reuses the results already recorded and runs only the calls that never finished.
    /// Crash story: a tool that writes to Bridle's store commits a receipt with its effect, so
    /// a crash between the effect and the result record repeats nothing — the resumed turn
    /// answers from the receipt; a tool without one (an outside system) repeats that one call,
    /// with the same `call_key` as its idempotency key; a crash after the record repeats
    /// nothing.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[ToolCall],
        asked: Asked,
    ) -> Result<(), EngineError> {
        let engine = self.engine;
        let store = &engine.store;
        let mut stored = if asked.resumed {
            store.tool_results(&self.conv.id, asked.at).await?
        } else {
            Default::default()
        };
        let mut results = Vec::with_capacity(calls.len());
        // Whether the tool message went out with the last call's result (one write).
        let mut message_written = false;
        for (i, call) in calls.iter().enumerate() {
            let span = crate::spans::tool_call(&call.name, &call.id, &call.input);
            let started = std::time::Instant::now();
            if let Some(part) = stored.remove(&call.id) {
                crate::spans::tool_done(&span, "reused", started.elapsed(), &part);
                let is_error = matches!(part, Part::ToolResult { is_error: true, .. });
                // What it held (or ran since it was held) is what the reply asks about, as
                // when the call was made: the buttons and what a yes does.
                if let Part::ToolResult { content, .. } = &part {
                    crate::confirm::HeldLine::note(&mut self.held_now, call, content, is_error);
                }
                tracing::info!(tool = %call.name, call = %call.id, "reusing the result recorded before the interruption");
                self.sink.emit(TurnEvent::ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    is_error,
                });
                results.push(part);
                continue;
            }
            // The turn's context, with this call's key while it runs (no copy per call).
            self.ctx.call_key = Some(call_key(&self.conv.id, asked.at, &call.id));
            let ctx = &self.ctx;
            let key = ctx.call_key.as_deref().unwrap_or_default();
            // Its effect was committed with its receipt before the interruption: answer the
            // call from the receipt, shaped as the handler's output was, and run nothing.
            let mut held = None;
            let outcome = async {
                let committed = match asked.resumed && i < MAX_CALLS_PER_ANSWER {
                    true => store.receipt(key).await?,
                    false => None,
                };
                Ok::<_, EngineError>(match committed {
                // Past the answer's share: nothing runs (a resumed turn answers the same).
                None if i >= MAX_CALLS_PER_ANSWER => not_run(call),
                Some(output) => {
                    tracing::info!(tool = %call.name, call = %call.id, "answering from the receipt committed before the interruption");
                    engine.tools.answer(call, output)
                }
                // Validation first: a malformed call gets its error and never reaches the gate,
                // so it neither holds nor uses up a confirmation; nor is a change the grant
                // refuses judged there.
                None => match engine
                    .tools
                    .check(&self.conv.purpose, call)
                    .or_else(|| engine.tools.outside_grant(ctx, call))
                {
                    Some(invalid) => invalid,
                    None => match engine.hold_for_confirmation(ctx, call, &self.answer).await {
                        Some(outcome) => {
                            held = crate::confirm::held_description(&outcome);
                            outcome
                        }
                        None => engine.tools.run(ctx, &self.conv.purpose, call).await,
                    },
                },
                })
            }
            .instrument(span.clone())
            .await?;
            if let Some(description) = held.clone() {
                let call_hash = crate::confirm::call_hash(&call.name, &call.input);
                crate::confirm::HeldLine::add(&mut self.held_now, call_hash, description);
            }
            let mut outcome = outcome;
            // Past the answer's share nothing ran, and a resumed turn says the same again: no
            // receipt to look for, no record of its own (it goes with the tool message).
            let not_run = i >= MAX_CALLS_PER_ANSWER;
            // A racing attempt of the same call committed first and this one's commit was
            // refused: the recorded outcome stands.
            if outcome.is_error
                && !not_run
                && let Some(output) = store.receipt(key).await?
            {
                outcome = engine.tools.answer(call, output);
            }
            // What a tool read back (names and titles others may have written) cannot pass
            // for the harness's own notes.
            if let Part::ToolResult { content, .. } = &mut outcome.part {
                crate::context::neutralise_value(content);
            }
            // The same call, held earlier in this turn, has run now (what made it risky changed
            // in between): it is asked about no more, and its pending record is void, so no
            // yes runs it a second time.
            if held.is_none() && !outcome.is_error && !not_run {
                let hash = crate::confirm::call_hash(&call.name, &call.input);
                if let Some(at) = self.held_now.iter().position(|l| l.call == hash) {
                    self.held_now.remove(at);
                    // Made on this very action, which `take_pending` (a No press's `void`)
                    // never takes: voided as a record of this action.
                    if let Some(gate) = &engine.confirmation
                        && let Err(err) = gate
                            .void_unseen(&self.ctx.conversation_id, call, &self.ctx.action_id.0)
                            .await
                    {
                        tracing::warn!(tool = %call.name, error = %err, "could not void the pending confirmation of a call that ran since; it will expire");
                    }
                }
            }
            let label = match (held.is_some(), outcome.is_error) {
                (true, _) => "held_for_confirmation",
                (false, true) => "error",
                (false, false) => "ok",
            };
            crate::spans::tool_done(&span, label, started.elapsed(), &outcome.part);
            let is_error = outcome.is_error;
            let effects = outcome.effects;
            // The last result goes with the tool message where the store writes both at once:
            // the parts move into the message, and come back if that write was refused.
            let mut part = Some(outcome.part);
            if i + 1 == calls.len()
                && let Some(last) = part.take()
            {
                match self
                    .append_with_result(std::mem::take(&mut results), asked.at, call, last)
                    .await?
                {
                    None => message_written = true,
                    Some((before, last)) => {
                        results = before;
                        part = Some(last);
                    }
                }
            }
            let Some(mut part) = part else {
                self.emit_result(call, is_error, effects);
                continue;
            };
            if not_run {
                self.emit_result(call, is_error, effects);
                results.push(part);
                continue;
            }
            match store
                .put_tool_result(&self.conv.id, asked.at, &call.id, &part)
                .await
            {
                Ok(()) => {}
                // Recorded by an attempt that was still running: the first record stands.
                Err(store::StoreError::Conflict { .. }) => {
                    tracing::warn!(tool = %call.name, call = %call.id, "a result was already recorded for this call");
                    let mut recorded = store.tool_results(&self.conv.id, asked.at).await?;
                    if let Some(first) = recorded.remove(&call.id) {
                        part = first;
                    }
                }
                Err(e) => return Err(e.into()),
            }
            self.emit_result(call, is_error, effects);
            results.push(part);
        }
        self.ctx.call_key = None;
        if message_written {
            return Ok(());
        }
        self.append(Role::Tool, results, None).await
    }

    /// Tell the client a call finished, and what it changed; once its result is recorded.
    fn emit_result(&mut self, call: &ToolCall, is_error: bool, effects: Option<Value>) {
        self.tool_errors += u32::from(is_error);
        if !self.sink.listening() {
            return;
        }
        self.sink.emit(TurnEvent::ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            is_error,
        });
        if let Some(effects) = effects {
            self.sink.emit(TurnEvent::Effects {
                tool: call.name.clone(),
                effects,
            });
        }
    }

    /// The last call's result and the tool message carrying every result as one write, where
    /// the store offers it ([`store::TurnWrites`]) — with the next model call's budget
    /// reservation when the guard prepares one on this store (a model call always follows the
    /// tools). `None` when written. The results before and the last one back when the store
    /// has no such write or refused it (the result recorded already, the position taken): the
    /// caller then makes the two writes one by one, each handling what it found. A reservation
    /// a cap refused is dropped, the two written without it, and the next call goes through
    /// the guard as usual.
    async fn append_with_result(
        &mut self,
        mut parts: Vec<Part>,
        asked_at: u64,
        call: &ToolCall,
        result: Part,
    ) -> Result<Option<(Vec<Part>, Part)>, EngineError> {
        let engine = self.engine;
        let Some(writes) = engine.store.turn_writes() else {
            return Ok(Some((parts, result)));
        };
        parts.push(result);
        let message = self.next_message(Role::Tool, parts, None);
        let result = message.parts.last().expect("the result was pushed");
        let mut history = self.history.clone();
        history.push(message.clone());
        let request = self.request_of(&history);
        let next_call = crate::GuardCall {
            conversation: &self.conv,
            call_number: self.model_calls + 1,
            request: &request,
            account: self.account.as_ref(),
        };
        let prepared = engine
            .guard
            .prepare(&next_call)
            .await
            .filter(|p| self.is_store(&p.ledger));
        let (charges, mut reserved) = match prepared {
            Some(p) => (p.charges, Some(p.permit)),
            None => (Vec::new(), None),
        };
        let mut written = writes
            .append_with_tool_result(&message, asked_at, &call.id, result, &charges)
            .await;
        if matches!(written, Ok(false)) && !charges.is_empty() {
            tracing::info!(
                "the next call's reservation did not fit with the tool message; on its own"
            );
            reserved = None;
            written = writes
                .append_with_tool_result(&message, asked_at, &call.id, result, &[])
                .await;
        }
        match written {
            Ok(true) => {
                self.next_position += 1;
                self.history = history;
                self.next_call = Some(super::NextCall {
                    request,
                    permit: reserved,
                });
                Ok(None)
            }
            Ok(false) => Err(store::StoreError::Unavailable(
                "a write with nothing to reserve reported a refused reservation".into(),
            )
            .into()),
            Err(store::StoreError::Conflict { what }) => {
                tracing::info!(
                    what,
                    "the tool message and its last result were refused together; one by one"
                );
                let mut parts = message.parts;
                let last = parts.pop().expect("the result was pushed");
                Ok(Some((parts, last)))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Answer calls that will not run, so the transcript stays valid for replay.
    pub(super) async fn not_executed(
        &mut self,
        calls: &[ToolCall],
        why: &str,
    ) -> Result<(), EngineError> {
        let results = calls
            .iter()
            .map(|c| Part::ToolResult {
                tool_use_id: c.id.clone(),
                content: json!({ "error": why }),
                is_error: true,
            })
            .collect();
        self.append(Role::Tool, results, None).await
    }
}
