//! The worker on the sample SQS batch in `events/`, with the real engine on SQLite and the
//! scripted model.

use async_trait::async_trait;
use aws_lambda_events::sqs::SqsEvent;
use backend::{Reply, ScriptedModel};
use channels::{Delivered, Outgoing, SendError, Sender};
use engine::{Engine, EngineOptions};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Claim, ConversationStore, Identities, JobClaims, MessageStore, VisibleStore};
use store_sqlite::SqliteStore;
use tokio::time::Instant;
use tools::Registry;
use transcript::Role;
use worker::{ChannelJobs, JobOptions, Worker, WorkerOptions};

fn batch() -> SqsEvent {
    let path = format!(
        "{}/../../events/sqs-turn-jobs.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Records what was sent; refuses replies to one conversation when told to.
#[derive(Default)]
struct Platform {
    sent: Mutex<Vec<Outgoing>>,
    refuse: Mutex<Option<String>>,
    /// Refuse replies whose text contains this.
    refuse_text: Mutex<Option<String>>,
    /// Never answer a send of a reply whose text contains this (a platform that hangs).
    stall_text: Mutex<Option<String>>,
}

#[async_trait]
impl Sender for Platform {
    fn max_chars(&self) -> usize {
        4_000
    }
    fn has_reactions(&self) -> bool {
        false
    }
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        if self.refuse.lock().unwrap().as_deref() == Some(reply.conversation_key.as_str()) {
            return Err(SendError::Retryable { status: 503 });
        }
        if let Some(marker) = self.refuse_text.lock().unwrap().as_deref()
            && reply.text.contains(marker)
        {
            return Err(SendError::Retryable { status: 503 });
        }
        let stalls = self
            .stall_text
            .lock()
            .unwrap()
            .as_deref()
            .is_some_and(|marker| reply.text.contains(marker));
        if stalls {
            std::future::pending::<()>().await;
        }
        self.sent.lock().unwrap().push(reply.clone());
        sent.pieces.push(reply.text.clone());
        Ok(())
    }
}

impl Platform {
    fn sent(&self) -> Vec<(String, String)> {
        let sent = self.sent.lock().unwrap();
        sent.iter()
            .map(|r| (r.in_reply_to.clone(), r.text.clone()))
            .collect()
    }
}

struct Setup {
    worker: Worker,
    model: Arc<ScriptedModel>,
    store: Arc<SqliteStore>,
    platform: Arc<Platform>,
    clock: Arc<AtomicI64>,
}

async fn setup(replies: Vec<Reply>) -> Setup {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let model = Arc::new(ScriptedModel::new(replies));
    let engine = Engine::new(
        model.clone(),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    );
    let platform = Arc::new(Platform::default());
    let clock = Arc::new(AtomicI64::new(1_800_000_000_000));
    let c = clock.clone();
    let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
    senders.insert("generic".into(), platform.clone());
    // The sample batch's senders have linked their accounts.
    let now = clock.load(Ordering::SeqCst);
    for (external, user) in [("u-1", "alice"), ("u-2", "bob")] {
        store
            .bind_identity("generic", external, &user.into(), now)
            .await
            .unwrap();
    }
    let worker = Worker {
        jobs: ChannelJobs {
            engine: Arc::new(engine),
            store: store.clone(),
            senders,
            options: JobOptions {
                clock: Arc::new(move || c.load(Ordering::SeqCst)),
                ..JobOptions::default()
            },
        },
        options: WorkerOptions::default(),
    };
    Setup {
        worker,
        model,
        store,
        platform,
        clock,
    }
}

fn in_a_minute() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

fn failed(resp: &aws_lambda_events::sqs::SqsBatchResponse) -> Vec<String> {
    resp.batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

const ID: [&str; 4] = [
    "00000000-0000-4000-8000-000000000001",
    "00000000-0000-4000-8000-000000000002",
    "00000000-0000-4000-8000-000000000003",
    "00000000-0000-4000-8000-000000000004",
];

#[tokio::test]
async fn a_batch_runs_in_order_and_a_redelivery_runs_nothing_again() {
    let s = setup(
        ["A one", "B one", "A two", "B two"]
            .map(Reply::text)
            .to_vec(),
    )
    .await;
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    assert_eq!(
        s.platform.sent(),
        [
            ("m-1", "A one"),
            ("m-2", "B one"),
            ("m-3", "A two"),
            ("m-4", "B two")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let a = s
        .store
        .messages(&"generic:c-a@alice".into(), 0)
        .await
        .unwrap();
    let texts: Vec<String> = a.iter().map(|m| m.text()).collect();
    assert_eq!(texts, ["first in A", "A one", "second in A", "A two"]);
    assert_eq!(
        s.store
            .claim_job("generic#m-1", s.clock.load(Ordering::SeqCst), i64::MAX)
            .await
            .unwrap(),
        Claim::Done
    );
    // SQS delivers the same batch again: every job is skipped.
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    assert_eq!(s.model.requests().len(), 4, "no second model call");
    assert_eq!(s.platform.sent().len(), 4, "no second reply");
}

#[tokio::test]
async fn after_a_failure_the_rest_of_that_conversation_waits_and_others_go_on() {
    let s = setup(["A one", "B one", "B two"].map(Reply::text).to_vec()).await;
    *s.platform.refuse.lock().unwrap() = Some("c-a".into());
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert_eq!(
        failed(&resp),
        [ID[0], ID[2]],
        "A's first failed, so A's second is held back"
    );
    assert_eq!(
        s.platform.sent(),
        [
            ("m-2".to_owned(), "B one".to_owned()),
            ("m-4".to_owned(), "B two".to_owned())
        ]
    );
    let a = s
        .store
        .messages(&"generic:c-a@alice".into(), 0)
        .await
        .unwrap();
    assert_eq!(a.len(), 2, "A's second message never started");
}

#[tokio::test]
async fn a_job_another_worker_holds_is_left_alone() {
    let s = setup(["B one", "B two"].map(Reply::text).to_vec()).await;
    let now = s.clock.load(Ordering::SeqCst);
    s.store
        .claim_job("generic#m-1", now, now + 600_000)
        .await
        .unwrap();
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert_eq!(failed(&resp), [ID[0], ID[2]]);
    assert_eq!(s.platform.sent().len(), 2);
}

#[tokio::test]
async fn an_undecodable_record_fails_and_holds_its_conversation() {
    let s = setup(["B one", "B two"].map(Reply::text).to_vec()).await;
    let mut event = batch();
    event.records[0].body = Some(r#"{"v":9,"job":{}}"#.into());
    let resp = s.worker.handle_batch(event, in_a_minute()).await;
    assert_eq!(failed(&resp), [ID[0], ID[2]]);
}

#[tokio::test(start_paused = true)]
async fn a_turn_cut_off_by_the_deadline_is_resumed_by_the_redelivery() {
    let s = setup(vec![
        Reply::new().then_stall(),
        Reply::text("Here you are."),
    ])
    .await;
    let mut event = batch();
    event.records.truncate(1);
    // The function has 20 s left: the stalled turn gets 15 s, then the record fails.
    let resp = s
        .worker
        .handle_batch(event.clone(), Instant::now() + Duration::from_secs(20))
        .await;
    assert_eq!(failed(&resp), [ID[0]]);
    // The cut-off attempt released its claim: the redelivery takes the job over at once (no
    // delivery burnt on "another worker holds this job") and resumes it from the transcript.
    let resp = s.worker.handle_batch(event, in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    assert_eq!(
        s.platform.sent(),
        [("m-1".to_owned(), "Here you are.".to_owned())]
    );
    let rows = s
        .store
        .messages(&"generic:c-a@alice".into(), 0)
        .await
        .unwrap();
    let users = rows.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(users, 1, "the user message is not written twice");
}

#[tokio::test]
async fn a_redelivery_after_the_claim_expired_never_sends_twice() {
    let s = setup(
        ["A one", "B one", "A two", "B two"]
            .map(Reply::text)
            .to_vec(),
    )
    .await;
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    // Eight days later the done claims have expired; SQS (or a platform retry) brings the same
    // messages again. The transcript and the visible record say they were answered and sent.
    s.clock.fetch_add(8 * 24 * 3600 * 1000, Ordering::SeqCst);
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    assert_eq!(
        s.model.requests().len(),
        4,
        "no model call for finished turns"
    );
    assert_eq!(s.platform.sent().len(), 4, "nothing is sent twice");
}

#[tokio::test]
async fn buttons_go_out_and_a_silent_reply_falls_back_to_text_without_reactions() {
    let s = setup(vec![
        Reply::text("Which one? <buttons>Spring Open | Summer Cup</buttons>"),
        Reply::text("<silent/>"),
        Reply::text("A two"),
        Reply::text("B two"),
    ])
    .await;
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    let sent = s.platform.sent.lock().unwrap().clone();
    assert_eq!(sent[0].text, "Which one?");
    let titles: Vec<&str> = sent[0].buttons.iter().map(|b| b.title.as_str()).collect();
    assert_eq!(titles, ["Spring Open", "Summer Cup"]);
    // The generic-like platform has no reactions: the silent reply becomes a short text.
    assert_eq!(sent[1].text, engine::lines::ACKNOWLEDGED);
    let visible = s.store.visible(&"generic:c-b@bob".into()).await.unwrap();
    assert_eq!(visible[1].text, engine::lines::ACKNOWLEDGED);
    let visible = s.store.visible(&"generic:c-a@alice".into()).await.unwrap();
    assert_eq!(
        visible[1].buttons.len(),
        2,
        "what went out is recorded, buttons included"
    );
}

#[tokio::test]
async fn an_unlinked_sender_gets_the_onboarding_reply_and_no_model_call() {
    let s = setup(["B one", "A two", "B two"].map(Reply::text).to_vec()).await;
    let mut event = batch();
    let body = event.records[0].body.take().unwrap();
    event.records[0].body = Some(body.replace("u-1", "u-9"));
    let resp = s.worker.handle_batch(event, in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    let sent = s.platform.sent();
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[0].0, "m-1");
    assert!(
        sent[0].1.contains("1. ") && sent[0].1.contains("3. "),
        "{}",
        sent[0].1
    );
    assert_eq!(
        s.model.requests().len(),
        3,
        "the unlinked sender cost no model call"
    );
    // The onboarding exchange is in the chat's lobby, not in anyone's conversation.
    let lobby = s.store.visible(&"generic:c-a".into()).await.unwrap();
    assert_eq!(lobby.len(), 2);
    assert_eq!(lobby[1].text, sent[0].1);
    let a = s
        .store
        .messages(&"generic:c-a@alice".into(), 0)
        .await
        .unwrap();
    assert_eq!(a.len(), 2, "alice's own message still ran");
}

#[tokio::test]
async fn each_turn_prints_an_emf_line_with_tokens_cost_and_tool_errors() {
    let usage = transcript::Usage {
        input_tokens: 1_000,
        output_tokens: 200,
        cache_read_tokens: 3_000,
        cache_write_tokens: 0,
    };
    let mut s = setup(
        ["A one", "B one", "A two", "B two"]
            .map(|t| Reply::text(t).usage(usage))
            .to_vec(),
    )
    .await;
    let (metrics, lines) = metrics::Metrics::capture("BridleTest");
    s.worker.jobs.options.metrics = metrics;
    // $3 per million input tokens, $15 per million output, $0.30 per million cache reads.
    s.worker.jobs.options.estimate_usd = Some(Arc::new(|u: &transcript::Usage| {
        (u.input_tokens * 3 + u.output_tokens * 15) as f64 / 1e6
            + u.cache_read_tokens as f64 * 0.3 / 1e6
    }));
    let resp = s.worker.handle_batch(batch(), in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    let lines = lines.lock().unwrap().clone();
    assert_eq!(lines.len(), 4, "one line per turn");
    let line: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(line["Channel"], "generic");
    assert_eq!(line["Turns"], 1.0);
    assert_eq!(line["ModelCalls"], 1.0);
    assert_eq!(line["InputTokens"], 1_000.0);
    assert_eq!(line["CacheReadTokens"], 3_000.0);
    assert_eq!(line["ToolErrors"], 0.0);
    let usd = line["EstimatedUsd"].as_f64().unwrap();
    assert!((usd - 0.0069).abs() < 1e-9, "{usd}");
    let names: Vec<&str> = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"EstimatedUsd") && names.contains(&"ToolErrors"));
}

#[tokio::test]
async fn on_the_last_receive_a_failing_job_tells_the_user_and_closes_its_turn() {
    let s = setup(vec![Reply::text("POISON reply")]).await;
    *s.platform.refuse_text.lock().unwrap() = Some("POISON".into());
    let mut event = batch();
    event.records.truncate(1);
    // Early receives: the record fails and SQS will redeliver it; nobody is told yet.
    event.records[0]
        .attributes
        .insert("ApproximateReceiveCount".into(), "2".into());
    let resp = s.worker.handle_batch(event.clone(), in_a_minute()).await;
    assert_eq!(failed(&resp), [ID[0]]);
    assert!(s.platform.sent().is_empty());
    // The fifth receive is the last: the user gets one calm sentence, the visible transcript
    // ends the turn with it, and the record is still reported failed (SQS dead-letters it).
    event.records[0]
        .attributes
        .insert("ApproximateReceiveCount".into(), "5".into());
    let resp = s.worker.handle_batch(event, in_a_minute()).await;
    assert_eq!(failed(&resp), [ID[0]]);
    let sent = s.platform.sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].1, engine::lines::GAVE_UP);
    let visible = s.store.visible(&"generic:c-a@alice".into()).await.unwrap();
    assert_eq!(
        visible.last().map(|e| e.text.as_str()),
        Some(engine::lines::GAVE_UP)
    );
    assert_eq!(s.model.requests().len(), 1, "no second model call");
}

/// A turn cut off on its last receive is given up within the function's time, however long the
/// platform takes to say so: the batch is answered before Lambda would end the function (which
/// would lose the answer for every record in it).
#[tokio::test(start_paused = true)]
async fn on_the_last_receive_a_give_up_the_platform_stalls_still_ends_in_time() {
    let s = setup(vec![Reply::new().then_stall()]).await;
    *s.platform.stall_text.lock().unwrap() = Some(engine::lines::GAVE_UP.into());
    let mut event = last_receive(batch());
    event.records.truncate(1);
    let deadline = Instant::now() + Duration::from_secs(20);
    let resp = tokio::time::timeout(
        Duration::from_secs(120),
        s.worker.handle_batch(event, deadline),
    )
    .await
    .expect("the batch is answered");
    assert!(Instant::now() <= deadline, "answered after the deadline");
    assert_eq!(failed(&resp), [ID[0]]);
    assert!(s.platform.sent().is_empty());
}

/// Every record of the batch on its last receive.
fn last_receive(mut event: SqsEvent) -> SqsEvent {
    for record in &mut event.records {
        record
            .attributes
            .insert("ApproximateReceiveCount".into(), "5".into());
    }
    event
}

#[tokio::test]
async fn on_the_last_receive_a_conversations_later_records_run_behind_the_one_given_up() {
    let s = setup(
        ["POISON A one", "B one", "A two", "B two"]
            .map(Reply::text)
            .to_vec(),
    )
    .await;
    *s.platform.refuse_text.lock().unwrap() = Some("POISON".into());
    let resp = s
        .worker
        .handle_batch(last_receive(batch()), in_a_minute())
        .await;
    // A's first is given up (the user told; SQS dead-letters it), and A's second is answered
    // now rather than held behind it into the dead letters unanswered.
    assert_eq!(failed(&resp), [ID[0]]);
    assert_eq!(
        s.platform.sent(),
        [
            ("m-1".to_owned(), engine::lines::GAVE_UP.to_owned()),
            ("m-2".to_owned(), "B one".to_owned()),
            ("m-3".to_owned(), "A two".to_owned()),
            ("m-4".to_owned(), "B two".to_owned()),
        ]
    );
    let shown: Vec<String> = s
        .store
        .visible(&"generic:c-a@alice".into())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(shown.last().map(String::as_str), Some("A two"), "{shown:?}");
    assert!(
        shown.iter().any(|t| t == engine::lines::GAVE_UP),
        "{shown:?}"
    );
}

#[tokio::test]
async fn on_the_last_receive_a_record_with_no_time_left_tells_the_user() {
    let s = setup(vec![Reply::text("never said")]).await;
    // Four seconds left: under the worker's five-second safety margin, so no turn may start,
    // but time enough to tell each user and still answer the batch two seconds early.
    let deadline = Instant::now() + Duration::from_secs(4);
    let resp = s.worker.handle_batch(last_receive(batch()), deadline).await;
    assert_eq!(failed(&resp), ID, "none ran: SQS dead-letters them");
    let sent = s.platform.sent();
    assert_eq!(
        sent,
        ["m-1", "m-2", "m-3", "m-4"].map(|m| (m.to_owned(), engine::lines::GAVE_UP.to_owned())),
        "each user is told, once"
    );
    assert!(s.model.requests().is_empty());

    // With less than the reserve left, nobody is told: the batch is answered first.
    let s = setup(vec![Reply::text("never said")]).await;
    let started = Instant::now();
    let resp = s
        .worker
        .handle_batch(last_receive(batch()), started + Duration::from_secs(1))
        .await;
    assert_eq!(failed(&resp), ID);
    assert!(s.platform.sent().is_empty());
    assert!(started.elapsed() < Duration::from_millis(500));

    // Before their last receive they are only put back, and nobody is told.
    let s = setup(vec![Reply::text("never said")]).await;
    let resp = s
        .worker
        .handle_batch(batch(), Instant::now() + Duration::from_secs(2))
        .await;
    assert_eq!(failed(&resp), ID);
    assert!(s.platform.sent().is_empty());
}

/// The first record's job, as the worker decodes it.
fn first_job() -> queue::TurnJob {
    queue_sqs::decode_job(batch().records[0].body.as_deref().unwrap()).unwrap()
}

fn shown(visible: Vec<store::VisibleEntry>) -> Vec<String> {
    visible.into_iter().map(|e| e.text).collect()
}

/// An attempt that fails after its answer went out (marking the job done failed, say) on its
/// last receive is given up: the user, who has the answer, is told nothing more.
#[tokio::test]
async fn a_job_given_up_after_its_answer_was_recorded_says_nothing_more() {
    let s = setup(vec![Reply::text("A one")]).await;
    let mut event = batch();
    event.records.truncate(1);
    let resp = s.worker.handle_batch(event, in_a_minute()).await;
    assert!(failed(&resp).is_empty());
    let closed = s.worker.jobs.give_up_for_good(&first_job()).await.unwrap();
    assert!(!closed);
    assert_eq!(s.platform.sent(), [("m-1".to_owned(), "A one".to_owned())]);
    let visible = s.store.visible(&"generic:c-a@alice".into()).await.unwrap();
    assert_eq!(shown(visible), ["first in A", "A one"]);
}

/// An attempt elsewhere sent the answer whole and kept that with the job's claim, but its
/// record never got written; given up now, the answer is recorded as what the user saw and
/// nothing more is sent.
#[tokio::test]
async fn a_job_given_up_after_its_answer_was_sent_unrecorded_records_it() {
    let s = setup(vec![Reply::text("A one")]).await;
    *s.platform.refuse_text.lock().unwrap() = Some("A one".into());
    let mut event = batch();
    event.records.truncate(1);
    let resp = s.worker.handle_batch(event, in_a_minute()).await;
    assert_eq!(failed(&resp), [ID[0]], "this attempt could not send it");
    let job = first_job();
    let key = job.dedupe_key();
    let now = s.clock.load(Ordering::SeqCst);
    let Claim::TakenOver { attempt } = s.store.claim_job(&key, now, now + 60_000).await.unwrap()
    else {
        panic!("the released claim is taken over");
    };
    let conv = s
        .store
        .conversation(&"generic:c-a@alice".into())
        .await
        .unwrap()
        .unwrap();
    let sent = store::ReplySent {
        turn: conv.turn,
        text: "A one".into(),
        pieces: vec!["A one".into()],
        reacted: false,
        whole: true,
    };
    s.store
        .release_job(&key, attempt, now, Some(&sent))
        .await
        .unwrap();
    s.worker.jobs.give_up_for_good(&job).await.unwrap();
    assert!(s.platform.sent().is_empty(), "nothing more is sent");
    let visible = s.store.visible(&"generic:c-a@alice".into()).await.unwrap();
    assert_eq!(shown(visible), ["first in A", "A one"]);

    // Without a reply that went out, the user is told it was given up.
    let s = setup(vec![Reply::text("A one")]).await;
    *s.platform.refuse_text.lock().unwrap() = Some("A one".into());
    let mut event = batch();
    event.records.truncate(1);
    s.worker.handle_batch(event, in_a_minute()).await;
    s.worker.jobs.give_up_for_good(&first_job()).await.unwrap();
    assert_eq!(
        s.platform.sent(),
        [("m-1".to_owned(), engine::lines::GAVE_UP.to_owned())]
    );
}

/// The sample batch on its last receive, run while another worker holds the claims of the jobs
/// `held`: the setup, and the records reported failed.
async fn last_receive_with_jobs_held_elsewhere(held: &[&str]) -> (Setup, Vec<String>) {
    let s = setup(["B one", "B two"].map(Reply::text).to_vec()).await;
    let now = s.clock.load(Ordering::SeqCst);
    for key in held {
        s.store.claim_job(key, now, now + 600_000).await.unwrap();
    }
    let resp = s
        .worker
        .handle_batch(last_receive(batch()), in_a_minute())
        .await;
    (s, failed(&resp))
}

/// On its last receive, a job another worker still holds is not given up here (that would
/// close its turn while it runs, and tell its user it failed): the rest of its conversation
/// still waits behind it, and the one held back on its own last receive is given up.
#[tokio::test]
async fn on_the_last_receive_a_job_another_worker_holds_is_not_given_up() {
    let (s, failed) = last_receive_with_jobs_held_elsewhere(&["generic#m-1"]).await;
    assert_eq!(failed, [ID[0], ID[2]]);
    assert_eq!(
        s.platform.sent(),
        [
            ("m-2".to_owned(), "B one".to_owned()),
            ("m-3".to_owned(), engine::lines::GAVE_UP.to_owned()),
            ("m-4".to_owned(), "B two".to_owned())
        ],
        "no 'gave up' for the held job"
    );
}

/// A record held back on its last receive whose job another attempt is running (a copy of it)
/// is not given up under that attempt: nobody is told it failed.
#[tokio::test]
async fn on_the_last_receive_a_held_back_job_running_elsewhere_is_not_given_up() {
    let (s, failed) = last_receive_with_jobs_held_elsewhere(&["generic#m-1", "generic#m-3"]).await;
    let now = s.clock.load(Ordering::SeqCst);
    assert_eq!(failed, [ID[0], ID[2]]);
    assert_eq!(
        s.platform.sent(),
        [
            ("m-2".to_owned(), "B one".to_owned()),
            ("m-4".to_owned(), "B two".to_owned())
        ]
    );
    // Its claim is left as the other attempt holds it.
    assert!(matches!(
        s.store
            .claim_job("generic#m-3", now, now + 1)
            .await
            .unwrap(),
        Claim::Busy { .. }
    ));
}
