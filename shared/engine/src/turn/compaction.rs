//! Compaction inside a turn: notes into a new segment when the history is past the threshold.

use super::Turn;
use super::model::report;
use crate::call::{Limits, Shown, Streamed, stream_call};
use crate::history::History;
use crate::{EngineError, GuardCall, NullSink, compact};
use transcript::{Part, Role, StopReason};

impl Turn<'_> {
    /// When the current segment is past the threshold, ask the model for notes and continue in
    /// a new segment that opens with them. Any failure leaves the history as it was; one that
    /// trying again would not mend also puts the next try off ([`Turn::put_off_compaction`]).
    pub(super) async fn compact_if_needed(&mut self) -> Result<(), EngineError> {
        let engine = self.engine;
        let o = &engine.options;
        let chars = compact::content_weight(self.history.messages());
        // A conversation that is not active makes no model call, compaction's neither.
        if chars <= o.compaction_threshold_chars
            || (chars as u64) < self.conv.compaction_retry_at_chars
            || self.conv.status != transcript::ConversationStatus::Active
        {
            return Ok(());
        }
        let next_segment = self.conv.segment + 1;
        // A crash after the notes were written but before the conversation moved on: reuse them.
        let written = engine.store.messages(&self.conv.id, next_segment).await?;
        if !written.is_empty() {
            self.conv.segment = next_segment;
            self.conv.compaction_retry_at_chars = 0;
            engine.store.update_conversation(&self.conv).await?;
            if let Some(last) = written.last() {
                self.next_position = self.next_position.max(last.position + 1);
            }
            self.history = History::new(written);
            return Ok(());
        }
        let mut request = compact::notes_request(
            &o.model_id,
            self.history.messages(),
            o.compaction_max_tokens,
        );
        self.model_calls += 1;
        let call = GuardCall {
            conversation: &self.conv,
            call_number: self.model_calls,
            request: &request,
            account: self.account.as_ref(),
        };
        let permit = match engine.guard.before_model_call(&call).await {
            Ok(permit) => permit,
            Err(denied) => {
                // Not made, so not counted: the turn's own call is then its first, and a
                // guard that charges the first call (the conversation's messages an hour)
                // charges it; counted, that call would go unmetered.
                self.model_calls -= 1;
                tracing::warn!(reason = %denied.reason, "compaction skipped: guard denied the call");
                return Ok(());
            }
        };
        permit.limit(&mut request.settings);
        let limits = Limits {
            call_timeout: o.call_timeout,
            idle_timeout: o.idle_timeout,
        };
        let started = tokio::time::Instant::now();
        let mut acc = Streamed::default();
        let result = stream_call(
            engine.model.as_ref(),
            request,
            limits,
            &NullSink,
            &mut Shown::default(),
            &mut acc,
        )
        .await;
        let report = report(&result, &acc);
        engine.guard.settle(&self.conv, permit, &report).await;
        let (stop, usage) = match result {
            Ok(done) => done,
            Err(err) => {
                tracing::warn!(error = %err, kind = err.kind(), chars, "compaction failed; carrying on with the full history");
                // A throttled or broken call may well work next turn, and one refused for
                // the credentials once the operator mends them; a refusal of the request would
                // not, nor a summary that ran out of time (the segment only grows: tried every
                // turn, each would pay for the whole segment again, and then the turn's call).
                let passing =
                    err.is_retryable() && !matches!(err, backend::BackendError::Timeout { .. });
                if !passing && !matches!(err, backend::BackendError::Auth { .. }) {
                    self.put_off_compaction(chars).await;
                }
                return Ok(());
            }
        };
        self.usage += usage;
        let notes: String = acc.parts.iter().filter_map(Part::as_text).collect();
        if notes.trim().is_empty() || !matches!(stop, StopReason::EndTurn | StopReason::MaxTokens) {
            tracing::warn!(
                stop_reason = stop.as_str(),
                chars,
                "compaction produced no notes; carrying on with the full history"
            );
            self.put_off_compaction(chars).await;
            return Ok(());
        }
        let mut record = self.call_record(
            Some(stop),
            None,
            usage,
            started.elapsed().as_millis() as u64,
        );
        record.tools_offered.clear();
        self.conv.segment = next_segment;
        self.conv.compaction_retry_at_chars = 0;
        self.history = History::default();
        self.append(
            Role::User,
            vec![Part::text(compact::notes_message_text(&notes))],
            Some(record),
        )
        .await?;
        engine.store.update_conversation(&self.conv).await?;
        tracing::info!(
            segment = next_segment,
            chars,
            "compacted into a new segment"
        );
        Ok(())
    }

    /// A compaction failed in a way trying again would not mend (no notes, a refusal, a
    /// request the provider will not take): the next waits until the segment has grown by a
    /// quarter of the threshold, rather than every turn costing one more call that sends the
    /// whole segment (a sender whose words make the summariser refuse would double what each of
    /// their turns costs). Kept on the conversation, so a retry or another instance waits too;
    /// a write that fails leaves the next turn to try again, as before.
    async fn put_off_compaction(&mut self, chars: usize) {
        let quarter = self.engine.options.compaction_threshold_chars / 4;
        self.conv.compaction_retry_at_chars = chars.saturating_add(quarter.max(1)) as u64;
        if let Err(err) = self.engine.store.update_conversation(&self.conv).await {
            tracing::warn!(error = %err, "could not record when to try compacting again; the next turn tries");
        }
        tracing::info!(
            retry_at_chars = self.conv.compaction_retry_at_chars,
            "compaction put off until the segment grows"
        );
    }
}
