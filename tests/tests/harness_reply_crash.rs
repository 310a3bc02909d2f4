//! The harness's own replies (here "Linked!") under crashes after they went out. A worker that
//! dies once the reply is sent and recorded, before the job is marked done, leaves the job to
//! be taken over: the retry finds the reply recorded and sends nothing (it used to send it and
//! record it a second time: the code redeems again for the account that redeemed it). A crash
//! before the record is the window no platform without idempotency keys can close: there the
//! retry sends it again, and records it once (the user's line too, though the attempt that
//! died had recorded it).

use backend::ScriptedModel;
use channel_jobs::identity::Resolved;
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome, Ran, lines};
use channels::Sender;
use engine::{Engine, EngineOptions};
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use store::{Identities, Store, VisibleStore};
use store_sqlite::SqliteStore;
use tests::KeepingPlatform;
use tests::crash_store::{Crash, CrashAt, CrashStore};
use tools::Registry;

const START_MS: i64 = 1_796_119_260_000;
const CODE: &str = "K7PQ2345";

struct World {
    inner: Arc<SqliteStore>,
    platform: Arc<KeepingPlatform>,
    now: Arc<AtomicI64>,
    /// How far the webhook's clock, which dates the job, runs ahead of the worker's.
    webhook_ahead_ms: i64,
}

impl World {
    async fn new() -> Self {
        let inner = Arc::new(SqliteStore::open_in_memory().unwrap());
        inner
            .create_link_code(CODE, &"alice".into(), START_MS, START_MS + 1_800_000)
            .await
            .unwrap();
        Self {
            inner,
            platform: Arc::new(KeepingPlatform::default()),
            now: Arc::new(AtomicI64::new(START_MS)),
            webhook_ahead_ms: 0,
        }
    }

    /// One attempt at the linking message, on a store that crashes as `crash` says.
    async fn attempt(&self, crash: Arc<Crash>) -> JobOutcome {
        self.attempt_settling(crash, Duration::ZERO).await.outcome
    }

    /// [`World::attempt`], each step after the reply tried again for `settle_retry_for` while
    /// the store is unavailable (as deployments do), and all it says.
    async fn attempt_settling(&self, crash: Arc<Crash>, settle_retry_for: Duration) -> Ran {
        let store: Arc<dyn Store> = Arc::new(CrashStore::new(self.inner.clone(), crash));
        let engine = Engine::new(
            Arc::new(ScriptedModel::new(vec![])),
            Arc::new(Registry::default()),
            store.clone(),
            EngineOptions {
                model_id: "m".into(),
                ..EngineOptions::default()
            },
        );
        let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
        senders.insert("whatsapp".into(), self.platform.clone());
        let clock = self.now.clone();
        let jobs = ChannelJobs {
            engine: Arc::new(engine),
            store,
            senders,
            options: JobOptions {
                metrics: metrics::Metrics::off(),
                clock: Arc::new(move || clock.load(Ordering::SeqCst)),
                settle_retry_for,
                ..JobOptions::default()
            },
        };
        let job = TurnJob {
            addressed_to: None,
            trace_context: Default::default(),
            channel: "whatsapp".into(),
            message_id: "wamid.1".into(),
            conversation_key: "4915550001111".into(),
            external_user_id: "4915550001111".into(),
            text: "K7PQ-2345".into(),
            button_id: None,
            media: Vec::new(),
            received_at_ms: START_MS + self.webhook_ahead_ms,
        };
        jobs.run_streamed(&job, Duration::from_secs(10), &engine::NullSink)
            .await
    }

    fn sent(&self) -> Vec<String> {
        self.platform.sent()
    }

    async fn recorded(&self) -> Vec<String> {
        let conversation = "whatsapp:4915550001111@alice".into();
        self.inner
            .visible(&conversation)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.text)
            .collect()
    }
}

/// What the reply calls alice: her account is made on this first contact, named after the
/// chat.
const ALICE: &str = "4915550001111";

#[tokio::test]
async fn a_link_confirmation_recorded_before_a_crash_is_not_sent_again() {
    let clean = World::new().await;
    let counted = Crash::never();
    let outcome = clean.attempt(counted.clone()).await;
    assert!(
        matches!(outcome, JobOutcome::Answered(Resolved::Linked(_))),
        "{outcome:?}"
    );
    assert_eq!(clean.sent(), [lines::linked(ALICE)]);
    let points = counted.log();
    let recorded = points
        .iter()
        .rposition(|p| *p == "append_visible")
        .expect("the exchange is recorded")
        + 1;
    let finished = points
        .iter()
        .position(|p| *p == "finish_job")
        .expect("the job is marked done")
        + 1;
    assert!(recorded < finished, "{points:?}");

    // Each crash from just after the reply's record up to just before the job is marked done.
    let mut crashes = vec![CrashAt::After(recorded as u64)];
    crashes.extend(((recorded + 1)..=finished).map(|n| CrashAt::Before(n as u64)));
    for at in crashes {
        let w = World::new().await;
        let first = w.attempt(Crash::at(at)).await;
        assert!(matches!(first, JobOutcome::Failed(_)), "{at:?}: {first:?}");
        // The dead worker's claim lapses; the queue delivers the job again.
        w.now.fetch_add(120_000, Ordering::SeqCst);
        let retry = w.attempt(Crash::never()).await;
        assert!(
            matches!(retry, JobOutcome::Answered(_) | JobOutcome::Skipped(_)),
            "{at:?}: {retry:?}"
        );
        assert_eq!(w.sent(), [lines::linked(ALICE)], "{at:?}: sent once");
        assert_eq!(
            w.recorded().await,
            ["K7PQ-2345", lines::linked(ALICE).as_str()],
            "{at:?}: recorded once"
        );
        assert_eq!(
            w.inner
                .identity("whatsapp", "4915550001111")
                .await
                .unwrap()
                .map(|u| u.0),
            Some("alice".to_owned())
        );
    }

    // The webhook's clock a few seconds ahead of the worker's dates the message after the
    // record the dead attempt wrote: that is still its record, not sent again.
    let mut w = World::new().await;
    w.webhook_ahead_ms = 3_000;
    let first = w.attempt(Crash::at(CrashAt::After(recorded as u64))).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    w.now.fetch_add(120_000, Ordering::SeqCst);
    w.attempt(Crash::never()).await;
    assert_eq!(w.sent(), [lines::linked(ALICE)], "clocks apart: sent once");

    // Before the reply's record (after the platform took it; before the user's line, or
    // between it and the reply's): sent again, the window no platform without idempotency
    // keys lets close; still recorded once, the user's line not twice.
    let user_line = recorded as u64 - 1;
    for at in [CrashAt::Before(user_line), CrashAt::After(user_line)] {
        let w = World::new().await;
        let first = w.attempt(Crash::at(at)).await;
        assert!(matches!(first, JobOutcome::Failed(_)), "{at:?}: {first:?}");
        w.now.fetch_add(120_000, Ordering::SeqCst);
        w.attempt(Crash::never()).await;
        assert_eq!(
            w.sent(),
            [lines::linked(ALICE), lines::linked(ALICE)],
            "{at:?}"
        );
        assert_eq!(
            w.recorded().await,
            ["K7PQ-2345", lines::linked(ALICE).as_str()],
            "{at:?}"
        );
    }
}

/// The store refuses the job's done mark for a moment: it is tried again and the job ends
/// done. Refused for good, the attempt fails saying its claim is still held until it lapses,
/// so the worker keeps the job back until then rather than finding it busy.
#[tokio::test]
async fn a_done_mark_refused_is_tried_again_or_its_claim_said_held() {
    let w = World::new().await;
    let ran = w
        .attempt_settling(
            Crash::at(CrashAt::Blip("finish_job")),
            Duration::from_secs(5),
        )
        .await;
    assert!(
        matches!(ran.outcome, JobOutcome::Answered(_)),
        "{:?}",
        ran.outcome
    );
    assert_eq!(ran.claim_held_until, None);
    assert_eq!(w.sent(), [lines::linked(ALICE)]);

    // Never writable again from the done mark on: the attempt fails, its claim said held.
    let w = World::new().await;
    let counted = Crash::never();
    w.attempt(counted.clone()).await;
    let mark = counted
        .log()
        .iter()
        .position(|p| *p == "finish_job")
        .expect("the job is marked done")
        + 1;
    let w = World::new().await;
    let ran = w
        .attempt_settling(
            Crash::at(CrashAt::Before(mark as u64)),
            Duration::from_millis(300),
        )
        .await;
    assert!(
        matches!(
            ran.outcome,
            JobOutcome::Failed(channel_jobs::JobError::NotMarkedDone(_))
        ),
        "{:?}",
        ran.outcome
    );
    assert!(
        ran.claim_held_until
            .is_some_and(|until| until > w.now.load(Ordering::SeqCst)),
        "{:?}",
        ran.claim_held_until
    );
}
