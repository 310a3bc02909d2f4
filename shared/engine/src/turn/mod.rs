//! One running turn: the loop, with the model calls, the tools, compaction and the records in
//! their own files.

mod compaction;
mod model;
mod press;
mod record;
mod tools;
pub(crate) use tools::call_key;

pub use tools::MAX_CALLS_PER_ANSWER;

use crate::call::Shown;
use crate::call::Streamed;
use crate::history::History;
use crate::resume::{self, Next, tool_calls};
use crate::{Engine, EngineError, EventSink, TurnEnd, TurnInput, lines};
use ::tools::{Actor, Ctx, ToolCall};
use backend::ToolSpec;
use std::sync::Arc;
use store::VisibleRole;
use transcript::{Conversation, ConversationStatus, Role, StopReason, Usage};

/// The state of one running turn.
pub(crate) struct Turn<'a> {
    engine: &'a Engine,
    sink: &'a dyn EventSink,
    conv: Conversation,
    /// The tools' context; `call_key` is the running call's while a call runs, else `None`.
    ctx: Ctx,
    history: History,
    next_position: u64,
    next_visible: u64,
    tools: Arc<[ToolSpec]>,
    shown: Shown,
    model_calls: u32,
    usage: Usage,
    /// Written on every message of this turn, so a retried job can find them.
    action_id: String,
    /// Where a resumed turn picks up (`None` for a new turn).
    resume: Option<Next>,
    /// The provider rejected replayed reasoning: send history without it for the rest of the turn.
    strip_reasoning: bool,
    /// What the user's message says to a pending confirmation.
    answer: crate::Answer,
    /// Model calls an earlier attempt of this turn made (a resumed turn).
    calls_before: u32,
    resumed: bool,
    /// A later message's turn began after this one's: it ends at once, writing nothing.
    overtaken: bool,
    tool_errors: u32,
    /// What the calls held for confirmation in this turn do, as the policy describes them: the
    /// reply shows them with the server's buttons.
    held_now: Vec<crate::confirm::HeldLine>,
    /// This run wrote the user's visible entry (a new turn).
    wrote_user_entry: bool,
    /// `next_visible` came from a hint that may lag the transcript.
    visible_hinted: bool,
    /// The conversation's account as read at the turn's start.
    account: Option<store::Account>,
    /// The context block's facts as the caller read them beside the turn's start.
    facts: Option<Result<crate::ContextFacts, String>>,
    /// The last model call's budget settlement, written with its answer (`Turn::append`).
    settlement: Vec<crate::Settlement>,
    /// The next model call as built with the tool message before it
    /// (`Turn::append_with_result`).
    next_call: Option<NextCall>,
}

/// A model call built ahead, when the tool message before it was written.
struct NextCall {
    request: backend::ChatRequest,
    /// Its permit, when its budget reservation was written with that message.
    permit: Option<crate::Permit>,
}

/// Where the answer that asked for tools is stored, and whether the turn is resuming (only then
/// can some of its calls have recorded results).
#[derive(Debug, Clone, Copy)]
struct Asked {
    at: u64,
    resumed: bool,
}

/// What the loop does after an answer that asked for tools.
enum Flow {
    /// The tools ran: call the model again.
    Continue,
    /// The turn is over.
    End(TurnEnd),
    /// The calls were answered as not executed; the stop reason decides the end.
    Conclude,
}

impl<'a> Turn<'a> {
    pub(crate) async fn start(
        engine: &'a Engine,
        read: Option<crate::TurnRead>,
        input: &TurnInput,
        sink: &'a dyn EventSink,
    ) -> Result<Turn<'a>, EngineError> {
        let store = &engine.store;
        let id = &input.conversation_id;
        let (mut conv, account_read, visible_hint, history_read, facts) =
            match read.filter(|r| &r.conversation.id == id) {
                Some(read) => (
                    read.conversation,
                    read.account,
                    read.next_visible,
                    read.messages,
                    read.facts,
                ),
                None => (
                    store
                        .conversation(id)
                        .await?
                        .ok_or_else(|| EngineError::ConversationNotFound(id.clone()))?,
                    None,
                    None,
                    None,
                    None,
                ),
            };
        let history = match history_read {
            Some(history) => history,
            None => store.messages(id, conv.segment).await?,
        };
        let resumed = resume::find(&history, &input.action_id.0);
        // A later turn began after this one: its rows follow this one's, or its compaction
        // opened a segment after this one's message (a dead letter sent again).
        let overtaken = match resumed {
            Some(_) => resume::overtaken(&history, &input.action_id.0),
            None => {
                resume::in_earlier_segment(
                    store.as_ref(),
                    &conv,
                    &history,
                    &input.action_id.0,
                    input.sent_at_ms,
                )
                .await?
            }
        };
        // This turn compacted before it was cut short (its notes open the segment): the user's
        // previous message, and any call held on it, are in the segment before. Read there,
        // so a retried Yes still confirms what the first attempt confirmed (one read, on this
        // retry only).
        let compacted_here = conv.segment > 0
            && history.first().is_some_and(|m| {
                m.role == Role::User
                    && m.call.is_some()
                    && m.action_id.as_deref() == Some(input.action_id.0.as_str())
            });
        let before = match compacted_here {
            true => Some(store.messages(id, conv.segment - 1).await?),
            false => None,
        };
        let answered_on = before.as_deref().unwrap_or(&history);
        // The user's message before this one: only a call held on it can be confirmed now.
        let previous_action = answered_on
            .iter()
            .rev()
            .filter(|m| m.role == Role::User)
            .filter_map(|m| m.action_id.as_deref())
            .find(|a| *a != input.action_id.0)
            .map(str::to_owned);
        let answer = crate::Answer::read(
            &input.text,
            input.button_id.as_deref(),
            previous_action,
            answered_on,
            id,
        )
        .unless_sent_before_asked(input.sent_at_ms, answered_on)
        .unless_unproven(input.typed_yes);
        // A resumed turn that already held a call still offers the buttons.
        let held_now = match resumed {
            Some(_) if !overtaken => {
                crate::confirm::held_descriptions(&history, &input.action_id.0)
            }
            _ => Vec::new(),
        };
        if resumed.is_none() && !overtaken {
            conv.turn += 1;
            if conv.prompt_version != engine.options.prompt_version {
                if !conv.prompt_version.is_empty() {
                    tracing::info!(from = %conv.prompt_version, to = %engine.options.prompt_version, "system prompt version changed");
                }
                conv.prompt_version = engine.options.prompt_version.clone();
            }
            // Written with the user's message (`Turn::append_user`): one write starts the turn.
        }
        // The turn before, left asking for tools (never given up): closed first, or every
        // request from now on would carry calls without results, which a provider refuses.
        // A crash between its two rows leaves its calls answered, which is all a provider needs.
        let mut history = history;
        if resumed.is_none()
            && !overtaken
            && let Some((previous, next)) = resume::left_asking(&history)
        {
            let position = history.last().map_or(0, |m| m.position + 1);
            let rows = engine
                .closing_rows(&conv, &previous, next, lines::STOPPED, position)
                .await?;
            for row in rows {
                store.append_message(&row).await?;
                history.push(row);
            }
            tracing::warn!(conversation = %id, previous = %previous, "the turn before was left asking for tools; closed it");
        }
        // The segment's last row is the transcript's last (a new segment opens after every
        // position of the one before), so its read gives the next position without another.
        // An empty first segment is a conversation with no rows (rows are never deleted, and
        // only a compaction, of rows, opens a later segment); an empty later one asks the
        // store. A segment a crashed compaction left behind is adopted where its rows are met
        // (`Turn::append`).
        let next_position = match history.last() {
            Some(last) => last.position + 1,
            None if conv.segment == 0 => 0,
            None => store.next_position(id).await?,
        };
        // A hint read with the conversation saves the Query; it may lag, never lead, so a new
        // turn that meets its position taken asks again (`Turn::append_user`).
        let next_visible = match visible_hint {
            Some(hint) => hint,
            None => store.next_visible_position(id).await?,
        };
        let tools = engine.specs.for_purpose(&engine.tools, &conv.purpose);
        // The assistant's grant as the account holds it now (the widest when there is no
        // account); the tool list above does not depend on it. A write re-reads it.
        // One read for the turn: the guards (the account's status) and the context block (name,
        // time zone) use it too.
        let account =
            match account_read.filter(|a| a.as_ref().is_none_or(|a| a.user == conv.user_id)) {
                Some(read) => read,
                None => store.account(&conv.user_id).await?,
            };
        let grant = account
            .as_ref()
            .map(|a| a.assistant_grant)
            .unwrap_or_default();
        let ctx = Ctx {
            user_id: conv.user_id.clone(),
            actor: Actor::Agent,
            action_id: input.action_id.clone(),
            conversation_id: id.clone(),
            call_key: None,
            grant,
        };
        let mut turn = Turn {
            engine,
            sink,
            conv,
            ctx,
            history: History::new(history),
            next_position,
            next_visible,
            tools,
            shown: Shown::default(),
            model_calls: 0,
            usage: Usage::default(),
            action_id: input.action_id.0.clone(),
            resume: None,
            strip_reasoning: false,
            answer,
            calls_before: 0,
            resumed: false,
            overtaken,
            tool_errors: 0,
            held_now,
            wrote_user_entry: false,
            visible_hinted: visible_hint.is_some(),
            account,
            facts,
            settlement: Vec::new(),
            next_call: None,
        };
        match resumed {
            // Its rows are followed by a later turn's, which it would read as its own (and its
            // visible entries by that turn's number), or moved on from by that turn's
            // compaction: nothing is run or written.
            _ if overtaken => {
                tracing::warn!("a later message's turn began after this one; not run again");
            }
            None => {
                // A Yes press records what it ran at the position its message takes, and finds
                // it there again on a retry: a compaction first would move that position by
                // whether it succeeded (one attempt's failed, the next one's not), and the
                // retry would find nothing, say "Nothing was done" of a change made, and invite
                // it again. Compaction waits for the next turn.
                if turn.answer.press != Some(crate::Press::Yes) {
                    turn.compact_if_needed().await?;
                }
                let decided = match turn.settle_press().await? {
                    Some(note) => Some(note),
                    None => turn.answer.unproven_note(),
                };
                let text = turn
                    .user_message_text(&input.model_text(), decided.as_deref())
                    .await;
                turn.append_user(input.user_parts(text), input.text.clone())
                    .await?;
                turn.wrote_user_entry = true;
            }
            Some(r) => {
                tracing::warn!(calls_made = r.calls_made, next = ?r.next, "resuming a turn that was cut short");
                turn.model_calls = r.calls_made;
                turn.calls_before = r.calls_made;
                turn.resumed = true;
                turn.shown.restore(r.shown);
                turn.resume = Some(r.next);
                // The worker may have died between the transcript and the visible record. The
                // turn's entries come after every earlier turn's and its user's entry first: so
                // the newest entry tells, one bounded read, unless a later turn's came after.
                let this = turn.conv.turn;
                let recorded = match store.last_visible(id).await? {
                    None => false,
                    Some(last) if last.turn <= this => last.turn == this,
                    Some(_) => store
                        .visible(id)
                        .await?
                        .iter()
                        .any(|e| e.turn == this && e.role == VisibleRole::User),
                };
                if !recorded {
                    turn.append_visible(VisibleRole::User, input.text.clone())
                        .await?;
                }
            }
        }
        Ok(turn)
    }

    /// The loop: at most `max_cycles` model calls, each followed by its tools.
    pub(crate) async fn run(&mut self) -> Result<TurnEnd, EngineError> {
        if self.overtaken {
            return Ok(TurnEnd::Overtaken);
        }
        if self.conv.status != ConversationStatus::Active {
            tracing::info!(status = ?self.conv.status, "conversation not active; no reply");
            return Ok(TurnEnd::Paused);
        }
        let mut cycle = self.model_calls;
        match self.resume.take() {
            Some(Next::Finished) => return Ok(TurnEnd::Answered),
            Some(Next::Tools {
                calls,
                asked_at,
                stop,
            }) => {
                let asked = Asked {
                    at: asked_at,
                    resumed: true,
                };
                match self.handle_calls(&calls, &stop, cycle, asked).await? {
                    Flow::Continue => {}
                    Flow::End(end) => return Ok(end),
                    Flow::Conclude => return self.conclude(stop, true).await,
                }
            }
            Some(Next::Conclude { stop }) => return self.conclude(stop, true).await,
            // Every call the ceiling allows was made, and the last one's calls were answered
            // as not executed: what is left is the ceiling's line, not another call.
            Some(Next::Model) if cycle >= self.engine.options.max_cycles.max(1) => {
                tracing::warn!(cycles = cycle, "cycle ceiling reached");
                self.say(lines::CYCLE_LIMIT).await?;
                return Ok(TurnEnd::CycleLimit);
            }
            Some(Next::Model) | None => {}
        }
        if let Some(line) = self.press_line() {
            self.say(line).await?;
            return Ok(TurnEnd::Answered);
        }
        loop {
            cycle += 1;
            let mut acc = Streamed {
                earlier_call_ids: self.history.this_turns_call_ids(),
                ..Streamed::default()
            };
            let started = tokio::time::Instant::now();
            let result = match self.call_with_retry(&mut acc).await {
                Ok(result) => result,
                Err(denied) => {
                    tracing::warn!(reason = %denied.reason, "model call denied by guard");
                    self.say(&denied.user_message).await?;
                    return Ok(TurnEnd::Denied);
                }
            };
            let latency_ms = started.elapsed().as_millis() as u64;
            let (stop, usage) = match result {
                Ok(done) => done,
                Err(err) => return self.backend_failed(err, acc, latency_ms).await,
            };
            self.usage += usage;
            let calls = tool_calls(&acc.parts);
            let record = self.call_record(Some(stop.clone()), None, usage, latency_ms);
            self.append(Role::Assistant, acc.parts, Some(record))
                .await?;
            if !calls.is_empty() {
                let asked = Asked {
                    at: self.next_position - 1,
                    resumed: false,
                };
                match self.handle_calls(&calls, &stop, cycle, asked).await? {
                    Flow::Continue => continue,
                    Flow::End(end) => return Ok(end),
                    Flow::Conclude => {}
                }
            }
            return self.conclude(stop, !calls.is_empty()).await;
        }
    }

    /// Run the calls of an answer, or answer them as not executed when the answer was cut off
    /// or the ceiling is reached.
    async fn handle_calls(
        &mut self,
        calls: &[ToolCall],
        stop: &StopReason,
        cycle: u32,
        asked: Asked,
    ) -> Result<Flow, EngineError> {
        let max_cycles = self.engine.options.max_cycles.max(1);
        let runnable = resume::runs_tools(stop);
        if runnable && cycle < max_cycles {
            self.run_tools(calls, asked).await?;
            return Ok(Flow::Continue);
        }
        let why = if runnable {
            "NOT EXECUTED: the step limit for this message was reached. Do not call tools again; tell the user where things stand.".to_owned()
        } else {
            format!(
                "NOT EXECUTED: your response ended ({}) before this call could run.",
                stop.as_str()
            )
        };
        self.not_executed(calls, &why).await?;
        if runnable {
            tracing::warn!(cycles = cycle, "cycle ceiling reached");
            self.say(lines::CYCLE_LIMIT).await?;
            return Ok(Flow::End(TurnEnd::CycleLimit));
        }
        Ok(Flow::Conclude)
    }

    /// Map the final stop reason to an outcome, adding a line where the user needs one.
    async fn conclude(
        &mut self,
        stop: StopReason,
        had_calls: bool,
    ) -> Result<TurnEnd, EngineError> {
        let (end, line) = match &stop {
            StopReason::EndTurn | StopReason::StopSequence => (TurnEnd::Answered, None),
            StopReason::ToolUse if had_calls => (TurnEnd::Answered, None),
            StopReason::ToolUse | StopReason::MalformedToolUse => {
                (TurnEnd::Muddled, Some(lines::MUDDLED))
            }
            StopReason::MaxTokens => (TurnEnd::CutOff, Some(lines::CUT_OFF)),
            StopReason::Refusal | StopReason::ContentFiltered | StopReason::Guardrail => {
                let line = (!self.last_call_had_text()).then_some(lines::DECLINED);
                (TurnEnd::Declined, line)
            }
            StopReason::ContextWindowExceeded => (TurnEnd::ContextTooLong, Some(lines::TOO_LONG)),
            StopReason::Other(raw) => {
                tracing::warn!(stop_reason = %raw, "unknown stop reason");
                if self.last_call_had_text() {
                    (TurnEnd::Answered, None)
                } else {
                    (TurnEnd::Muddled, Some(lines::MUDDLED))
                }
            }
        };
        if let Some(line) = line {
            self.say(line).await?;
        }
        Ok(end)
    }

    fn last_call_had_text(&self) -> bool {
        self.history.last_row_had_text()
    }
}
