//! Fault injection on the linking path: a chat sends its account's link code, and the worker
//! dies at every write of that job (just before it and just after it, the reply's delivery
//! included), then a fresh job runner tries the job again on the same store, as the queue's
//! retry does. On SQLite and on moto's DynamoDB. After each: the chat is linked to the code's
//! account, the code's owner got the "linked" reply once (twice, the same, only when the
//! worker died after sending it and before recording it), and the code still links nobody else.
//! The same for an `UNLINK` job, and one run again after Sam had linked the chat anew.
//! (`harness_reply_crash.rs` looks closer at the reply's record and the done mark, on SQLite.)

use backend::ScriptedModel;
use channel_jobs::identity::Resolved;
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome, lines};
use channels::Sender;
use engine::{Engine, EngineOptions};
use queue::TurnJob;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Store;
use tests::crash_store::{Crash, CrashAt, CrashStore, RecordingSender};
use tools::Registry;

const START_MS: i64 = 1_800_000_000_000;
const CODE: &str = "HJ2K3M4N";
const BUDGET: Duration = Duration::from_secs(60);
/// A crashed attempt's budget: a job whose store is gone tries its harness reply's writes
/// again until its budget ends (a store out for a moment comes back); this one's never does.
const CRASHED_BUDGET: Duration = Duration::from_secs(2);

/// One store's world: the store, what reached the chat, the worker's clock.
struct World {
    inner: Arc<dyn Store>,
    delivered: Arc<Mutex<Vec<String>>>,
    clock: Arc<AtomicI64>,
}

impl World {
    async fn new(inner: Arc<dyn Store>) -> Self {
        inner
            .create_account(&store::Account::new("ana", "Ana"))
            .await
            .unwrap();
        inner
            .create_link_code(CODE, &"ana".into(), START_MS, START_MS + 3 * 3_600_000)
            .await
            .unwrap();
        Self {
            inner,
            delivered: Arc::default(),
            clock: Arc::new(AtomicI64::new(START_MS + 1_000)),
        }
    }

    /// One attempt of Sam's linking job with a fresh job runner, under `crash`.
    async fn attempt(&self, crash: Arc<Crash>, budget: Duration) -> JobOutcome {
        self.attempt_job(&sam_says("wamid-1", "sam", CODE), crash, budget)
            .await
    }

    /// One attempt of `job` with a fresh job runner, under `crash`.
    async fn attempt_job(&self, job: &TurnJob, crash: Arc<Crash>, budget: Duration) -> JobOutcome {
        let store: Arc<dyn Store> = Arc::new(CrashStore::new(self.inner.clone(), crash.clone()));
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
        senders.insert(
            "whatsapp".into(),
            Arc::new(RecordingSender {
                crash,
                delivered: self.delivered.clone(),
            }),
        );
        let clock = self.clock.clone();
        let jobs = ChannelJobs {
            engine: Arc::new(engine),
            store,
            senders,
            options: JobOptions {
                clock: Arc::new(move || clock.load(Ordering::SeqCst)),
                metrics: metrics::Metrics::off(),
                ..JobOptions::default()
            },
        };
        jobs.run(job, budget).await
    }

    fn delivered(&self) -> Vec<String> {
        self.delivered.lock().unwrap().clone()
    }
}

/// A message from Sam in the chat `chat` (his own, or a group he is in), as the webhook took it.
fn sam_says(id: &str, chat: &str, text: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "whatsapp".into(),
        message_id: id.into(),
        conversation_key: chat.into(),
        external_user_id: "sam".into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: START_MS,
    }
}

async fn every_crash_point<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let clean = World::new(make().await).await;
    let counted = Crash::never();
    assert_eq!(
        clean.attempt(counted.clone(), BUDGET).await,
        JobOutcome::Answered(Resolved::Linked("ana".into()))
    );
    let linked = lines::linked("Ana");
    assert_eq!(clean.delivered(), vec![linked.clone()]);
    let points = counted.log();
    eprintln!("write points of an uninterrupted linking job: {points:?}");
    assert!(
        ["consume_link_code", "bind_identity_if", "deliver the reply"]
            .iter()
            .all(|p| points.contains(p)),
        "{points:?}"
    );
    let delivery = points
        .iter()
        .position(|p| *p == "deliver the reply")
        .unwrap() as u64
        + 1;
    // The reply's visible entry, which records that it went out: the last one written.
    let recorded = points.iter().rposition(|p| *p == "append_visible").unwrap() as u64 + 1;
    assert!(recorded > delivery, "{points:?}");

    for n in 1..=points.len() as u64 {
        for at in [CrashAt::Before(n), CrashAt::After(n)] {
            let point = format!("{at:?} ({})", points[n as usize - 1]);
            let world = World::new(make().await).await;
            let first = world.attempt(Crash::at(at), CRASHED_BUDGET).await;
            assert!(
                matches!(first, JobOutcome::Failed(_)),
                "{point}: the crashed attempt reported {first:?}"
            );
            // The dead worker could not release its claim: the retry comes once it expired.
            world.clock.fetch_add(3_600_000, Ordering::SeqCst);
            let retry = world.attempt(Crash::never(), BUDGET).await;
            assert!(
                matches!(
                    retry,
                    JobOutcome::Answered(Resolved::Linked(_) | Resolved::LinkedAgain(_))
                        | JobOutcome::Skipped(_)
                ),
                "{point}: the retry reported {retry:?}"
            );
            assert_eq!(
                world.inner.identity("whatsapp", "sam").await.unwrap(),
                Some("ana".into()),
                "{point}: linked"
            );
            // After the reply went out and before it was recorded the retry cannot know it
            // went out, and sends it again (the one window exactly-once cannot close).
            let sent_then_died = match at {
                CrashAt::After(n) => (delivery..recorded).contains(&n),
                _ => (delivery + 1..=recorded).contains(&n),
            };
            let want = match sent_then_died {
                true => vec![linked.clone(), linked.clone()],
                false => vec![linked.clone()],
            };
            assert_eq!(world.delivered(), want, "{point}");
            assert_eq!(
                world
                    .inner
                    .consume_link_code(CODE, "whatsapp#eve", START_MS + 7_200_000)
                    .await
                    .unwrap(),
                None,
                "{point}: the code links nobody else"
            );
        }
    }
}

#[tokio::test]
async fn a_linking_job_crashed_at_every_write_on_sqlite_links_once() {
    every_crash_point(|| async {
        Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap()) as Arc<dyn Store>
    })
    .await;
}

#[tokio::test]
async fn a_linking_job_crashed_at_every_write_on_dynamodb_links_once() {
    every_crash_point(|| async { tests::moto::dynamo_store("link-crash").await as Arc<dyn Store> })
        .await;
}

/// Sam's chat, linked to Ana's account, sends `UNLINK`, and the worker dies at every write of
/// that job (just before it and just after it); then the job is tried again. After each the chat
/// is unlinked, and Sam was told so: "Done" when the retry unbound it, "not connected" when
/// the dead attempt had unbound it and not said so yet, both when it had said so and died
/// before the job was marked done.
async fn every_unlink_crash_point<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let linked_world = || async {
        let world = World::new(make().await).await;
        world
            .inner
            .bind_identity("whatsapp", "sam", &"ana".into(), START_MS - 60_000)
            .await
            .unwrap();
        world
    };
    let unlink = TurnJob {
        received_at_ms: START_MS + 500,
        ..sam_says("wamid-2", "sam", "UNLINK")
    };
    let clean = linked_world().await;
    let counted = Crash::never();
    assert_eq!(
        clean.attempt_job(&unlink, counted.clone(), BUDGET).await,
        JobOutcome::Answered(Resolved::Unlinked("ana".into()))
    );
    let done = lines::unlinked("Ana");
    let not_linked = lines::not_linked(&JobOptions::default().signup_url);
    assert_eq!(clean.delivered(), vec![done.clone()]);
    let points = counted.log();
    eprintln!("write points of an uninterrupted UNLINK job: {points:?}");
    let at = |name: &str| points.iter().position(|p| *p == name).unwrap() as u64 + 1;
    let (unbound, delivery) = (at("unbind_identity_if"), at("deliver the reply"));
    let finished = at("finish_job");
    assert!(unbound < delivery && delivery < finished, "{points:?}");

    for n in 1..=points.len() as u64 {
        for crash in [CrashAt::Before(n), CrashAt::After(n)] {
            let point = format!("{crash:?} ({})", points[n as usize - 1]);
            // Whether write `k` happened before the worker died.
            let happened = |k: u64| match crash {
                CrashAt::Before(n) => k < n,
                _ => k <= n,
            };
            let world = linked_world().await;
            let first = world
                .attempt_job(&unlink, Crash::at(crash), CRASHED_BUDGET)
                .await;
            assert!(
                matches!(first, JobOutcome::Failed(_)),
                "{point}: the crashed attempt reported {first:?}"
            );
            world.clock.fetch_add(3_600_000, Ordering::SeqCst);
            let retry = world.attempt_job(&unlink, Crash::never(), BUDGET).await;
            assert!(
                matches!(
                    retry,
                    JobOutcome::Answered(Resolved::Unlinked(_) | Resolved::NotLinked)
                        | JobOutcome::Skipped(_)
                ),
                "{point}: the retry reported {retry:?}"
            );
            assert_eq!(
                world.inner.identity("whatsapp", "sam").await.unwrap(),
                None,
                "{point}: unlinked"
            );
            // The retry of a job that unbound finds nothing bound, and says so, unless the job
            // was marked done: a second line after "Done" (true, and once an hour at most)
            // where the worker died after sending it.
            let want = match (happened(unbound), happened(delivery), happened(finished)) {
                (false, ..) => vec![done.clone()],
                (true, false, _) => vec![not_linked.clone()],
                (true, true, false) => vec![done.clone(), not_linked.clone()],
                (true, true, true) => vec![done.clone()],
            };
            assert_eq!(world.delivered(), want, "{point}");
        }
    }

    // The worker died right after unbinding; before the job came again, Sam linked the chat
    // again from a group (its job runs in another queue group, so it may come first). The
    // UNLINK, older than that link, leaves it, and says the chat is linked.
    let world = linked_world().await;
    let first = world
        .attempt_job(&unlink, Crash::at(CrashAt::After(unbound)), CRASHED_BUDGET)
        .await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    world.clock.fetch_add(600_000, Ordering::SeqCst);
    let relink = TurnJob {
        received_at_ms: world.clock.load(Ordering::SeqCst),
        ..sam_says("wamid-3", "group-1", CODE)
    };
    assert_eq!(
        world.attempt_job(&relink, Crash::never(), BUDGET).await,
        JobOutcome::Answered(Resolved::Linked("ana".into()))
    );
    world.clock.fetch_add(3_600_000, Ordering::SeqCst);
    assert_eq!(
        world.attempt_job(&unlink, Crash::never(), BUDGET).await,
        JobOutcome::Answered(Resolved::LinkedAgain("ana".into()))
    );
    assert_eq!(
        world.inner.identity("whatsapp", "sam").await.unwrap(),
        Some("ana".into()),
        "the newer link stands"
    );
}

#[tokio::test]
async fn an_unlink_job_crashed_at_every_write_on_sqlite_unlinks_once() {
    every_unlink_crash_point(|| async {
        Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap()) as Arc<dyn Store>
    })
    .await;
}

#[tokio::test]
async fn an_unlink_job_crashed_at_every_write_on_dynamodb_unlinks_once() {
    every_unlink_crash_point(|| async {
        tests::moto::dynamo_store("unlink-crash").await as Arc<dyn Store>
    })
    .await;
}
