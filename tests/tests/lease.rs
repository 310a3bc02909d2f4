//! The conversation lease on the one job path, on SQLite and on DynamoDB (moto): two turns of
//! one conversation started together from two instances (two web function instances, or the web
//! function and the worker) run one after the other, never interleaved; a turn whose holder died
//! waits until the dead holder's lease lapses, then proceeds. A web job for a conversation its
//! user does not own (or one that is gone) runs no turn and leaves the lease free, whether its
//! owner was read before the claim or under the lease. A turn cut at its deadline, running or
//! waiting for the lease, gives the lease back: the next message does not wait for it to lapse.

use backend::{Reply, ScriptedModel};
use channel_jobs::{ChannelJobs, JobOutcome};
use engine::{ContextFacts, ContextSource, Engine, EngineOptions};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use store::{Account, Lease, Store};
use store_sqlite::SqliteStore;
use tests::{web_job, web_jobs};
use tools::Registry;
use transcript::{Conversation, ConversationId, Role, StopReason, UserId};

const T0: i64 = 1_800_000_000_000;
const BUDGET: Duration = Duration::from_secs(600);
const CONV: &str = "web-lease-1";

async fn dynamo() -> Arc<dyn Store> {
    tests::moto::dynamo_store("lease").await
}

fn sqlite() -> Arc<dyn Store> {
    Arc::new(SqliteStore::open_in_memory().unwrap())
}

struct Setup {
    store: Arc<dyn Store>,
    model: Arc<ScriptedModel>,
    engine: Arc<Engine>,
    clock: Arc<AtomicI64>,
}

async fn setup(store: Arc<dyn Store>, replies: Vec<Reply>) -> Setup {
    store
        .put_account(&Account::new("alice", "Alice"))
        .await
        .unwrap();
    store
        .create_conversation(&Conversation::new(CONV, "alice", "web", "chat"))
        .await
        .unwrap();
    let model = Arc::new(ScriptedModel::new(replies));
    let engine = Arc::new(Engine::new(
        model.clone(),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    ));
    Setup {
        store,
        model,
        engine,
        clock: Arc::new(AtomicI64::new(T0)),
    }
}

/// Another instance (function) running the same job path on the same store.
fn instance(s: &Setup) -> ChannelJobs {
    web_jobs(s.engine.clone(), s.store.clone(), s.clock.clone())
}

async fn roles(s: &Setup) -> Vec<Role> {
    let rows = s.store.messages(&CONV.into(), 0).await.unwrap();
    rows.iter().map(|m| m.role).collect()
}

async fn turns_started_together_run_one_after_the_other(store: Arc<dyn Store>) {
    // The first turn to hold the lease streams slowly: a second turn that did not wait would
    // start while it runs.
    let s = setup(
        store,
        vec![
            Reply::new()
                .say("Looking")
                .then_wait(Duration::from_millis(400))
                .say(" it up.")
                .stop(StopReason::EndTurn),
            Reply::text("And the second."),
        ],
    )
    .await;
    let (a, b) = (instance(&s), instance(&s));
    let (job_a, job_b) = (
        web_job(CONV, "alice", "m-a", "first question"),
        web_job(CONV, "alice", "m-b", "second question"),
    );
    let (ran_a, ran_b) = tokio::join!(a.run(&job_a, BUDGET), b.run(&job_b, BUDGET));
    assert_eq!((ran_a, ran_b), (JobOutcome::Done, JobOutcome::Done));
    assert_eq!(
        roles(&s).await,
        [Role::User, Role::Assistant, Role::User, Role::Assistant],
        "never interleaved"
    );
    let requests = s.model.requests();
    assert_eq!(requests.len(), 2);
    // The second turn saw the first one whole.
    assert_eq!(requests[1].messages.len(), 3, "{:?}", requests[1].messages);
    let visible: Vec<String> = s
        .store
        .visible(&CONV.into())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(visible.len(), 4);
    assert!(
        visible.contains(&"Looking it up.".to_owned()),
        "{visible:?}"
    );
    assert!(
        visible.contains(&"And the second.".to_owned()),
        "{visible:?}"
    );
    // Both released their lease: a third party takes it at once.
    assert_eq!(
        s.store
            .acquire_lease(&ConversationId::from(CONV), "probe", T0, T0 + 1_000)
            .await
            .unwrap(),
        Lease::Held
    );
}

async fn a_dead_holders_lease_lapses_and_the_next_turn_proceeds(store: Arc<dyn Store>) {
    let s = setup(store, vec![Reply::text("Here you are.")]).await;
    // A function died holding the conversation (it will never renew or release).
    let lease_ttl = channel_jobs::JobOptions::default().lease_ttl.as_millis() as i64;
    assert_eq!(
        s.store
            .acquire_lease(&CONV.into(), "web#died", T0, T0 + lease_ttl)
            .await
            .unwrap(),
        Lease::Held
    );
    let jobs = instance(&s);
    let job = web_job(CONV, "alice", "m-next", "are you there?");
    let running = jobs.run(&job, BUDGET);
    let clock = s.clock.clone();
    let model = s.model.clone();
    let lapse = async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let calls_while_held = model.requests().len();
        clock.fetch_add(lease_ttl + 1, Ordering::SeqCst);
        calls_while_held
    };
    let (ran, calls_while_held) = tokio::join!(running, lapse);
    assert_eq!(
        calls_while_held, 0,
        "no model call while the dead holder's lease was live"
    );
    assert_eq!(ran, JobOutcome::Done);
    assert_eq!(s.model.requests().len(), 1);
    assert_eq!(roles(&s).await, [Role::User, Role::Assistant]);
}

async fn a_turn_cut_at_its_deadline_gives_its_lease_back(store: Arc<dyn Store>) {
    // The model stalls: the turn is cut at its deadline, holding the lease.
    let s = setup(
        store,
        vec![
            Reply::new().say("Let me").then_stall(),
            Reply::text("Here."),
        ],
    )
    .await;
    let cut = instance(&s)
        .run(
            &web_job(CONV, "alice", "m-cut", "first"),
            Duration::from_millis(300),
        )
        .await;
    assert!(
        matches!(cut, JobOutcome::Failed(channel_jobs::JobError::Deadline(_))),
        "{cut:?}"
    );
    // The clock has not moved: a lease kept would hold the conversation for a minute more.
    assert_eq!(
        s.store
            .acquire_lease(&CONV.into(), "probe", T0, T0 + 1_000)
            .await
            .unwrap(),
        Lease::Held,
        "the cut turn gave its lease back"
    );
    s.store.release_lease(&CONV.into(), "probe").await.unwrap();
    let next = instance(&s)
        .run(&web_job(CONV, "alice", "m-next", "second"), BUDGET)
        .await;
    assert_eq!(next, JobOutcome::Done);

    // One cut while it waits for a lease another turn holds gives back nothing of that turn's.
    s.store
        .acquire_lease(&CONV.into(), "web#other", T0, T0 + 60_000)
        .await
        .unwrap();
    let waited = instance(&s)
        .run(
            &web_job(CONV, "alice", "m-wait", "third"),
            Duration::from_millis(300),
        )
        .await;
    assert!(
        matches!(
            waited,
            JobOutcome::Failed(channel_jobs::JobError::Deadline(_))
        ),
        "{waited:?}"
    );
    assert!(
        matches!(
            s.store
                .acquire_lease(&CONV.into(), "probe", T0, T0 + 1_000)
                .await
                .unwrap(),
            Lease::Busy { .. }
        ),
        "the other turn's lease stands"
    );
}

#[tokio::test]
async fn sqlite_a_turn_cut_at_its_deadline_gives_its_lease_back() {
    a_turn_cut_at_its_deadline_gives_its_lease_back(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_turn_cut_at_its_deadline_gives_its_lease_back() {
    a_turn_cut_at_its_deadline_gives_its_lease_back(dynamo().await).await;
}

/// The context block's records as the turn's user message carries them, and how often the
/// engine asked for them.
#[derive(Default)]
struct Records {
    now: std::sync::Mutex<String>,
    asked: AtomicI64,
}

#[async_trait::async_trait]
impl ContextSource for Records {
    async fn facts(&self, _: &UserId, _: &ConversationId) -> Result<ContextFacts, String> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Ok(ContextFacts {
            records: Some(self.now.lock().unwrap().clone()),
            ..ContextFacts::default()
        })
    }
}

/// The context block's records are read once a turn: beside the claim when the job path is
/// asked to and the claim takes the lease too, else under the lease. When the turn had to wait
/// for the lease, records changed while another turn held the conversation show in the block,
/// not ones read beside the claim.
async fn the_context_block_is_read_with_the_lease(store: Arc<dyn Store>, beside: bool) {
    let s = setup(store, vec![Reply::text("One."), Reply::text("Two.")]).await;
    let records = Arc::new(Records::default());
    *records.now.lock().unwrap() = "ev_1 before".into();
    let engine = Arc::new(
        Engine::new(
            s.model.clone(),
            Arc::new(Registry::default()),
            s.store.clone(),
            EngineOptions {
                model_id: "m".into(),
                ..EngineOptions::default()
            },
        )
        .with_context(records.clone()),
    );
    let mut jobs = web_jobs(engine, s.store.clone(), s.clock.clone());
    jobs.options.context_beside_claim = beside;
    let said = |n: usize| {
        let requests = s.model.requests();
        let user = requests[n].messages.last().unwrap().clone();
        user.parts
            .iter()
            .filter_map(|p| p.as_text())
            .collect::<String>()
    };

    // The lease free: taken with the claim, the records read once, beside it.
    let job = web_job(CONV, "alice", "m-free", "first");
    assert_eq!(jobs.run(&job, BUDGET).await, JobOutcome::Done);
    assert_eq!(records.asked.load(Ordering::SeqCst), 1, "read once");
    assert!(said(0).contains("ev_1 before"), "{}", said(0));

    // The lease held by another turn, which changes the records before it lets go.
    assert_eq!(
        s.store
            .acquire_lease(&CONV.into(), "web#other", T0, T0 + 60_000)
            .await
            .unwrap(),
        Lease::Held
    );
    let job = web_job(CONV, "alice", "m-waited", "second");
    let running = jobs.run(&job, BUDGET);
    let other = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        *records.now.lock().unwrap() = "ev_1 after".into();
        s.store
            .release_lease(&CONV.into(), "web#other")
            .await
            .unwrap();
    };
    let (ran, ()) = tokio::join!(running, other);
    assert_eq!(ran, JobOutcome::Done);
    assert!(said(1).contains("ev_1 after"), "{}", said(1));
    assert!(!said(1).contains("ev_1 before"), "{}", said(1));
    assert_eq!(
        records.asked.load(Ordering::SeqCst),
        if beside { 3 } else { 2 },
        "beside the claim: that read left unused, and read again under the lease"
    );
}

/// A web job that names another user's conversation, and one that names none: no turn, no
/// row, the lease free for the owner; the owner's own job then runs as usual.
async fn a_web_job_for_a_conversation_not_its_users_runs_no_turn(store: Arc<dyn Store>) {
    let s = setup(store, vec![Reply::text("Hello, Alice.")]).await;
    let jobs = instance(&s);
    let not_owned = JobOutcome::Skipped("not the user's conversation");
    let foreign = web_job(CONV, "mallory", "m-foreign", "show me alice's week");
    assert_eq!(jobs.run(&foreign, BUDGET).await, not_owned);
    // Skipped is done: its claim is not left running for nobody to finish, and a delivery
    // again is skipped as done.
    assert_eq!(
        jobs.run(&foreign, BUDGET).await,
        JobOutcome::Skipped("already done")
    );
    let gone = web_job("web-never-made", "mallory", "m-gone", "hello?");
    assert_eq!(jobs.run(&gone, BUDGET).await, not_owned);
    assert!(s.model.requests().is_empty(), "no model call");
    assert!(
        roles(&s).await.is_empty(),
        "nothing written in alice's transcript"
    );
    assert!(s.store.visible(&CONV.into()).await.unwrap().is_empty());
    assert_eq!(
        s.store
            .conversation(&"web-never-made".into())
            .await
            .unwrap(),
        None,
        "no conversation made"
    );
    for id in [CONV, "web-never-made"] {
        assert_eq!(
            s.store
                .acquire_lease(&id.into(), "probe", T0, T0 + 1_000)
                .await
                .unwrap(),
            Lease::Held,
            "{id}'s lease is free"
        );
        s.store.release_lease(&id.into(), "probe").await.unwrap();
    }
    let own = web_job(CONV, "alice", "m-own", "hello");
    assert_eq!(jobs.run(&own, BUDGET).await, JobOutcome::Done);
    assert_eq!(roles(&s).await, [Role::User, Role::Assistant]);
}

#[tokio::test]
async fn sqlite_a_web_job_for_a_conversation_not_its_users_runs_no_turn() {
    a_web_job_for_a_conversation_not_its_users_runs_no_turn(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_web_job_for_a_conversation_not_its_users_runs_no_turn() {
    a_web_job_for_a_conversation_not_its_users_runs_no_turn(dynamo().await).await;
}

/// A store that takes the claim and the lease one by one (no `TurnWrites`): the owner is read
/// before the lease.
#[tokio::test]
async fn one_by_one_a_web_job_for_a_conversation_not_its_users_runs_no_turn() {
    let inner = Arc::new(SqliteStore::open_in_memory().unwrap());
    let store: Arc<dyn Store> = Arc::new(tests::FlakyStore::new(inner));
    assert!(store.turn_writes().is_none());
    a_web_job_for_a_conversation_not_its_users_runs_no_turn(store).await;
}

#[tokio::test]
async fn sqlite_the_context_block_is_read_with_the_lease() {
    the_context_block_is_read_with_the_lease(sqlite(), false).await;
}

#[tokio::test]
async fn sqlite_the_context_block_is_read_beside_a_claim_that_takes_the_lease() {
    the_context_block_is_read_with_the_lease(sqlite(), true).await;
}

#[tokio::test]
async fn dynamodb_the_context_block_is_read_with_the_lease() {
    the_context_block_is_read_with_the_lease(dynamo().await, false).await;
}

#[tokio::test]
async fn dynamodb_the_context_block_is_read_beside_a_claim_that_takes_the_lease() {
    the_context_block_is_read_with_the_lease(dynamo().await, true).await;
}

#[tokio::test]
async fn sqlite_turns_started_together_run_one_after_the_other() {
    turns_started_together_run_one_after_the_other(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_turns_started_together_run_one_after_the_other() {
    turns_started_together_run_one_after_the_other(dynamo().await).await;
}

#[tokio::test]
async fn sqlite_a_dead_holders_lease_lapses_and_the_next_turn_proceeds() {
    a_dead_holders_lease_lapses_and_the_next_turn_proceeds(sqlite()).await;
}

#[tokio::test]
async fn dynamodb_a_dead_holders_lease_lapses_and_the_next_turn_proceeds() {
    a_dead_holders_lease_lapses_and_the_next_turn_proceeds(dynamo().await).await;
}
