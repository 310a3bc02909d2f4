//! The model calls of a turn: the request, one call behind the guard, the retry, and what a
//! failed call leaves behind.

use super::Turn;
use crate::call::{Limits, Streamed, stream_call};
use crate::{CallReport, EngineError, GuardCall, TurnEnd, TurnEvent, lines};
use backend::{BackendError, ChatRequest};
use std::time::Duration;
use tracing::Instrument;
use transcript::{Part, Role, StopReason, Usage};

impl Turn<'_> {
    /// One model call. When it failed before anything was streamed, it is tried again: once
    /// without replayed reasoning if the provider rejected it, once without each optional
    /// feature the provider refused (lean mode), and once after a transient failure.
    /// The outer `Err` is a guard denial.
    pub(super) async fn call_with_retry(
        &mut self,
        acc: &mut Streamed,
    ) -> Result<Result<(StopReason, Usage), BackendError>, crate::Denied> {
        let mut retried = false;
        loop {
            let err = match self.call_once(acc).await? {
                Err(err) if !acc.emitted => err,
                other => return Ok(other),
            };
            match &err {
                BackendError::ReasoningRejected { .. } if !self.strip_reasoning => {
                    tracing::warn!(error = %err, "replayed reasoning rejected; retrying without it");
                    self.strip_reasoning = true;
                }
                BackendError::FeatureRejected { feature, .. }
                    if !self.engine.lean.dropped(*feature) =>
                {
                    if self.engine.lean.drop_feature(*feature) {
                        tracing::warn!(?feature, error = %err, "the provider refused an optional feature; lean mode from now on");
                    }
                }
                // A server that sent keep-alives had the request: a timeout's retry would only
                // queue behind it (a single-slot local server).
                BackendError::Timeout { .. } if acc.kept_alive => return Ok(Err(err)),
                _ if err.is_retryable() && !retried => {
                    retried = true;
                    let wait = match &err {
                        BackendError::Throttled {
                            retry_after: Some(d),
                        } => *d,
                        _ => Duration::from_millis(250),
                    };
                    if wait > self.engine.options.max_retry_wait {
                        return Ok(Err(err));
                    }
                    tracing::warn!(error = %err, kind = err.kind(), "model call failed before streaming; retrying once");
                    tokio::time::sleep(wait).await;
                }
                _ => return Ok(Err(err)),
            }
            *acc = Streamed {
                earlier_call_ids: std::mem::take(&mut acc.earlier_call_ids),
                ..Streamed::default()
            };
        }
    }

    pub(super) async fn call_once(
        &mut self,
        acc: &mut Streamed,
    ) -> Result<Result<(StopReason, Usage), BackendError>, crate::Denied> {
        let engine = self.engine;
        let (mut request, prepared) = match self.next_call.take() {
            Some(next) => (next.request, next.permit),
            None => (self.request(), None),
        };
        self.model_calls += 1;
        let guard_call = GuardCall {
            conversation: &self.conv,
            call_number: self.model_calls,
            request: &request,
            account: self.account.as_ref(),
        };
        let guard_span = crate::spans::guard(self.model_calls);
        let permit = match prepared {
            // Reserved with the tool message just stored, under the same caps.
            Some(permit) => {
                guard_span.record("outcome", "allowed");
                permit
            }
            None => match engine
                .guard
                .before_model_call(&guard_call)
                .instrument(guard_span.clone())
                .await
            {
                Ok(permit) => {
                    guard_span.record("outcome", "allowed");
                    permit
                }
                Err(denied) => {
                    guard_span.record("outcome", "denied");
                    // Not made, so not counted (the turn's metrics, and whoever delivers a
                    // reply that is only the refusal, read the count).
                    self.model_calls -= 1;
                    return Err(denied);
                }
            },
        };
        // The guard may lower the output allowance to what the budget reserved for.
        permit.limit(&mut request.settings);
        self.shown.close_block();
        let limits = Limits {
            call_timeout: engine.options.call_timeout,
            idle_timeout: engine.options.idle_timeout,
        };
        let span = crate::spans::model_call(engine.model.name(), &engine.options.model_id);
        let started = tokio::time::Instant::now();
        let result = stream_call(
            engine.model.as_ref(),
            request,
            limits,
            self.sink,
            &mut self.shown,
            acc,
        )
        .instrument(span.clone())
        .await;
        crate::spans::model_call_done(&span, &result, started, acc.first_event_at);
        let report = report(&result, acc);
        // Inside the call's span: the budget records what it priced the call at there. An
        // answer is stored next (`Turn::append`), and its settlement goes with it; a failed
        // call (tried again, or answered by the harness) settles now.
        if result.is_ok() {
            let settlement = engine
                .guard
                .settle_with_answer(&self.conv, permit, &report)
                .instrument(span)
                .await;
            for earlier in std::mem::replace(&mut self.settlement, settlement) {
                earlier.apply().await;
            }
        } else {
            engine
                .guard
                .settle(&self.conv, permit, &report)
                .instrument(span)
                .await;
        }
        Ok(result)
    }

    pub(super) fn request(&self) -> ChatRequest {
        self.request_of(&self.history)
    }

    /// The request a model call after `history` sends.
    pub(super) fn request_of(&self, history: &crate::history::History) -> ChatRequest {
        let messages = if self.strip_reasoning {
            history.chat_without_reasoning()
        } else {
            history.chat()
        };
        self.engine.request_for(messages, self.tools.clone())
    }

    /// Log the raw error; record and show what the user saw plus a calm sentence.
    pub(super) async fn backend_failed(
        &mut self,
        err: BackendError,
        acc: Streamed,
        latency_ms: u64,
    ) -> Result<TurnEnd, EngineError> {
        tracing::error!(error = %err, kind = err.kind(), streamed = acc.emitted, "model call failed");
        let line = match err {
            BackendError::Throttled { .. } => lines::THROTTLED,
            BackendError::Overloaded => lines::OVERLOADED,
            BackendError::Timeout { .. } => lines::TIMED_OUT,
            BackendError::Unreachable { .. } => lines::UNREACHABLE,
            _ => lines::BACKEND_FAILED,
        };
        let mut parts = acc.visible_parts();
        let shown_line = self.shown.show_line(line);
        parts.push(Part::text(shown_line.trim_start()));
        let record = self.call_record(None, Some(err.kind()), Usage::default(), latency_ms);
        self.append(Role::Assistant, parts, Some(record)).await?;
        self.sink.emit(TurnEvent::Error {
            message: line.to_owned(),
        });
        Ok(TurnEnd::BackendFailed)
    }
}

/// What a call did, for its guard to settle it by.
pub(super) fn report(
    result: &Result<(StopReason, Usage), BackendError>,
    acc: &Streamed,
) -> CallReport {
    CallReport {
        usage: result.as_ref().map(|(_, u)| *u).unwrap_or_default(),
        failed: result.is_err(),
        streamed: acc.emitted || acc.kept_alive || !acc.parts.is_empty(),
        streamed_bytes: streamed_bytes(&acc.parts),
        timed_out: matches!(result, Err(BackendError::Timeout { .. })),
    }
}

/// UTF-8 bytes of output in streamed parts: what a provider bills as output tokens, roughly
/// (a budget estimates a token per four, whatever the script).
fn streamed_bytes(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| match p {
            Part::Text { text } => text.len(),
            Part::ToolUse { input, name, .. } => transcript::json_bytes(input) + name.len(),
            other => transcript::json_bytes(other),
        })
        .sum()
}
