//! What a turn writes: transcript rows, visible entries, the harness's own lines, the outcome.

use super::Turn;
use crate::context::{self, ContextFacts};
use crate::{EngineError, TurnEnd, TurnEvent, TurnOutcome, lines};
use std::sync::Arc;
use store::{VisibleEntry, VisibleRole};
use transcript::{CallRecord, ConversationStatus, Message, Part, Role, StopReason, Usage};

/// The turn's first model call, built with its start (`Turn::append_user`), and reserved for
/// with it when the guard prepares a reservation the store can write.
struct FirstCall {
    /// The history with the user's message.
    history: crate::history::History,
    request: backend::ChatRequest,
    /// The reservation's charges and the permit they buy, once written.
    reserved: Option<(Vec<store::Charge>, crate::Permit)>,
}

impl Turn<'_> {
    /// The user's message as stored and sent: with the context block when the engine has a
    /// context source (its facts as the caller read them beside the turn's start, else read
    /// now), else the words alone.
    pub(super) async fn user_message_text(&mut self, text: &str, note: Option<&str>) -> String {
        let Some(source) = &self.engine.context else {
            return super::press::with_note(text.to_owned(), note.map(str::to_owned));
        };
        let read = match self.facts.take() {
            Some(read) => read,
            None => source.facts(&self.conv.user_id, &self.conv.id).await,
        };
        let mut facts = read.unwrap_or_else(|err| {
            tracing::warn!(error = %err, "context facts unavailable; the block has time and channel only");
            ContextFacts::default()
        });
        // The account the turn read gives the name and time zone the domain left out.
        if let Some(account) = &self.account {
            let name = account.display_name.trim();
            if facts.user_name.is_none() && !name.is_empty() {
                facts.user_name = Some(account.display_name.clone());
            }
            if facts.time_zone.is_none() {
                facts.time_zone = Some(account.time_zone.clone());
            }
        }
        context::render(&facts, &self.conv, (self.engine.clock)(), text, note)
    }

    /// A line from the harness itself: shown, and recorded as an assistant message.
    pub(super) async fn say(&mut self, line: &str) -> Result<(), EngineError> {
        let shown = self.shown.show_line(line);
        self.sink.emit(TurnEvent::Token {
            text: shown.clone(),
        });
        self.append(Role::Assistant, vec![Part::text(shown.trim_start())], None)
            .await
    }

    pub(crate) async fn finish(mut self, mut end: TurnEnd) -> Result<TurnOutcome, EngineError> {
        // A call reserved with the tool message before it always follows that message; should
        // a turn ever end without making it, the reservation is given back, not left counted.
        if let Some(permit) = self.next_call.take().and_then(|next| next.permit) {
            let unmade = crate::CallReport {
                failed: true,
                ..crate::CallReport::default()
            };
            self.engine.guard.settle(&self.conv, permit, &unmade).await;
        }
        if end == TurnEnd::Answered && self.shown.text.trim().is_empty() {
            self.say(lines::EMPTY).await?;
            end = TurnEnd::Muddled;
        }
        let shaped = self.with_confirm_buttons(crate::shape(&self.shown.text));
        let marked = shaped.text != self.shown.text || !shaped.buttons.is_empty() || shaped.silent;
        // A silent reply has no reaction in the web chat: it shows a short acknowledgement.
        let shown = if shaped.text.is_empty() && shaped.silent {
            lines::ACKNOWLEDGED.to_owned()
        } else {
            shaped.text.clone()
        };
        if marked {
            self.sink.emit(TurnEvent::Shaped {
                text: shown.clone(),
                buttons: shaped.buttons.clone(),
            });
        }
        self.sink.emit(TurnEvent::Done { end });
        tracing::info!(?end, model_calls = self.model_calls, "turn finished");
        Ok(TurnOutcome {
            end,
            reply: shaped.text,
            buttons: shaped.buttons,
            silent: shaped.silent,
            model_calls: self.model_calls,
            new_model_calls: self.model_calls - self.calls_before,
            resumed: self.resumed,
            usage: self.usage,
            tool_errors: self.tool_errors,
            turn: self.conv.turn,
            reply_position: self.wrote_user_entry.then_some(self.next_visible),
        })
    }

    pub(super) fn call_record(
        &self,
        stop_reason: Option<StopReason>,
        error: Option<&str>,
        usage: Usage,
        latency_ms: u64,
    ) -> CallRecord {
        CallRecord {
            backend: self.engine.model.name().to_owned(),
            model: self.engine.options.model_id.clone(),
            stop_reason,
            error: error.map(str::to_owned),
            usage,
            latency_ms,
            tools_offered: self.tools.iter().map(|t| t.name.clone()).collect(),
        }
    }

    pub(super) async fn append(
        &mut self,
        role: Role,
        parts: Vec<Part>,
        call: Option<CallRecord>,
    ) -> Result<(), EngineError> {
        let message = self.next_message(role, parts, call);
        let settlement = std::mem::take(&mut self.settlement);
        if !self.append_settling(&message, &settlement).await? {
            match self.engine.store.append_message(&message).await {
                Ok(()) => {}
                Err(store::StoreError::Conflict { what }) => {
                    return self.append_after_orphan(message, what).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.appended(message);
        Ok(())
    }

    /// The last model call's answer and its budget settlement as one write, where the store
    /// offers it and is the settlement's ledger: `true` when written. Otherwise (no such write,
    /// another ledger, or refused: the position taken) the settlement is written on its own and
    /// `false` says the message is still to be appended.
    async fn append_settling(
        &self,
        message: &Message,
        settlement: &[crate::Settlement],
    ) -> Result<bool, EngineError> {
        if settlement.iter().all(|s| s.adjustments.is_empty()) {
            return Ok(false);
        }
        let store = &self.engine.store;
        let ours = settlement.iter().all(|s| self.is_store(&s.ledger));
        if ours && let Some(writes) = store.turn_writes() {
            let adjustments: Vec<_> = settlement
                .iter()
                .flat_map(|s| s.adjustments.iter().cloned())
                .collect();
            match writes.append_message_adjusting(message, &adjustments).await {
                Ok(()) => return Ok(true),
                Err(store::StoreError::Conflict { what }) => {
                    tracing::info!(
                        what,
                        "an answer and its settlement were refused together; one by one"
                    );
                }
                // Maybe written, maybe not: settling again could count the call twice, so the
                // reservation stays, as when a settlement alone fails.
                Err(e) => {
                    tracing::error!(error = %e, "storing an answer with its budget settlement failed");
                    return Err(e.into());
                }
            }
        }
        for s in settlement {
            s.apply().await;
        }
        Ok(false)
    }

    /// Whether `ledger` is this turn's store (so budget writes can share its writes).
    pub(super) fn is_store(&self, ledger: &Arc<dyn store::BudgetLedger>) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(ledger), Arc::as_ptr(&self.engine.store))
    }

    /// The message this turn appends next, at the next position.
    pub(super) fn next_message(
        &self,
        role: Role,
        parts: Vec<Part>,
        call: Option<CallRecord>,
    ) -> Message {
        Message {
            conversation_id: self.conv.id.clone(),
            segment: self.conv.segment,
            position: self.next_position,
            role,
            parts,
            call,
            action_id: Some(self.action_id.clone()),
            created_at_ms: (self.engine.clock)(),
        }
    }

    /// `message` (from [`Turn::next_message`]) is stored: the turn moves past it.
    pub(super) fn appended(&mut self, message: Message) {
        self.next_position += 1;
        self.history.push(message);
    }

    /// The position is taken. Rows only get there from the segment after this one, which a
    /// compaction that crashed between writing its notes and moving the conversation on left
    /// behind (the threshold since raised, so this turn did not compact): move on to that
    /// segment, as compaction would have, and append after it. Anything else is the
    /// `Conflict` it is (another attempt of this turn writing, say): never written twice.
    async fn append_after_orphan(
        &mut self,
        mut message: Message,
        what: String,
    ) -> Result<(), EngineError> {
        let store = &self.engine.store;
        let next_segment = self.conv.segment + 1;
        let written = store.messages(&self.conv.id, next_segment).await?;
        let Some(last) = written.last() else {
            return Err(store::StoreError::Conflict { what }.into());
        };
        tracing::warn!(
            segment = next_segment,
            "a crashed compaction's notes were found; moving on to their segment"
        );
        self.conv.segment = next_segment;
        // A compaction that wrote notes succeeded: the next is due at the threshold again.
        self.conv.compaction_retry_at_chars = 0;
        store.update_conversation(&self.conv).await?;
        self.next_position = last.position + 1;
        self.history = crate::history::History::new(written);
        message.segment = next_segment;
        message.position = self.next_position;
        store.append_message(&message).await?;
        self.next_position += 1;
        self.history.push(message);
        Ok(())
    }

    /// A new turn's start in one write, all or nothing: the conversation moved on to this turn,
    /// the user's message and the user's entry in the visible transcript. A taken position
    /// falls back to writing them one after the other, which adopts a crashed compaction's
    /// segment ([`Turn::append`]) or reports the `Conflict`. A crash before it leaves nothing
    /// of the turn (the retry starts it afresh with the same number). A visible position from
    /// the conversation's hint is asked for again when taken, and the write tried once more.
    pub(super) async fn append_user(
        &mut self,
        parts: Vec<Part>,
        text: String,
    ) -> Result<(), EngineError> {
        let now = (self.engine.clock)();
        let message = Message {
            conversation_id: self.conv.id.clone(),
            segment: self.conv.segment,
            position: self.next_position,
            role: Role::User,
            parts,
            call: None,
            action_id: Some(self.action_id.clone()),
            created_at_ms: now,
        };
        let entry = VisibleEntry {
            conversation_id: self.conv.id.clone(),
            position: self.next_visible,
            role: VisibleRole::User,
            text,
            buttons: Vec::new(),
            reaction: None,
            turn: self.conv.turn,
            created_at_ms: now,
        };
        let store = &self.engine.store;
        let mut first = self.first_call_after(&message).await;
        let mut started = self.start_write(&message, &entry, &mut first).await;
        if matches!(started, Err(store::StoreError::Conflict { .. })) && self.visible_hinted {
            // The hinted position may lag (an entry written on its own): ask, and try once more.
            self.visible_hinted = false;
            let position = store.next_visible_position(&self.conv.id).await?;
            if position != entry.position {
                self.next_visible = position;
                let entry = VisibleEntry {
                    position,
                    ..entry.clone()
                };
                started = self.start_write(&message, &entry, &mut first).await;
            }
        }
        match started {
            Ok(()) => {
                self.next_position += 1;
                self.next_visible += 1;
                match first {
                    Some(first) => {
                        self.history = first.history;
                        self.next_call = Some(super::NextCall {
                            request: first.request,
                            permit: first.reserved.map(|(_, permit)| permit),
                        });
                    }
                    None => self.history.push(message),
                }
                Ok(())
            }
            Err(store::StoreError::Conflict { .. }) => {
                store.update_conversation(&self.conv).await?;
                self.append(Role::User, message.parts, None).await?;
                self.append_visible(VisibleRole::User, entry.text).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The turn's first model call, built to follow `message`, when the turn goes on to call
    /// the model (`Turn::run`: an active conversation, not a stale press); with the guard's
    /// prepared reservation when the store can write it with the start (it offers the combined
    /// writes and is the budget's ledger).
    async fn first_call_after(&self, message: &Message) -> Option<FirstCall> {
        if self.conv.status != ConversationStatus::Active || self.press_line().is_some() {
            return None;
        }
        let mut history = self.history.clone();
        history.push(message.clone());
        let request = self.request_of(&history);
        let reserved = match self.engine.store.turn_writes() {
            Some(_) => {
                let call = crate::GuardCall {
                    conversation: &self.conv,
                    call_number: self.model_calls + 1,
                    request: &request,
                    account: self.account.as_ref(),
                };
                self.engine
                    .guard
                    .prepare(&call)
                    .await
                    .filter(|p| self.is_store(&p.ledger))
                    .map(|p| (p.charges, p.permit))
            }
            None => None,
        };
        Some(FirstCall {
            history,
            request,
            reserved,
        })
    }

    /// Start the turn, with `first`'s reservation when there is one. A cap that refuses it
    /// drops it (the call then reserves as usual, reading what is left) and the turn starts
    /// on its own.
    async fn start_write(
        &self,
        message: &Message,
        entry: &VisibleEntry,
        first: &mut Option<FirstCall>,
    ) -> Result<(), store::StoreError> {
        let store = &self.engine.store;
        let reserved = first.as_mut().map(|f| &mut f.reserved);
        if let (Some(reserved), Some(writes)) = (reserved, store.turn_writes())
            && let Some((charges, _)) = reserved.as_ref()
        {
            if writes
                .start_turn_reserving(&self.conv, message, entry, charges)
                .await?
            {
                return Ok(());
            }
            tracing::info!(
                "the first call's reservation did not fit with the turn's start; on its own"
            );
            *reserved = None;
        }
        store.start_turn(&self.conv, message, entry).await
    }

    /// The user's entry in the visible transcript. The reply's entry is the job path's: it
    /// records what was actually delivered (`channel-jobs`).
    pub(super) async fn append_visible(
        &mut self,
        role: VisibleRole,
        text: String,
    ) -> Result<(), EngineError> {
        let entry = VisibleEntry {
            conversation_id: self.conv.id.clone(),
            position: self.next_visible,
            role,
            text,
            buttons: Vec::new(),
            reaction: None,
            turn: self.conv.turn,
            created_at_ms: (self.engine.clock)(),
        };
        self.engine.store.append_visible(&entry).await?;
        self.next_visible += 1;
        Ok(())
    }
}
