//! Provider failures, stalls and guards: a calm sentence for the user, the raw error in the log.

use async_trait::async_trait;
use backend::{BackendError, Reply};
use engine::{Denied, EngineOptions, Guard, GuardCall, Permit, TurnEnd, TurnEvent, lines};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tests::{Harness, Logs};
use transcript::{ConversationStatus, Role};

fn transport(msg: &str) -> BackendError {
    BackendError::transport(msg)
}

#[tokio::test(start_paused = true)]
async fn an_error_before_streaming_is_retried_once() {
    let h = Harness::new([
        Reply::error(transport("connection reset")),
        Reply::text("Hello!"),
    ])
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered);
    assert_eq!(t.outcome.reply, "Hello!");
    assert_eq!(t.outcome.model_calls, 2);
    assert_eq!(
        h.model.requests()[0],
        h.model.requests()[1],
        "the retry is the same request"
    );
}

#[tokio::test(start_paused = true)]
async fn a_second_failure_gives_a_calm_sentence_and_the_raw_error_goes_to_the_log() {
    let logs = Logs::default();
    let _g = logs.install();
    let h = Harness::new([
        Reply::error(transport("tls handshake eof at 10.0.0.7")),
        Reply::error(transport("tls handshake eof at 10.0.0.7")),
        Reply::text("Back again."),
    ])
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert_eq!(t.outcome.reply, lines::BACKEND_FAILED);
    let log = logs.text();
    assert!(log.contains("tls handshake eof at 10.0.0.7"), "{log}");
    assert!(!t.outcome.reply.contains("tls"));
    let rows = h.transcript().await;
    let failed = rows.last().unwrap();
    assert_eq!(failed.role, Role::Assistant);
    assert_eq!(
        failed.call.as_ref().unwrap().error.as_deref(),
        Some("transport")
    );
    // The next turn is coherent: the model learns what the user was shown as a note from the
    // harness, never as its own words (small models repeat such lines as answers).
    let t2 = h.turn("hi again").await;
    assert_eq!(t2.outcome.reply, "Back again.");
    let msgs = &h.model.requests()[2].messages;
    assert!(msgs.iter().all(|m| m.role != Role::Assistant), "{msgs:?}");
    let said: Vec<&str> = msgs[0].parts.iter().filter_map(|p| p.as_text()).collect();
    assert!(
        said.iter()
            .any(|t| t.starts_with("<harness_note>") && t.contains(lines::BACKEND_FAILED)),
        "{said:?}"
    );
    assert!(said.last().unwrap().contains("hi again"), "{said:?}");
}

#[tokio::test(start_paused = true)]
async fn an_error_after_streaming_began_is_not_retried() {
    let h = Harness::new([
        Reply::new()
            .say("Here is the start")
            .then_fail(transport("stream reset")),
        Reply::text("should never be used"),
    ])
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert_eq!(t.outcome.model_calls, 1);
    assert_eq!(h.model.remaining(), 1);
    assert_eq!(
        t.outcome.reply,
        format!("Here is the start\n\n{}", lines::BACKEND_FAILED)
    );
    // History holds exactly what the user saw.
    let last = h.transcript().await.last().unwrap().clone();
    assert_eq!(
        last.text(),
        format!("Here is the start{}", lines::BACKEND_FAILED)
    );
    assert!(
        t.events
            .iter()
            .any(|e| matches!(e, TurnEvent::Error { .. }))
    );
}

#[tokio::test(start_paused = true)]
async fn throttling_has_its_own_sentence() {
    let throttled = || BackendError::Throttled {
        retry_after: Some(Duration::from_secs(1)),
    };
    let h = Harness::new([Reply::error(throttled()), Reply::error(throttled())]).await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.reply, lines::THROTTLED);
    assert!(lines::THROTTLED.contains("try again in a minute"));
    assert_eq!(t.outcome.model_calls, 2);
}

#[tokio::test(start_paused = true)]
async fn an_overloaded_model_has_its_own_sentence() {
    let h = Harness::new([
        Reply::error(BackendError::Overloaded),
        Reply::error(BackendError::Overloaded),
    ])
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.reply, lines::OVERLOADED);
    assert_ne!(lines::OVERLOADED, lines::THROTTLED);
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
}

#[tokio::test(start_paused = true)]
async fn a_long_retry_after_is_not_waited_for() {
    let h = Harness::new([Reply::error(BackendError::Throttled {
        retry_after: Some(Duration::from_secs(30)),
    })])
    .await;
    let t = h.turn("hi").await;
    assert_eq!(
        (t.outcome.end, t.outcome.model_calls),
        (TurnEnd::BackendFailed, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn non_retryable_errors_are_not_retried() {
    for err in [
        BackendError::Auth {
            message: "bad key sk-123".into(),
        },
        BackendError::InvalidRequest {
            message: "bad".into(),
        },
        BackendError::ContextTooLong,
    ] {
        let h = Harness::new([Reply::error(err), Reply::text("unused")]).await;
        let t = h.turn("hi").await;
        assert_eq!(
            (t.outcome.end, t.outcome.model_calls),
            (TurnEnd::BackendFailed, 1)
        );
        assert!(!t.outcome.reply.contains("sk-123"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_stall_before_any_token_times_out_and_is_retried_once() {
    let h = Harness::new([
        Reply::new().then_stall(),
        Reply::text("Sorry for the wait."),
    ])
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.reply, "Sorry for the wait.");
    assert_eq!(t.outcome.model_calls, 2);
}

#[tokio::test(start_paused = true)]
async fn a_stall_mid_stream_times_out_without_retry() {
    let h = Harness::new([
        Reply::new().say("Thinking about").then_stall(),
        Reply::text("unused"),
    ])
    .await;
    let started = tokio::time::Instant::now();
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert_eq!(
        t.outcome.reply,
        format!("Thinking about\n\n{}", lines::TIMED_OUT)
    );
    assert_eq!(started.elapsed(), EngineOptions::default().idle_timeout);
    let record = h.transcript().await.last().unwrap().call.clone().unwrap();
    assert_eq!(record.error.as_deref(), Some("timeout"));
}

#[tokio::test(start_paused = true)]
async fn a_slow_trickle_hits_the_call_deadline() {
    // Each token arrives within the idle timeout, but the whole call exceeds its deadline.
    let mut reply = Reply::new();
    for _ in 0..10 {
        reply = reply.say("tick ").then_wait(Duration::from_secs(14));
    }
    let options = EngineOptions {
        call_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let h = Harness::with_options([reply], options).await;
    let started = tokio::time::Instant::now();
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert_eq!(started.elapsed(), Duration::from_secs(60));
    assert!(t.outcome.reply.ends_with(lines::TIMED_OUT));
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_without_done_is_an_error_not_a_shorter_answer() {
    let h = Harness::new([Reply::new().say("Half an ans")]).await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert!(t.outcome.reply.ends_with(lines::BACKEND_FAILED));
}

/// Denies the n-th model call and every later one; counts calls it saw.
struct DenyFrom {
    from: u32,
    seen: AtomicU32,
    settled: AtomicU32,
}

#[async_trait]
impl Guard for DenyFrom {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!(call.call_number, n);
        assert_eq!(call.conversation.user_id.0, "user-1");
        if n >= self.from {
            return Err(Denied {
                kind: engine::DeniedKind::Limit,
                reason: "budget:user_hour_tokens".into(),
                user_message: "You've reached this hour's limit. It resets soon.".into(),
            });
        }
        Ok(Permit::carrying(n))
    }

    async fn after_model_call(
        &self,
        _: &transcript::Conversation,
        permit: Permit,
        usage: &transcript::Usage,
    ) {
        assert!(usage.output_tokens > 0);
        // The permit of the same call comes back.
        assert_eq!(
            permit.take::<u32>(),
            Some(self.settled.load(Ordering::SeqCst) + 1)
        );
        self.settled.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn the_guard_runs_before_every_model_call_and_can_stop_the_turn() {
    let guard = Arc::new(DenyFrom {
        from: 3,
        seen: AtomicU32::new(0),
        settled: AtomicU32::new(0),
    });
    let h = Harness::with_guard(
        [
            Reply::tool_call("t1", "list_events", serde_json::json!({})),
            Reply::tool_call("t2", "list_events", serde_json::json!({})),
            Reply::text("unused"),
        ],
        guard.clone(),
    )
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert_eq!(guard.seen.load(Ordering::SeqCst), 3);
    assert_eq!(guard.settled.load(Ordering::SeqCst), 2);
    assert_eq!(
        h.model.requests().len(),
        2,
        "no model call after the denial"
    );
    assert_eq!(
        t.outcome.reply,
        "You've reached this hour's limit. It resets soon."
    );
    let last = h.transcript().await.last().unwrap().clone();
    assert_eq!(last.text(), t.outcome.reply);
}

#[tokio::test]
async fn a_paused_conversation_gets_no_model_call() {
    let h = Harness::new([Reply::text("unused")]).await;
    let mut conv = store::ConversationStore::conversation(h.store.as_ref(), &h.conversation)
        .await
        .unwrap()
        .unwrap();
    conv.status = ConversationStatus::Paused;
    store::ConversationStore::update_conversation(h.store.as_ref(), &conv)
        .await
        .unwrap();
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.end, TurnEnd::Paused);
    assert!(h.model.requests().is_empty());
    assert_eq!(
        h.transcript().await.len(),
        1,
        "the user's message is still recorded"
    );
}
