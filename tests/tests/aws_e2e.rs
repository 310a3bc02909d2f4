//! End to end on the AWS path, through the real AWS SDK clients: a signed request to the
//! webhook handler → a message on a FIFO queue in moto → the worker handler with the fake
//! Bedrock → the transcript and the claim record in moto's DynamoDB → the reply at a local
//! platform server. Needs `AWS_ENDPOINT_URL` pointing at moto (`scripts/test` starts it).

use aws_lambda_events::sqs::{SqsEvent, SqsMessage};
use aws_sdk_sqs::types::MessageSystemAttributeName;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use backend::Reply;
use backend_bedrock::BedrockModel;
use channels::generic::{GenericChannel, GenericSender};
use engine::{Engine, EngineOptions};
use fake_bedrock::{FakeBedrock, Scenario};
use queue::QueueSettings;
use queue_sqs::SqsQueue;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Claim, Identities, JobClaims, MessageStore};
use store_dynamodb::DynamoStore;
use tests::{Calls, sample_tools};
use tokio::time::Instant;
use transcript::{Role, StopReason};
use webhook::Webhook;
use worker::{ChannelJobs, JobOptions, Worker, WorkerOptions};

const NOW_S: i64 = 1_800_000_000;

fn moto() -> String {
    std::env::var("AWS_ENDPOINT_URL").expect(
        "AWS_ENDPOINT_URL is not set: run the tests with scripts/test, which starts moto \
         (pip install 'moto[server]'; moto_server -p 5000; AWS_ENDPOINT_URL=http://127.0.0.1:5000)",
    )
}

fn credentials() -> aws_credential_types::Credentials {
    aws_credential_types::Credentials::new("test", "test", None, None, "static")
}

fn region() -> aws_types::region::Region {
    aws_types::region::Region::new("us-east-1")
}

/// The platform: receives the worker's replies.
#[derive(Clone, Default)]
struct Platform(Arc<Mutex<Vec<Value>>>);

async fn platform() -> (Platform, String) {
    let p = Platform::default();
    let app = Router::new()
        .route(
            "/callback",
            post(|State(p): State<Platform>, body: Bytes| async move {
                p.0.lock()
                    .unwrap()
                    .push(serde_json::from_slice(&body).unwrap());
                "ok"
            }),
        )
        .with_state(p.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/callback", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (p, url)
}

struct Aws {
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    store: Arc<DynamoStore>,
    bedrock: FakeBedrock,
    webhook: Webhook,
    worker: Worker,
    platform: Platform,
    calls: Calls,
    clock: Arc<AtomicI64>,
}

/// The AWS path with the sender `u-42` linked to the user `alice`.
async fn aws(scenarios: Vec<Scenario>) -> Aws {
    let aws = aws_unlinked(scenarios).await;
    aws.store
        .bind_identity("generic", "u-42", &"alice".into(), NOW_S * 1000)
        .await
        .unwrap();
    aws
}

async fn aws_unlinked(scenarios: Vec<Scenario>) -> Aws {
    let endpoint = moto();
    let name = format!("bridle-{}", uuid::Uuid::new_v4().simple());
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::Config::builder()
            .behavior_version_latest()
            .region(region())
            .endpoint_url(&endpoint)
            .credentials_provider(credentials())
            .build(),
    );
    let dynamo = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version_latest()
            .region(region())
            .endpoint_url(&endpoint)
            .credentials_provider(credentials())
            .build(),
    );
    let settings = QueueSettings::default();
    let (queue_url, _dlq) = queue_sqs::create_fifo_queue_with_dlq(&sqs, &name, &settings)
        .await
        .unwrap();
    store_dynamodb::create_table(&dynamo, &name).await.unwrap();
    let store = Arc::new(DynamoStore::new(dynamo, name));
    let bedrock = FakeBedrock::start(scenarios).await.unwrap();
    let bedrock_client = aws_sdk_bedrockruntime::Client::from_conf(
        aws_sdk_bedrockruntime::Config::builder()
            .behavior_version_latest()
            .region(region())
            .endpoint_url(bedrock.endpoint())
            .credentials_provider(credentials())
            .build(),
    );
    let calls = Calls::default();
    let engine = Engine::new(
        Arc::new(BedrockModel::new(
            bedrock_client,
            "anthropic.claude-test".into(),
        )),
        Arc::new(sample_tools(calls.clone())),
        store.clone(),
        EngineOptions {
            model_id: "anthropic.claude-test".into(),
            ..EngineOptions::default()
        },
    );
    let (platform, callback) = platform().await;
    let mut senders: HashMap<String, Arc<dyn channels::Sender>> = HashMap::new();
    senders.insert(
        "generic".into(),
        Arc::new(GenericSender::new(
            reqwest::Client::new(),
            callback,
            "cb-secret",
        )),
    );
    let clock = Arc::new(AtomicI64::new(NOW_S * 1000));
    let c = clock.clone();
    let worker = Worker {
        jobs: ChannelJobs {
            engine: Arc::new(engine),
            store: store.clone(),
            senders,
            options: JobOptions {
                signup_url: "https://bridle.example/".into(),
                clock: Arc::new(move || c.load(Ordering::SeqCst)),
                ..JobOptions::default()
            },
        },
        options: WorkerOptions {
            safety_margin: Duration::from_secs(1),
            ..WorkerOptions::default()
        },
    };
    let queue = SqsQueue::new(sqs.clone(), queue_url.clone(), settings);
    let webhook = Webhook::new(
        vec![Arc::new(GenericChannel::new(
            "test-secret-0123456789abcdef-0123",
        ))],
        Arc::new(queue),
        webhook::DEFAULT_MAX_BODY_BYTES,
    );
    Aws {
        sqs,
        queue_url,
        store,
        bedrock,
        webhook,
        worker,
        platform,
        calls,
        clock,
    }
}

fn event(name: &str) -> String {
    let path = format!("{}/../events/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

/// The message event with another message id, re-signed.
fn message_event(id: &str) -> String {
    message_event_saying(id, "What's on my list?")
}

/// A message event with this id and text, signed.
fn message_event_saying(id: &str, text: &str) -> String {
    let mut e: Value = serde_json::from_str(&event("apigw-generic-message")).unwrap();
    let body = json!({"type": "message", "id": id, "user": "u-42", "conversation": "c-7",
                      "text": text})
    .to_string();
    e["headers"]["x-bridle-signature"] = json!(channels::generic::sign(
        b"test-secret-0123456789abcdef-0123",
        NOW_S,
        body.as_bytes()
    ));
    e["body"] = json!(body);
    e.to_string()
}

impl Aws {
    async fn post(&self, event_json: &str) -> u16 {
        let req = lambda_http::request::from_str(event_json).unwrap();
        webhook::lambda::handle(&self.webhook, req, NOW_S * 1000)
            .await
            .status()
            .as_u16()
    }

    /// What the Lambda poller would hand the worker: the next batch, as an SQS event.
    async fn poll(&self) -> SqsEvent {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .visibility_timeout(1)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send()
            .await
            .unwrap();
        let records = out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| {
                let mut record = SqsMessage::default();
                record.message_id = m.message_id;
                record.receipt_handle = m.receipt_handle;
                record.body = m.body;
                record.attributes = m
                    .attributes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k.as_str().to_owned(), v))
                    .collect();
                record
            })
            .collect();
        let mut event = SqsEvent::default();
        event.records = records;
        event
    }

    /// Run a batch like the Lambda integration: failures stay, successes are deleted.
    async fn work(&self, batch: SqsEvent, time_left: Duration) -> usize {
        let response = self
            .worker
            .handle_batch(batch.clone(), Instant::now() + time_left)
            .await;
        let failed: Vec<String> = response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.clone())
            .collect();
        for record in batch.records {
            if !failed.contains(record.message_id.as_ref().unwrap()) {
                self.sqs
                    .delete_message()
                    .queue_url(&self.queue_url)
                    .receipt_handle(record.receipt_handle.unwrap())
                    .send()
                    .await
                    .unwrap();
            }
        }
        failed.len()
    }

    async fn transcript(&self) -> Vec<transcript::Message> {
        self.store
            .messages(&"generic:c-7@alice".into(), 0)
            .await
            .unwrap()
    }

    fn replies(&self) -> Vec<String> {
        self.platform
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|r| r["text"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn tool_then_answer() -> Vec<Scenario> {
    vec![
        Scenario::reply(
            &Reply::new()
                .say("Checking.")
                .call("t1", "list_events", json!({}))
                .stop(StopReason::ToolUse),
        ),
        Scenario::reply(&Reply::text("You have Spring Open and Summer Cup.")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_request_becomes_exactly_one_turn() {
    let aws = aws(tool_then_answer()).await;
    let delivery = event("apigw-generic-message");
    assert_eq!(aws.post(&delivery).await, 200);
    assert_eq!(
        aws.post(&delivery).await,
        200,
        "the platform's retry is acknowledged"
    );

    let batch = aws.poll().await;
    assert_eq!(batch.records.len(), 1, "SQS FIFO dedupe dropped the retry");
    let record = &batch.records[0];
    assert_eq!(record.attributes["MessageGroupId"], "generic#c-7#u-42");
    assert_eq!(aws.work(batch.clone(), Duration::from_secs(30)).await, 0);

    let rows = aws.transcript().await;
    let roles: Vec<Role> = rows.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [Role::User, Role::Assistant, Role::Tool, Role::Assistant]
    );
    assert_eq!(rows[0].text(), "What's on my list? été");
    assert_eq!(rows[3].call.as_ref().unwrap().backend, "bedrock");
    assert_eq!(
        aws.replies(),
        ["Checking.\n\nYou have Spring Open and Summer Cup."]
    );
    let now = aws.clock.load(Ordering::SeqCst);
    assert_eq!(
        aws.store
            .claim_job("generic#m-1001", now, now + 1000)
            .await
            .unwrap(),
        Claim::Done,
        "the claim record says done"
    );

    // The same job delivered again (a redelivery, or a duplicate after SQS's 5-minute window).
    assert_eq!(aws.work(batch, Duration::from_secs(30)).await, 0);
    assert_eq!(
        aws.bedrock.requests().len(),
        2,
        "exactly one turn: two model calls"
    );
    assert_eq!(aws.transcript().await.len(), 4);
    assert_eq!(aws.replies().len(), 1);
    assert_eq!(aws.calls.list().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_turn_is_resumed_without_repeating_anything() {
    let mut scenarios = vec![Scenario::reply(
        &Reply::new()
            .say("Checking.")
            .call("t1", "list_events", json!({}))
            .stop(StopReason::ToolUse),
    )];
    // The second model call hangs: the invocation runs out of time mid-turn.
    scenarios.push(Scenario::reply(&Reply::new().then_stall()));
    scenarios.push(Scenario::reply(&Reply::text("You have two events.")));
    let aws = aws(scenarios).await;
    assert_eq!(aws.post(&message_event("m-2002")).await, 200);

    let batch = aws.poll().await;
    assert_eq!(
        aws.work(batch, Duration::from_secs(3)).await,
        1,
        "cut off by the deadline"
    );
    assert_eq!(aws.calls.list().len(), 1, "the tool ran before the cut");
    assert!(aws.replies().is_empty());

    // SQS redelivers after the visibility timeout; the claim has expired by then.
    aws.clock.fetch_add(10 * 60 * 1000, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let batch = aws.poll().await;
    assert_eq!(batch.records.len(), 1, "redelivered");
    assert_eq!(aws.work(batch, Duration::from_secs(30)).await, 0);

    let rows = aws.transcript().await;
    let users = rows.iter().filter(|m| m.role == Role::User).count();
    assert_eq!(users, 1, "no second user message");
    assert_eq!(
        aws.calls.list().len(),
        1,
        "the stored tool result was not run again"
    );
    assert_eq!(aws.replies(), ["Checking.\n\nYou have two events."]);
    assert_eq!(aws.bedrock.requests().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_sender_is_onboarded_then_links_with_a_code_on_dynamodb() {
    let aws = aws_unlinked(vec![Scenario::reply(&Reply::text("Hello, Alice."))]).await;
    assert_eq!(aws.post(&message_event_saying("m-1", "hi")).await, 200);
    assert_eq!(aws.work(aws.poll().await, Duration::from_secs(30)).await, 0);
    let now = aws.clock.load(Ordering::SeqCst);
    aws.store
        .create_link_code("K7PQ2345", &"alice".into(), now, now + 30 * 60 * 1000)
        .await
        .unwrap();
    let link = message_event_saying("m-2", "here is my code: k7pq-2345");
    assert_eq!(aws.post(&link).await, 200);
    assert_eq!(aws.work(aws.poll().await, Duration::from_secs(30)).await, 0);
    assert_eq!(
        aws.store.identity("generic", "u-42").await.unwrap(),
        Some("alice".into()),
        "the code bound the account in DynamoDB"
    );
    assert_eq!(aws.post(&message_event_saying("m-3", "hello")).await, 200);
    assert_eq!(aws.work(aws.poll().await, Duration::from_secs(30)).await, 0);
    let replies = aws.replies();
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert!(
        replies[0].contains("https://bridle.example/"),
        "onboarding links the web app"
    );
    assert!(replies[1].starts_with("Linked!"), "{}", replies[1]);
    assert_eq!(replies[2], "Hello, Alice.");
    assert_eq!(
        aws.bedrock.requests().len(),
        1,
        "only the linked message reached the model"
    );
    let rows = aws.transcript().await;
    assert_eq!(
        rows[0].text(),
        "hello",
        "the turn ran in alice's conversation"
    );
}

/// The trace started at the webhook travels in the SQS message body and the worker's spans
/// join it: one trace from the request to the delivery (traces go to an OTLP receiver in this
/// process, `tests::otlp`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_webhook_s_trace_survives_the_queue_into_the_worker() {
    let collector = tests::otlp::Collector::install(false);
    let aws = aws(tool_then_answer()).await;
    assert_eq!(aws.post(&message_event("m-traced")).await, 200);
    let batch = aws.poll().await;
    let body: Value = serde_json::from_str(batch.records[0].body.as_deref().unwrap()).unwrap();
    let traceparent = body["job"]["trace_context"]["traceparent"]
        .as_str()
        .expect("the message on the queue carries the trace")
        .to_owned();
    let mut fields = traceparent.split('-');
    let (trace_id, enqueue_span) = (fields.nth(1).unwrap(), fields.next().unwrap());
    // X-Ray's shape (what the ADOT collector's awsxray exporter needs on AWS): the first 4
    // bytes are the second the trace began.
    let began = u64::from_str_radix(&trace_id[..8], 16).expect("hex trace id");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(
        began <= now && now - began < 600,
        "trace id {trace_id} does not start with the time it began (now {now:x})"
    );
    assert_eq!(aws.work(batch, Duration::from_secs(30)).await, 0);

    let spans = collector.trace(trace_id);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let one = |name: &str| {
        let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "one {name} span in {names:?}");
        found[0].clone()
    };
    let webhook = one("webhook");
    let enqueue = one("enqueue");
    assert_eq!(enqueue.span_id, enqueue_span);
    assert_eq!(enqueue.parent_span_id, webhook.span_id);
    let job = one("turn_job");
    assert_eq!(
        job.parent_span_id, enqueue.span_id,
        "the worker's job span continues the webhook's trace"
    );
    assert_eq!(job.attr("job"), Some("generic#m-traced"));
    for name in [
        "job_claim",
        "turn",
        "context_build",
        "execute_tool list_events",
        "delivery",
    ] {
        one(name);
    }
    let model_calls = spans
        .iter()
        .filter(|s| s.name == "chat anthropic.claude-test")
        .count();
    assert_eq!(model_calls, 2, "{names:?}");
    assert!(
        !collector.exported_contains("Spring Open"),
        "no tool result text without BRIDLE_TRACE_CONTENT"
    );
}
