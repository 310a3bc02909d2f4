//! A failed record comes back after a short backoff, not after the queue's 30-minute
//! visibility timeout: the worker sets its visibility with `ChangeMessageVisibility` (through the
//! real SDK client, against moto's SQS at `AWS_ENDPOINT_URL`), its claim is released, and the
//! next attempt delivers the reply once. The platform is a real HTTP server that answers 500 to
//! the first reply; the store is SQLite, or DynamoDB in moto behind a proxy that can throttle
//! every call (an outage), and the model scripted.
//!
//! A claim still held after a failed attempt (its release failed in the outage, or another
//! attempt has it) holds the record back until it lapses: back sooner, the record would find
//! its job busy and spend its receives on that until the dead letters.

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_sqs::config::{Credentials, Region};
use aws_sdk_sqs::types::{MessageSystemAttributeName, QueueAttributeName};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use backend::{Reply, ScriptedModel};
use channels::generic::GenericSender;
use engine::{Engine, EngineOptions};
use fake_lambda::moto_proxy::Outage;
use queue::{JobQueue, QueueSettings, TurnJob};
use queue_sqs::SqsQueue;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Claim, Lease, Store, VisibleEntry, VisibleRole};
use store_dynamodb::DynamoStore;
use store_sqlite::SqliteStore;
use tokio::time::Instant;
use tools::Registry;
use transcript::ConversationId;
use worker::{ChannelJobs, JobOptions, Worker, WorkerOptions};

/// The templates' visibility timeout: what a failed record would wait without the backoff.
const VISIBILITY: Duration = Duration::from_secs(30 * 60);

fn sqs() -> aws_sdk_sqs::Client {
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: these tests need moto (scripts/test starts it)");
    aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version_latest()
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(Credentials::new("test", "test", None, None, "static"))
            .build(),
    )
}

/// The platform's reply endpoint: answers 500 to the first `fail_first` replies (429 with
/// `Retry-After: rate_limit` seconds, when set), then takes them. Counts every attempt and keeps the accepted texts. With `outage`, the first reply,
/// refused or taken, takes DynamoDB down with it: what the attempt writes after it meets a
/// throttled table.
#[derive(Clone, Default)]
struct Platform {
    attempts: Arc<AtomicUsize>,
    fail_first: usize,
    accepted: Arc<Mutex<Vec<String>>>,
    outage: Option<Outage>,
    rate_limit: Option<u64>,
}

async fn platform(
    fail_first: usize,
    outage: Option<Outage>,
    rate_limit: Option<u64>,
) -> (Platform, String) {
    let p = Platform {
        fail_first,
        outage,
        rate_limit,
        ..Platform::default()
    };
    let app = Router::new()
        .route(
            "/callback",
            post(|State(p): State<Platform>, body: Bytes| async move {
                let n = p.attempts.fetch_add(1, Ordering::SeqCst);
                if let (0, Some(outage)) = (n, &p.outage) {
                    outage.set_down(true);
                }
                if n < p.fail_first {
                    return match p.rate_limit {
                        Some(wait) => (
                            StatusCode::TOO_MANY_REQUESTS,
                            [("retry-after", wait.to_string())],
                        )
                            .into_response(),
                        None => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
                    };
                }
                let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let text = body["text"].as_str().unwrap_or_default().to_owned();
                p.accepted.lock().unwrap().push(text);
                StatusCode::OK.into_response()
            }),
        )
        .with_state(p.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/callback", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (p, url)
}

struct Setup {
    sqs: aws_sdk_sqs::Client,
    store: Arc<dyn Store>,
    /// On DynamoDB, the same table reached without the outage's proxy.
    beside: Option<Arc<dyn Store>>,
    dlq_url: String,
    /// The EMF lines the worker printed.
    metric_lines: Arc<Mutex<Vec<String>>>,
    queue: SqsQueue,
    arn: String,
    worker: Worker,
    model: Arc<ScriptedModel>,
    platform: Platform,
}

/// A FIFO queue (30-minute visibility, a dead-letter queue after 5 receives) in moto, and the
/// worker with an SQS client, the sender `u-42` linked to `alice`.
async fn setup(replies: Vec<Reply>, fail_first: usize) -> Setup {
    setup_with(replies, fail_first, QueueSettings::default().max_receives).await
}

/// [`setup`], with the queue's (and the worker's) `max_receives`.
async fn setup_with(replies: Vec<Reply>, fail_first: usize, max_receives: u32) -> Setup {
    setup_on(
        Knobs {
            fail_first,
            max_receives,
            ..Knobs::default()
        },
        replies,
    )
    .await
}

/// What a test changes in [`setup`].
struct Knobs {
    fail_first: usize,
    max_receives: u32,
    /// DynamoDB in moto behind this proxy (taken down by the platform's refusals) instead of
    /// SQLite.
    dynamo: Option<Outage>,
    /// A turn's budget ([`WorkerOptions::max_turn`]); its claim lapses [`CLAIM_SLACK`] after.
    max_turn: Duration,
    /// How long a conversation's lease lasts unless renewed ([`JobOptions::lease_ttl`]).
    lease_ttl: Duration,
    /// The platform's refusals are 429s asking for this many seconds' wait.
    rate_limit: Option<u64>,
}

impl Default for Knobs {
    fn default() -> Self {
        Self {
            fail_first: 0,
            max_receives: QueueSettings::default().max_receives,
            dynamo: None,
            max_turn: WorkerOptions::default().max_turn,
            lease_ttl: JobOptions::default().lease_ttl,
            rate_limit: None,
        }
    }
}

/// Added to a turn's budget for its claim's expiry (the default is 30 s).
const CLAIM_SLACK: Duration = Duration::from_secs(1);

/// A table in moto, reached through `outage`, and the same table reached straight (another
/// entrance, which the outage does not touch). The SDK's retries start 100 ms apart instead of
/// 1 s, so a failure in the outage comes within a second.
async fn dynamo_store(outage: &Outage) -> (Arc<dyn Store>, Arc<dyn Store>) {
    let client = |endpoint: &str| {
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::Config::builder()
                .behavior_version_latest()
                .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
                .endpoint_url(endpoint)
                .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                    "test", "test", None, None, "static",
                ))
                .retry_config(
                    RetryConfig::standard().with_initial_backoff(Duration::from_millis(100)),
                )
                .build(),
        )
    };
    let table = format!("worker-retry-{}", uuid::Uuid::new_v4().simple());
    let through = client(&outage.endpoint);
    store_dynamodb::create_table(&through, &table)
        .await
        .unwrap();
    let straight = client(&fake_lambda::moto_endpoint());
    (
        Arc::new(DynamoStore::new(through, table.clone())),
        Arc::new(DynamoStore::new(straight, table)),
    )
}

async fn setup_on(knobs: Knobs, replies: Vec<Reply>) -> Setup {
    let Knobs {
        fail_first,
        max_receives,
        dynamo,
        max_turn,
        lease_ttl,
        rate_limit,
    } = knobs;
    let sqs = sqs();
    let settings = QueueSettings {
        visibility_timeout: VISIBILITY,
        max_receives,
        ..QueueSettings::default()
    };
    let name = format!("worker-retry-{}", uuid::Uuid::new_v4().simple());
    let (queue_url, dlq_url) = queue_sqs::create_fifo_queue_with_dlq(&sqs, &name, &settings)
        .await
        .unwrap();
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .unwrap()
        .attributes
        .unwrap()
        .remove(&QueueAttributeName::QueueArn)
        .unwrap();
    let (store, beside): (Arc<dyn Store>, _) = match &dynamo {
        Some(outage) => {
            let (store, beside) = dynamo_store(outage).await;
            (store, Some(beside))
        }
        None => (Arc::new(SqliteStore::open_in_memory().unwrap()), None),
    };
    store
        .bind_identity("generic", "u-42", &"alice".into(), 0)
        .await
        .unwrap();
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
    let (platform, callback) = platform(fail_first, dynamo, rate_limit).await;
    let (metrics, metric_lines) = metrics::Metrics::capture("Bridle");
    let mut senders: HashMap<String, Arc<dyn channels::Sender>> = HashMap::new();
    senders.insert(
        "generic".into(),
        Arc::new(GenericSender::new(
            reqwest::Client::new(),
            callback,
            "cb-secret",
        )),
    );
    let worker = Worker {
        jobs: ChannelJobs {
            engine: Arc::new(engine),
            store: store.clone(),
            senders,
            options: JobOptions {
                metrics: metrics.clone(),
                claim_slack: CLAIM_SLACK,
                lease_ttl,
                ..JobOptions::default()
            },
        },
        options: WorkerOptions {
            sqs: Some(sqs.clone()),
            max_receives,
            max_turn,
            ..WorkerOptions::default()
        },
    };
    Setup {
        store,
        beside,
        dlq_url,
        metric_lines,
        queue: SqsQueue::new(sqs.clone(), queue_url, settings),
        sqs,
        arn,
        worker,
        model,
        platform,
    }
}

fn job(message_id: &str, text: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "generic".into(),
        message_id: message_id.into(),
        conversation_key: "c-7".into(),
        external_user_id: "u-42".into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    }
}

impl Setup {
    /// What the Lambda poller hands the worker: the visible messages (at most `max`), received
    /// with the queue's 30-minute visibility timeout, as an SQS event; empty if none come
    /// within `within`. moto shows a group freed by a visibility change only on a new poll, so
    /// this polls in short waits.
    async fn poll(&self, max: i32, within: Duration) -> SqsEvent {
        let until = Instant::now() + within;
        let mut event = SqsEvent::default();
        while event.records.is_empty() && Instant::now() < until {
            let out = self
                .sqs
                .receive_message()
                .queue_url(self.queue.queue_url())
                .max_number_of_messages(max)
                .wait_time_seconds(1)
                .visibility_timeout(VISIBILITY.as_secs() as i32)
                .message_system_attribute_names(MessageSystemAttributeName::All)
                .send()
                .await
                .unwrap();
            event.records = out
                .messages
                .unwrap_or_default()
                .into_iter()
                .map(|m| {
                    let mut record = SqsMessage::default();
                    record.message_id = m.message_id;
                    record.receipt_handle = m.receipt_handle;
                    record.body = m.body;
                    record.event_source_arn = Some(self.arn.clone());
                    record.attributes = m
                        .attributes
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k.as_str().to_owned(), v))
                        .collect();
                    record
                })
                .collect();
        }
        event
    }

    /// Run a batch as the Lambda integration does: the records not reported failed are
    /// deleted. Returns the failed records' bodies' texts.
    async fn work(&self, batch: SqsEvent) -> Vec<String> {
        let response = self
            .worker
            .handle_batch(batch.clone(), Instant::now() + Duration::from_secs(60))
            .await;
        let failed: Vec<String> = response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        let mut texts = Vec::new();
        for record in batch.records {
            if failed.contains(record.message_id.as_ref().unwrap()) {
                texts.push(text(&record));
            } else {
                self.queue
                    .ack(record.receipt_handle.as_deref().unwrap())
                    .await
                    .unwrap();
            }
        }
        texts
    }
}

impl Setup {
    /// "What's on my list?" (`m-1`) queued and received for the first time.
    async fn first_delivery(&self) -> SqsEvent {
        self.queue
            .enqueue(&job("m-1", "What's on my list?"))
            .await
            .unwrap();
        let first = self.poll(10, Duration::from_secs(5)).await;
        assert_eq!(receives(&first), ["1"]);
        first
    }

    /// `name` in each EMF line that has it, in order.
    fn metric(&self, name: &str) -> Vec<f64> {
        self.metric_lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok()?[name].as_f64())
            .collect()
    }
}

fn text(record: &SqsMessage) -> String {
    queue_sqs::decode_job(record.body.as_deref().unwrap())
        .unwrap()
        .text
}

fn receives(batch: &SqsEvent) -> Vec<&str> {
    batch
        .records
        .iter()
        .map(|r| r.attributes["ApproximateReceiveCount"].as_str())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_refused_once_is_retried_after_the_backoff_and_delivered_once() {
    let s = setup(vec![Reply::text("Your list is empty.")], 1).await;
    let first = s.first_delivery().await;
    let failed_at = Instant::now();
    assert_eq!(
        s.work(first).await,
        ["What's on my list?"],
        "the 500 fails the record"
    );
    assert!(s.platform.accepted.lock().unwrap().is_empty());

    // Back after the first backoff (0.5 to 1 s, whole seconds on SQS), not 30 minutes.
    let again = s.poll(10, Duration::from_secs(10)).await;
    assert_eq!(receives(&again), ["2"], "redelivered once");
    let waited = failed_at.elapsed();
    assert!(
        waited < Duration::from_secs(5),
        "came back after {waited:?}"
    );
    // The failed attempt's claim was released: this attempt is not "another worker holds
    // this job", and it delivers the recorded reply without a second model call.
    assert!(
        s.work(again).await.is_empty(),
        "the second attempt succeeds"
    );
    assert_eq!(
        *s.platform.accepted.lock().unwrap(),
        ["Your list is empty."],
        "delivered once"
    );
    assert_eq!(s.platform.attempts.load(Ordering::SeqCst), 2);
    assert_eq!(s.model.requests().len(), 1, "the turn was not run again");
    // The redelivery resumed the turn: not a new turn, no new model call.
    assert_eq!(s.metric("Turns"), [1.0, 0.0]);
    assert_eq!(s.metric("ModelCalls"), [1.0, 0.0]);
    assert!(
        s.poll(10, Duration::from_secs(2)).await.records.is_empty(),
        "nothing is left in the queue"
    );
}

/// A platform that rate-limits the reply asking for a 5 s wait is not asked again sooner: the
/// record stays hidden that long (not the 0.5 to 1 s backoff, which would spend a receive on
/// another refusal), then delivers the reply once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_reply_comes_back_after_the_wait_the_platform_asked_for() {
    let s = setup_on(
        Knobs {
            fail_first: 1,
            rate_limit: Some(5),
            ..Knobs::default()
        },
        vec![Reply::text("Your list is empty.")],
    )
    .await;
    let first = s.first_delivery().await;
    let failed_at = Instant::now();
    assert_eq!(
        s.work(first).await,
        ["What's on my list?"],
        "the 429 fails it"
    );
    let again = s.poll(10, Duration::from_secs(15)).await;
    let waited = failed_at.elapsed();
    assert_eq!(receives(&again), ["2"], "redelivered once");
    assert!(
        waited >= Duration::from_millis(4_500),
        "back after {waited:?}, before the 5 s asked for"
    );
    assert!(
        s.work(again).await.is_empty(),
        "the second attempt succeeds"
    );
    assert_eq!(
        *s.platform.accepted.lock().unwrap(),
        ["Your list is empty."],
        "delivered once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversations_later_message_waits_for_the_failed_one_and_both_come_back_in_order() {
    let s = setup(
        vec![Reply::text("First answer."), Reply::text("Second answer.")],
        1,
    )
    .await;
    for (id, text) in [("m-1", "first"), ("m-2", "second")] {
        s.queue.enqueue(&job(id, text)).await.unwrap();
    }

    // SQS FIFO hands a group's messages out together; the first fails, the second does not run.
    let first = s.poll(10, Duration::from_secs(5)).await;
    assert_eq!(s.work(first).await, ["first", "second"]);
    assert_eq!(
        s.model.requests().len(),
        1,
        "the second message did not run"
    );

    // Both come back after the backoff, in order, and run once each.
    let started = Instant::now();
    let mut texts = Vec::new();
    while texts.len() < 2 && started.elapsed() < Duration::from_secs(10) {
        let batch = s.poll(1, Duration::from_secs(10)).await;
        texts.extend(batch.records.iter().map(text));
        assert!(s.work(batch).await.is_empty());
    }
    assert_eq!(texts, ["first", "second"], "in order");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        *s.platform.accepted.lock().unwrap(),
        ["First answer.", "Second answer."]
    );
    assert_eq!(s.model.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_whose_backoff_cannot_be_set_is_still_reported_failed() {
    let s = setup(vec![Reply::text("unused")], 1).await;
    s.queue.enqueue(&job("m-1", "hello")).await.unwrap();
    let mut batch = s.poll(10, Duration::from_secs(5)).await;
    // The record names a queue that does not exist: SQS refuses the visibility change.
    batch.records[0].event_source_arn =
        Some("arn:aws:sqs:us-east-1:123456789012:no-such-queue.fifo".into());
    assert_eq!(s.work(batch).await, ["hello"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_its_last_receive_a_failing_job_tells_the_user_and_reaches_the_dead_letters_at_once() {
    // One receive allowed; the platform refuses the reply, then takes the apology.
    let s = setup_with(vec![Reply::text("Your list is empty.")], 1, 1).await;
    s.queue.enqueue(&job("m-1", "hello")).await.unwrap();
    let batch = s.poll(10, Duration::from_secs(5)).await;
    assert_eq!(s.work(batch).await, ["hello"]);
    assert_eq!(
        *s.platform.accepted.lock().unwrap(),
        [engine::lines::GAVE_UP],
        "the user is told once, calmly"
    );
    assert_eq!(s.metric("JobsGivenUp"), [1.0]);

    // Visible again at once, so SQS moves it to the dead letters on its next receive instead
    // of holding it (and its conversation) for the visibility timeout.
    assert!(s.poll(10, Duration::from_secs(3)).await.records.is_empty());
    let dead = queue_sqs::dead_letters(&s.sqs, &s.dlq_url).await.unwrap();
    assert_eq!(dead.messages.len(), 1, "{dead:?}");
    assert_eq!(dead.messages[0].job.as_ref().unwrap().message_id, "m-1");
}

/// The failed record comes back once, no sooner than its job's claim `lapses`, takes the job
/// over and delivers the answer: the platform takes it once, and no apology.
async fn back_once_the_claim_lapsed(s: &Setup, lapses: Instant) {
    let again = s.poll(10, Duration::from_secs(20)).await;
    let back_at = Instant::now();
    assert_eq!(receives(&again), ["2"], "back once");
    assert!(
        back_at >= lapses,
        "back {:?} before the claim lapsed",
        lapses - back_at
    );
    assert!(s.work(again).await.is_empty(), "the job is taken over");
    assert_eq!(
        *s.platform.accepted.lock().unwrap(),
        ["Your list is empty."],
        "delivered once, no apology"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_left_held_by_an_outage_holds_its_record_back_until_it_lapses() {
    // Three receives: were the record back at once (1 s, then 2 s), it would find its own claim
    // busy on both and be given up, the user told "sorry" though the answer was ready.
    let outage = Outage::start(&fake_lambda::moto_endpoint()).await;
    let s = setup_on(
        Knobs {
            fail_first: 1,
            max_receives: 3,
            dynamo: Some(outage.clone()),
            max_turn: Duration::from_secs(4),
            ..Knobs::default()
        },
        vec![Reply::text("Your list is empty.")],
    )
    .await;
    let first = s.first_delivery().await;

    // The platform refuses the reply and DynamoDB goes down with it: the claim's release is
    // throttled until the SDK gives up, so the claim holds until its expiry (the 4 s budget
    // and 1 s of slack from the claim).
    let started = Instant::now();
    assert_eq!(s.work(first).await, ["What's on my list?"]);
    let lapses = started + Duration::from_secs(5);
    assert!(outage.refused() > 0, "the failed attempt met the outage");
    outage.set_down(false);

    back_once_the_claim_lapsed(&s, lapses).await;
    assert_eq!(s.model.requests().len(), 1, "the turn was not run again");
    let dead = queue_sqs::dead_letters(&s.sqs, &s.dlq_url).await.unwrap();
    assert!(dead.messages.is_empty(), "{dead:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_another_attempt_holds_comes_back_when_that_claim_lapses() {
    // Another attempt claimed the job for 6 s and died. Back after the backoff (1 s, 2 s) the
    // record would find it busy until its third and last receive gave it up.
    let s = setup_with(vec![Reply::text("Your list is empty.")], 0, 3).await;
    let job = job("m-1", "What's on my list?");
    let now = (s.worker.jobs.options.clock)();
    let until = now + 6_000;
    assert_eq!(
        s.store
            .claim_job(&job.dedupe_key(), now, until)
            .await
            .unwrap(),
        Claim::Fresh
    );
    let lapses = Instant::now() + Duration::from_secs(6);
    s.queue.enqueue(&job).await.unwrap();

    let first = s.poll(10, Duration::from_secs(5)).await;
    assert_eq!(s.work(first).await, ["What's on my list?"], "busy");
    assert!(s.model.requests().is_empty());

    back_once_the_claim_lapsed(&s, lapses).await;
    assert_eq!(s.metric("JobsGivenUp"), Vec::<f64>::new());
}

/// Bring `outage` back up `after` its first refused call.
fn up_again_after(outage: &Outage, after: Duration) {
    let outage = outage.clone();
    tokio::spawn(async move {
        while outage.refused() == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(after).await;
        outage.set_down(false);
    });
}

/// The worker on DynamoDB behind a proxy that goes down as the platform takes the first reply,
/// with turns of 20 s and the other `knobs`.
async fn setup_with_outage(replies: Vec<Reply>, knobs: Knobs) -> (Setup, Outage) {
    let outage = Outage::start(&fake_lambda::moto_endpoint()).await;
    let s = setup_on(
        Knobs {
            dynamo: Some(outage.clone()),
            max_turn: Duration::from_secs(20),
            ..knobs
        },
        replies,
    )
    .await;
    (s, outage)
}

/// Work `batch` while the table is down from the platform's first reply until 3 s later,
/// within the turn's budget: the attempt ends done, nothing comes back to answer it again, and
/// the platform took exactly one reply, returned with the visible transcript's texts.
async fn done_through_the_outage(
    s: &Setup,
    outage: &Outage,
    batch: SqsEvent,
) -> (String, Vec<String>) {
    up_again_after(outage, Duration::from_secs(3));
    assert!(s.work(batch).await.is_empty(), "the attempt ends done");
    assert!(outage.refused() > 0, "the record met the outage");
    assert!(
        s.poll(10, Duration::from_secs(2)).await.records.is_empty(),
        "nothing comes back to answer it again"
    );
    let accepted = s.platform.accepted.lock().unwrap().clone();
    assert_eq!(accepted.len(), 1, "{accepted:?}");
    assert_eq!(s.platform.attempts.load(Ordering::SeqCst), 1);
    let visible = s.store.visible(&"generic:c-7@alice".into()).await.unwrap();
    let said = visible.into_iter().map(|e| e.text).collect();
    (accepted[0].clone(), said)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_the_platform_took_as_the_table_went_down_is_recorded_when_it_is_back_not_sent_again()
 {
    // Nothing but the record tells a later attempt that the platform took the reply (platforms
    // take no idempotency key): given up, the record would be missing and the reply sent twice.
    let (s, outage) =
        setup_with_outage(vec![Reply::text("Your list is empty.")], Knobs::default()).await;
    let batch = s.first_delivery().await;
    let (sent, said) = done_through_the_outage(&s, &outage, batch).await;
    assert_eq!(sent, "Your list is empty.");
    assert_eq!(said, ["What's on my list?", "Your list is empty."]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_the_platform_took_in_an_outage_longer_than_the_turn_is_recorded_by_the_retry_not_sent_again()
 {
    // The table goes down as the platform takes the reply and stays down past the attempt's
    // 3 s budget: the record is cut off and the attempt fails, with nothing in the store to
    // say the reply went out. The retry, in this process, records the reply it remembers.
    let outage = Outage::start(&fake_lambda::moto_endpoint()).await;
    let s = setup_on(
        Knobs {
            dynamo: Some(outage.clone()),
            max_turn: Duration::from_secs(3),
            ..Knobs::default()
        },
        vec![Reply::text("Your list is empty.")],
    )
    .await;
    let first = s.first_delivery().await;
    let started = Instant::now();
    assert_eq!(s.work(first).await, ["What's on my list?"], "cut off");
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "the record was tried until the deadline"
    );
    assert_eq!(
        s.worker.jobs.options.sent.len(),
        1,
        "the reply is remembered"
    );
    outage.set_down(false);

    back_once_the_claim_lapsed(&s, started + Duration::from_secs(4)).await;
    assert_eq!(s.platform.attempts.load(Ordering::SeqCst), 1, "sent once");
    assert_eq!(s.model.requests().len(), 1, "the turn was not run again");
    let said: Vec<String> = s
        .store
        .visible(&"generic:c-7@alice".into())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(said, ["What's on my list?", "Your list is empty."]);
    assert!(
        s.worker.jobs.options.sent.is_empty(),
        "forgotten once recorded"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_confirmation_the_platform_took_as_the_table_went_down_is_recorded_not_followed_by_another()
 {
    // A harness reply is recorded after it is sent, as a turn's is. Given up, the retry would
    // find the code used and send a second, contradicting sentence.
    let (s, outage) = setup_with_outage(Vec::new(), Knobs::default()).await;
    let now = (s.worker.jobs.options.clock)();
    s.store
        .create_link_code("K7PQ2345", &"alice".into(), now, now + 30 * 60 * 1000)
        .await
        .unwrap();
    let linking = TurnJob {
        external_user_id: "u-77".into(),
        ..job("m-1", "K7PQ2345")
    };
    s.queue.enqueue(&linking).await.unwrap();
    let batch = s.poll(10, Duration::from_secs(5)).await;
    let (sent, said) = done_through_the_outage(&s, &outage, batch).await;
    assert!(sent.starts_with("Linked!"), "{sent}");
    assert_eq!(said, ["K7PQ2345", sent.as_str()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_whose_lease_lapsed_in_the_outage_is_recorded_after_the_turn_that_took_it_not_sent_again()
 {
    // The outage outlasts the conversation's lease (2 s here, 60 s by default) and another
    // entrance that still reaches the table starts a turn of the same conversation, its
    // message in the reply's position. Given up, the record would leave the retry without this
    // turn's reply last in the transcript, and it would send the reply again.
    let knobs = Knobs {
        lease_ttl: Duration::from_secs(2),
        ..Knobs::default()
    };
    let (s, outage) = setup_with_outage(vec![Reply::text("Your list is empty.")], knobs).await;
    let conversation: ConversationId = "generic:c-7@alice".into();
    let other_turn = tokio::spawn(other_turn_in_the_outage(
        s.beside.clone().unwrap(),
        outage.clone(),
        conversation.clone(),
    ));
    let batch = s.first_delivery().await;
    assert!(s.work(batch).await.is_empty(), "the attempt ends done");
    other_turn.await.unwrap();
    assert!(
        s.poll(10, Duration::from_secs(2)).await.records.is_empty(),
        "nothing comes back to answer it again"
    );
    let accepted = s.platform.accepted.lock().unwrap().clone();
    assert_eq!(accepted, ["Your list is empty."]);
    assert_eq!(s.platform.attempts.load(Ordering::SeqCst), 1);
    let said: Vec<String> = s
        .store
        .visible(&conversation)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(
        said,
        [
            "What's on my list?",
            "And tomorrow?",
            "Nothing tomorrow either.",
            "Your list is empty."
        ]
    );
}

/// Another entrance's turn of `conversation`, on `table` (which the outage does not touch):
/// once the outage began and the worker's lease lapsed, it takes the lease and writes its
/// message; the table comes back for the worker then, and a second later the turn writes its
/// reply and gives the lease up.
async fn other_turn_in_the_outage(
    table: Arc<dyn Store>,
    outage: Outage,
    conversation: ConversationId,
) {
    while outage.refused() == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let now = || (JobOptions::default().clock)();
    loop {
        let at = now();
        match table
            .acquire_lease(&conversation, "web-turn", at, at + 60_000)
            .await
            .unwrap()
        {
            Lease::Held => break,
            Lease::Busy { .. } => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let turn = table
        .conversation(&conversation)
        .await
        .unwrap()
        .unwrap()
        .turn
        + 1;
    let position = table.next_visible_position(&conversation).await.unwrap();
    let entry = |position, role, text: &str| VisibleEntry {
        conversation_id: conversation.clone(),
        position,
        role,
        text: text.into(),
        buttons: Vec::new(),
        reaction: None,
        turn,
        created_at_ms: now(),
    };
    table
        .append_visible(&entry(position, VisibleRole::User, "And tomorrow?"))
        .await
        .unwrap();
    outage.set_down(false);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reply = entry(
        position + 1,
        VisibleRole::Assistant,
        "Nothing tomorrow either.",
    );
    table.append_visible(&reply).await.unwrap();
    table
        .release_lease(&conversation, "web-turn")
        .await
        .unwrap();
}
