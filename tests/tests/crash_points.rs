//! Fault injection through the one job path (DESIGN invariant 10, issue 15 point 1): a web job
//! whose turn has two cycles of tool calls (two `create_event` calls in one answer, then one
//! more — or then an `undo`) is stopped at every write point of the turn and of the job path —
//! each store write, crashing just before it and just after it, and the delivery to the user —
//! then resumed by a fresh engine and job runner on the same store, as the queue's retry would. On SQLite and on
//! moto's DynamoDB. After each: no tool effect twice, no message lost, the model-visible history
//! (the last request the model got, and the stored transcript) byte-identical to an
//! uninterrupted run's, the reply delivered once, and the budget (its guards on, as in every
//! deployment) never counting less than the calls cost. Twice over: with the turn's writes one by
//! one (as after a refused combined write), and combined as the stores offer them
//! (`store::TurnWrites`, each one write point), which is how the worker makes them.
//!
//! Event ids are random (`ev-` and ten hex digits), so two runs are compared with each id
//! replaced by its order of first appearance; that the model saw exactly the events the store
//! recorded creating is checked separately.

use async_trait::async_trait;
use backend::{
    BackendError, ChatModel, ChatRequest, EventStream, Reply, ScriptedModel, StopReason,
};
use budget::{Bucket, BudgetConfig, Guards, InMemoryAccounts, PriceTable, StandardGuards};
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome};
use channels::Sender;
use engine::{Engine, EngineOptions};
use serde_json::json;
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Store;
use tests::crash_store::{Crash, CrashAt, CrashStore, RecordingSender};
use tests::web_job;
use tools::Registry;
use transcript::{Conversation, Role, Usage};

const BUDGET: Duration = Duration::from_secs(600);
const START_MS: i64 = 1_800_000_000_000;

fn event(title: &str, day: &str) -> serde_json::Value {
    json!({"title": title, "starts_at": format!("{day}T10:00"), "venue": "Hall", "capacity": 50})
}

/// A turn to crash, and what its uninterrupted run leaves.
struct Scenario {
    script: fn() -> Vec<Reply>,
    /// Events stored at the end, and audit rows (the earlier action's included).
    events: usize,
    audit_rows: usize,
    /// The domain writes of the run, in order, by write-point name.
    domain_writes: &'static [&'static str],
    reply: &'static str,
}

/// Two creations in one answer, one more in the next, then the closing answer.
const CREATIONS: Scenario = Scenario {
    script: creations,
    events: 4,
    audit_rows: 4,
    domain_writes: &["commit", "commit", "commit"],
    reply: "Creating both.\n\nAnd the autumn one.\n\nAll three are in.",
};

/// Two creations in one answer, then an undo (of both: they are one action), then the closing
/// answer.
const CREATE_THEN_UNDO: Scenario = Scenario {
    script: create_then_undo,
    events: 1,
    audit_rows: 4,
    domain_writes: &["commit", "commit", "undo_last"],
    reply: "Creating both.\n\nOn second thought, undoing that.\n\nNothing is planned now.",
};

/// What each scripted call reports using: its cost is what the budget must have counted.
const USED: Usage = Usage {
    input_tokens: 1_000,
    output_tokens: 100,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
};

fn create_then_undo() -> Vec<Reply> {
    vec![
        Reply::new()
            .say("Creating both.")
            .call("t1", "create_event", event("Spring Open", "2027-04-01"))
            .call("t2", "create_event", event("Summer Cup", "2027-07-01"))
            .stop(StopReason::ToolUse)
            .usage(USED),
        Reply::new()
            .say("On second thought, undoing that.")
            .call("t3", "undo", json!({}))
            .stop(StopReason::ToolUse)
            .usage(USED),
        Reply::text("Nothing is planned now.").usage(USED),
    ]
}

fn creations() -> Vec<Reply> {
    vec![
        Reply::new()
            .say("Creating both.")
            .call("t1", "create_event", event("Spring Open", "2027-04-01"))
            .call("t2", "create_event", event("Summer Cup", "2027-07-01"))
            .stop(StopReason::ToolUse)
            .usage(USED),
        Reply::new()
            .say("And the autumn one.")
            .call("t3", "create_event", event("Autumn Fair", "2027-10-01"))
            .stop(StopReason::ToolUse)
            .usage(USED),
        Reply::text("All three are in.").usage(USED),
    ]
}

/// The scripted model, answering by the cycle the request is at (the assistant messages it
/// already holds), so a resumed run gets the reply the interrupted one would have got. Dead
/// with its attempt's crash.
struct CycleModel {
    script: fn() -> Vec<Reply>,
    crash: Arc<Crash>,
    requests: Arc<Mutex<Vec<ChatRequest>>>,
}

#[async_trait]
impl ChatModel for CycleModel {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError> {
        if self.crash.is_dead() {
            return Err(BackendError::transport("the worker crashed"));
        }
        let cycle = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        self.requests.lock().unwrap().push(request.clone());
        ScriptedModel::new([(self.script)()[cycle].clone()])
            .stream(request)
            .await
    }
}

/// One store's world: the store itself, what reached the user, the job clock.
struct World {
    inner: Arc<dyn Store>,
    /// Whether the turn's writes are combined where the store combines them (see
    /// [`CrashStore::combining`]).
    combined: bool,
    delivered: Arc<Mutex<Vec<String>>>,
    requests: Arc<Mutex<Vec<ChatRequest>>>,
    clock: Arc<AtomicI64>,
}

impl World {
    async fn new(inner: Arc<dyn Store>, combined: bool) -> Self {
        inner
            .create_conversation(&Conversation::new("c1", "u1", "web", planner::PURPOSE))
            .await
            .unwrap();
        inner
            .create_account(&store::Account::new("u1", "u1"))
            .await
            .unwrap();
        // An earlier action in this conversation: what an undo run twice would revert next.
        inner
            .commit(&store::ActionCommit {
                action_id: "web#earlier".into(),
                actor: store::ActorKind::Agent,
                user: "u1".into(),
                by_user: true,
                at_ms: START_MS - 60_000,
                changes: vec![store::Change {
                    kind: "event".into(),
                    id: "earlier-event".into(),
                    owner: "u1".into(),
                    before: None,
                    after: Some(json!({"title": "Winter Gala"})),
                }],
                receipt: None,
                conversation: Some("c1".into()),
            })
            .await
            .unwrap();
        Self {
            inner,
            combined,
            delivered: Arc::default(),
            requests: Arc::default(),
            clock: Arc::new(AtomicI64::new(START_MS)),
        }
    }

    /// One attempt of the job with a fresh engine and job runner, under `crash`.
    async fn attempt(&self, script: fn() -> Vec<Reply>, crash: Arc<Crash>) -> JobOutcome {
        let (inner, crashing) = (self.inner.clone(), crash.clone());
        let store: Arc<dyn Store> = Arc::new(if self.combined {
            CrashStore::combining(inner, crashing)
        } else {
            CrashStore::new(inner, crashing)
        });
        let at = self.clock.clone();
        let planner = planner::Planner::new(store.clone())
            .with_clock(Arc::new(move || at.load(Ordering::SeqCst)));
        let mut registry = Registry::default();
        planner::register(&mut registry, Arc::new(planner), &[planner::PURPOSE]).unwrap();
        let model = Arc::new(CycleModel {
            script,
            crash: crash.clone(),
            requests: self.requests.clone(),
        });
        // The budget's guards, as every deployment runs them: their reservations and
        // settlements are write points too (folded into the turn's writes when combined).
        let config = BudgetConfig {
            prices: PriceTable::with_file(
                "crash-points-prices.json",
                r#"{"models": {"m": {"input": 1, "output": 10, "cache_read": 0.1, "cache_write": 2}}}"#,
            )
            .unwrap(),
            ..BudgetConfig::default()
        };
        let now = self.clock.clone();
        let guards = Guards::standard(StandardGuards {
            ledger: store.clone(),
            config: Arc::new(config),
            accounts: Arc::new(InMemoryAccounts::default()),
            clock: Arc::new(move || now.load(Ordering::SeqCst)),
            no_model: None,
        });
        let engine = Arc::new(
            Engine::new(
                model,
                Arc::new(registry),
                store.clone(),
                EngineOptions {
                    model_id: "m".into(),
                    ..Default::default()
                },
            )
            .with_guard(Arc::new(guards)),
        );
        let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
        senders.insert(
            "web".into(),
            Arc::new(RecordingSender {
                crash,
                delivered: self.delivered.clone(),
            }),
        );
        let clock = self.clock.clone();
        let jobs = ChannelJobs {
            engine,
            store,
            senders,
            options: JobOptions {
                clock: Arc::new(move || clock.load(Ordering::SeqCst)),
                metrics: metrics::Metrics::off(),
                ..JobOptions::default()
            },
        };
        jobs.run(&web_job("c1", "u1", "job-1", "Plan the season."), BUDGET)
            .await
    }

    /// The user's spending the budget counted, in micro-dollars, over the 30-day windows the
    /// attempts fell in.
    async fn spent(&self) -> u64 {
        let mut keys: Vec<_> = [START_MS, self.clock.load(Ordering::SeqCst)]
            .into_iter()
            .map(|at| Bucket::UserUsd30d.key(&"u1".into(), &"c1".into(), at))
            .collect();
        keys.dedup();
        self.inner.bucket_usage(&keys).await.unwrap().iter().sum()
    }

    /// What a run leaves, for comparison with the uninterrupted run.
    async fn observed(&self) -> Observed {
        let conv = "c1".into();
        let events = self.inner.records_of(&"u1".into(), "event").await.unwrap();
        let audit = self.inner.audit_log(&"u1".into()).await.unwrap();
        // Every event ever created (an undo may have removed some since).
        let in_order: Vec<String> = audit
            .iter()
            .flat_map(|row| &row.changes)
            .filter(|c| c.kind == "event" && c.before.is_none() && c.id.starts_with("ev-"))
            .map(|c| c.id.clone())
            .collect();
        let created: BTreeSet<String> = in_order.iter().cloned().collect();
        // Which of them the conversation is about (the context block's "active event"), by
        // order of creation: ids differ from run to run.
        let active = self
            .inner
            .active(&conv, "event")
            .await
            .unwrap()
            .map(|id| in_order.iter().position(|c| *c == id).ok_or(id));
        let last = self.requests.lock().unwrap().last().cloned().unwrap();
        let last_request = serde_json::to_string(&last.messages).unwrap();
        let seen_ids: BTreeSet<String> = event_ids(&last_request).into_iter().collect();
        let rows: Vec<String> = self
            .inner
            .messages(&conv, 0)
            .await
            .unwrap()
            .iter()
            .map(|m| serde_json::to_string(&(m.position, m.role, &m.parts, &m.action_id)).unwrap())
            .collect();
        Observed {
            active,
            events: events.len(),
            audit_rows: audit.len(),
            model_saw_the_created_events: seen_ids == created,
            last_request: masked(&last_request),
            transcript: masked(&rows.join("\n")),
            visible: self
                .inner
                .visible(&conv)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.text)
                .collect(),
            delivered: self.delivered.lock().unwrap().clone(),
        }
    }
}

#[derive(Debug, PartialEq)]
struct Observed {
    /// The active event: its place in creation order, or an id no event has.
    active: Option<Result<usize, String>>,
    events: usize,
    audit_rows: usize,
    model_saw_the_created_events: bool,
    last_request: String,
    transcript: String,
    visible: Vec<String>,
    delivered: Vec<String>,
}

/// The event ids in `text`, in order of appearance.
fn event_ids(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("ev-") {
        let id: String = rest[i..].chars().take(13).collect();
        if id.len() == 13 && id[3..].chars().all(|c| c.is_ascii_hexdigit()) {
            out.push(id);
        }
        rest = &rest[i + 3..];
    }
    out
}

/// `text` with each event id replaced by its order of first appearance.
fn masked(text: &str) -> String {
    let mut order: Vec<String> = Vec::new();
    for id in event_ids(text) {
        if !order.contains(&id) {
            order.push(id);
        }
    }
    order
        .iter()
        .enumerate()
        .fold(text.to_owned(), |t, (n, id)| {
            t.replace(id, &format!("ev-#{n}"))
        })
}

/// Run the job uninterrupted, then for every write point crash before and after it and resume;
/// compare each with the uninterrupted run.
async fn every_crash_point<F, Fut>(scenario: &Scenario, make: F, combined: bool)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn Store>>,
{
    let clean = World::new(make().await, combined).await;
    let counted = Crash::never();
    let script = scenario.script;
    assert_eq!(
        clean.attempt(script, counted.clone()).await,
        JobOutcome::Done
    );
    let expected = clean.observed().await;
    let spent = clean.spent().await;
    assert!(spent > 0, "the calls' cost is counted");
    assert_eq!(expected.events, scenario.events);
    assert_eq!(expected.audit_rows, scenario.audit_rows);
    assert!(expected.model_saw_the_created_events);
    assert_eq!(expected.visible, ["Plan the season.", scenario.reply]);
    assert_eq!(expected.delivered.len(), 1);
    let points = counted.log();
    eprintln!("write points of an uninterrupted run: {points:?}");
    assert!(
        points
            .iter()
            .filter(|p| ["commit", "undo_last"].contains(*p))
            .eq(scenario.domain_writes.iter())
            && points.contains(&"deliver the reply"),
        "{points:?}"
    );
    let shapes: &[&str] = if combined {
        &[
            "claim_with_lease",
            "start_turn_reserving",
            "append_with_tool_result",
            "append_message_adjusting",
            "finish_turn",
        ]
    } else {
        &["put_tool_result", "reserve", "adjust", "finish_job"]
    };
    assert!(shapes.iter().all(|w| points.contains(w)), "{points:?}");

    for n in 1..=points.len() as u64 {
        for at in [CrashAt::Before(n), CrashAt::After(n)] {
            let point = format!("{at:?} ({})", points[n as usize - 1]);
            let world = World::new(make().await, combined).await;
            let first = world.attempt(script, Crash::at(at)).await;
            assert!(
                matches!(first, JobOutcome::Failed(_)),
                "{point}: the crashed attempt reported {first:?}"
            );
            // The dead worker could not release its claim: the retry comes once it expired.
            world.clock.fetch_add(3_600_000, Ordering::SeqCst);
            let retry = world.attempt(script, Crash::never()).await;
            assert!(
                matches!(retry, JobOutcome::Done | JobOutcome::Skipped(_)),
                "{point}: the retry reported {retry:?}"
            );
            let got = world.observed().await;
            // What a crash leaves of a reservation stays counted: never less than the calls
            // cost, so a crash cannot be used to spend past the caps.
            let left = world.spent().await;
            assert!(
                left >= spent,
                "{point}: {left} counted, the calls cost {spent}"
            );
            let mut want = Observed {
                delivered: got.delivered.clone(),
                ..expected_clone(&expected)
            };
            if in_the_delivery_window(&points, at) {
                // The one window exactly-once cannot close: the reply reached the user and the
                // worker died before recording it. The retry cannot know it went out, and
                // sending again beats leaving the user without an answer (invariant 6).
                assert_eq!(got.delivered.len(), 2, "{point}");
                assert_eq!(got.delivered[0], got.delivered[1], "{point}");
            } else {
                want.delivered = expected.delivered.clone();
            }
            assert_eq!(got, want, "{point}");
        }
    }
}

/// After the reply went out and before it is recorded as what the user saw: after the
/// delivery, or before the visible entry that follows it (alone, or with the turn's finish).
fn in_the_delivery_window(points: &[&str], at: CrashAt) -> bool {
    let deliver = points
        .iter()
        .position(|p| *p == "deliver the reply")
        .unwrap() as u64
        + 1;
    at == CrashAt::After(deliver)
        || (at == CrashAt::Before(deliver + 1)
            && matches!(
                points.get(deliver as usize),
                Some(&"append_visible" | &"finish_turn")
            ))
}

fn expected_clone(o: &Observed) -> Observed {
    Observed {
        active: o.active.clone(),
        events: o.events,
        audit_rows: o.audit_rows,
        model_saw_the_created_events: o.model_saw_the_created_events,
        last_request: o.last_request.clone(),
        transcript: o.transcript.clone(),
        visible: o.visible.clone(),
        delivered: o.delivered.clone(),
    }
}

async fn sqlite() -> Arc<dyn Store> {
    Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap())
}

async fn dynamodb() -> Arc<dyn Store> {
    tests::moto::dynamo_store("crash-points").await
}

#[tokio::test]
async fn undo_at_every_crash_point_on_sqlite_undoes_once() {
    every_crash_point(&CREATE_THEN_UNDO, sqlite, false).await;
}

#[tokio::test]
async fn undo_at_every_crash_point_on_dynamodb_undoes_once() {
    every_crash_point(&CREATE_THEN_UNDO, dynamodb, false).await;
}

#[tokio::test]
async fn every_crash_point_on_sqlite_repeats_no_effect_and_loses_nothing() {
    every_crash_point(&CREATIONS, sqlite, false).await;
}

#[tokio::test]
async fn every_crash_point_on_dynamodb_repeats_no_effect_and_loses_nothing() {
    every_crash_point(&CREATIONS, dynamodb, false).await;
}

// The same with the turn's writes combined, as the worker makes them on both stores.

#[tokio::test]
async fn undo_at_every_combined_crash_point_on_sqlite_undoes_once() {
    every_crash_point(&CREATE_THEN_UNDO, sqlite, true).await;
}

#[tokio::test]
async fn undo_at_every_combined_crash_point_on_dynamodb_undoes_once() {
    every_crash_point(&CREATE_THEN_UNDO, dynamodb, true).await;
}

#[tokio::test]
async fn every_combined_crash_point_on_sqlite_repeats_no_effect_and_loses_nothing() {
    every_crash_point(&CREATIONS, sqlite, true).await;
}

#[tokio::test]
async fn every_combined_crash_point_on_dynamodb_repeats_no_effect_and_loses_nothing() {
    every_crash_point(&CREATIONS, dynamodb, true).await;
}
