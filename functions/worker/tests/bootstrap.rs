//! The worker bootstrap itself (`src/main.rs`), started as Lambda starts it: the built binary,
//! the environment the template gives it, a local Lambda Runtime API handing it an SQS batch,
//! DynamoDB in moto (`AWS_ENDPOINT_URL`; `scripts/test` starts it), the fake Bedrock
//! (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`) and a local platform taking the generic channel's
//! replies. This is the wiring the handler tests do not reach: configuration and secrets from the
//! environment, every SDK client on one configuration, the engine with its guards, the runtime.
//!
//! Two tests take their environment from `infra/template.yaml` itself (`fake_lambda::
//! template_env`), with the reply credentials in a Secrets Manager secret as deployed, so the
//! template and the code cannot drift apart. A failed init is checked where Lambda sees it: the
//! Runtime API's `/runtime/init/error`.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use backend::Reply;
use fake_bedrock::{FakeBedrock, Scenario};
use fake_lambda::{
    Bootstrap, PostedKind, RuntimeApi, moto_endpoint as moto, moto_secret, template_env,
};
use queue::TurnJob;
use serde_json::{Value, json};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{Account, Accounts, Claim, Identities, JobClaims};
use store_dynamodb::DynamoStore;

const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const CALLBACK_SECRET: &str = "bootstrap-callback-secret";
const TWILIO_TOKEN: &str = "bootstrap-twilio-auth-token";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The platform: keeps every reply the worker posts.
async fn platform() -> (Arc<Mutex<Vec<Value>>>, String) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route(
            "/callback",
            post(
                |State(got): State<Arc<Mutex<Vec<Value>>>>, body: Bytes| async move {
                    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    got.lock().unwrap().push(body);
                    "ok"
                },
            ),
        )
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/callback", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (got, url)
}

/// A table in moto with `alice` active and linked to the generic channel's user `u-42`.
async fn table() -> (DynamoStore, String) {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    let dynamo = aws_sdk_dynamodb::Client::new(&config);
    // Tests run in parallel: the counter keeps two tables of one millisecond apart.
    static TABLES: AtomicUsize = AtomicUsize::new(0);
    let n = TABLES.fetch_add(1, Ordering::Relaxed);
    let name = format!("worker-bootstrap-{}-{}-{n}", std::process::id(), now_ms());
    store_dynamodb::create_table(&dynamo, &name).await.unwrap();
    let store = DynamoStore::new(dynamo, name.clone());
    store
        .put_account(&Account::new("alice", "Alice"))
        .await
        .unwrap();
    store
        .bind_identity("generic", "u-42", &"alice".into(), now_ms())
        .await
        .unwrap();
    (store, name)
}

/// An SQS record as Lambda delivers it from the FIFO queue, from the sample event.
fn record(message_id: &str, group: &str, body: &str) -> Value {
    let sample: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../../events/sqs-turn-jobs.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let mut record = sample["Records"][0].clone();
    record["messageId"] = json!(message_id);
    record["body"] = json!(body);
    record["attributes"]["MessageGroupId"] = json!(group);
    record
}

fn job(message_id: &str, conversation: &str, text: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "generic".into(),
        message_id: message_id.into(),
        conversation_key: conversation.into(),
        external_user_id: "u-42".into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: now_ms(),
    }
}

#[tokio::test]
async fn the_bootstrap_runs_a_batch_through_bedrock_to_the_platform_and_reports_the_bad_record() {
    let (store, table) = table().await;
    let bedrock = FakeBedrock::start([Scenario::reply(&Reply::text("Your list is empty."))])
        .await
        .unwrap();
    let (replies, callback) = platform().await;
    let good = job("m-boot-1", "c-boot", "What's on my list?");
    let batch = json!({"Records": [
        record("sqs-1", "generic#c-boot", &queue_sqs::encode_job(&good).unwrap()),
        record("sqs-2", "generic#c-other", "not a turn job"),
    ]});
    let mut api = RuntimeApi::start([("req-1".into(), batch)]).await.unwrap();

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.env_clear()
        .envs(api.lambda_env("worker"))
        .env("AWS_ENDPOINT_URL", moto())
        .env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.endpoint())
        .env("TABLE_NAME", &table)
        .env("BEDROCK_MODEL_ID", MODEL)
        .env("PUBLIC_BASE_URL", "https://bridle.example/")
        .env("GENERIC_CALLBACK_URL", &callback)
        .env("GENERIC_CALLBACK_SECRET", CALLBACK_SECRET)
        .env("TWILIO_ACCOUNT_SID", "AC3f1e2d4c5b6a79880a1b2c3d4e5f6a7b")
        .env("TWILIO_AUTH_TOKEN", TWILIO_TOKEN)
        // No strangers' cap: said at the cold start (SMS pumping could spend everyone's).
        .env("BRIDLE_CAP_UNLINKED_USD_30D", "off")
        .env("RUST_LOG", "info");
    let running = Bootstrap::spawn(cmd).unwrap();
    let posted = api.next_posted(Duration::from_secs(60)).await;
    let logs = running.stop().logs;
    assert!(
        logs.lines()
            .any(|l| l.contains("WARN") && l.contains("BRIDLE_CAP_UNLINKED_USD_30D is off")),
        "{logs}"
    );
    // With SMS configured, the codes its questions carry are keyed (the key itself redacted).
    assert!(
        logs.contains("confirm_code_key: Some(CodeKey([redacted]))"),
        "{logs}"
    );

    // The good record ran; the undecodable one is reported failed for SQS to redeliver (and
    // finally dead-letter), without holding up the other conversation.
    assert_eq!(
        (posted.kind, posted.request_id.as_str()),
        (PostedKind::Response, "req-1"),
        "{logs}"
    );
    assert_eq!(
        posted.body,
        json!({"batchItemFailures": [{"itemIdentifier": "sqs-2"}]}),
        "{logs}"
    );

    let requests = bedrock.requests();
    assert_eq!(requests.len(), 1, "one model call: {logs}");
    assert_eq!(requests[0].model_id, MODEL);
    assert!(
        requests[0].body.to_string().contains("What's on my list?"),
        "{}",
        requests[0].body
    );
    let texts: Vec<Value> = replies
        .lock()
        .unwrap()
        .iter()
        .map(|r| r["text"].clone())
        .collect();
    assert_eq!(texts, [json!("Your list is empty.")]);
    // The job's claim record is done: a redelivery of it would be skipped.
    let now = now_ms();
    assert_eq!(
        store
            .claim_job(&good.dedupe_key(), now, now + 60_000)
            .await
            .unwrap(),
        Claim::Done
    );
    assert!(logs.contains("worker ready"), "{logs}");
    assert!(
        !logs.contains(CALLBACK_SECRET) && !logs.contains(TWILIO_TOKEN),
        "a secret reached the log: {logs}"
    );
}

#[tokio::test]
async fn a_bootstrap_missing_its_settings_stops_at_init_and_names_them() {
    let api = RuntimeApi::start([]).await.unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.env_clear()
        .envs(api.lambda_env("worker"))
        .env("GENERIC_CALLBACK_URL", "http://127.0.0.1:9/callback")
        .env("GENERIC_CALLBACK_SECRET", CALLBACK_SECRET);
    let (ran, init_error) = run_to_exit(cmd, api).await;
    assert!(!ran.status.success());
    let message = init_error.body["errorMessage"].as_str().unwrap_or_default();
    for name in ["TABLE_NAME", "BEDROCK_MODEL_ID", "PUBLIC_BASE_URL"] {
        assert!(ran.logs.contains(name), "{name} not named: {}", ran.logs);
        assert!(message.contains(name), "{name} not posted: {message}");
    }
    // The reply channel is configured: only what is really wrong is said.
    assert!(!ran.logs.contains("no reply channel"), "{}", ran.logs);
    assert!(!message.contains("no reply channel"), "{message}");
    // One problem per line in the log.
    assert!(
        ran.logs
            .contains("worker misconfigured:\n  - TABLE_NAME is not set"),
        "{}",
        ran.logs
    );
    assert!(!ran.logs.contains(CALLBACK_SECRET), "{}", ran.logs);
    assert!(!message.contains(CALLBACK_SECRET), "{message}");
}

/// Run a bootstrap that should refuse to start; return how it ended and the init error it
/// posted to the Runtime API.
async fn run_to_exit(cmd: Command, mut api: RuntimeApi) -> (fake_lambda::Ran, fake_lambda::Posted) {
    let ran =
        tokio::task::spawn_blocking(move || Bootstrap::run_to_exit(cmd, Duration::from_secs(60)))
            .await
            .unwrap();
    let posted = api.next_posted(Duration::from_secs(5)).await;
    assert_eq!(posted.kind, PostedKind::InitError, "{}", ran.logs);
    assert_eq!(
        posted.error_type.as_deref(),
        posted.body["errorType"].as_str(),
        "the header and the body agree"
    );
    (ran, posted)
}

/// What the template's references stand for in these tests.
/// The web function's URL as Lambda gives it (with a trailing "/").
const WEB_URL: &str = "https://bridle-web.lambda-url.us-east-1.on.aws/";

/// The worker as the template starts it: its variables from `infra/template.yaml`, the reply
/// credentials in the Secrets Manager secret it names (`WorkerSecrets`), moto and the fake
/// Bedrock as AWS.
async fn templated_worker(api: &RuntimeApi, table: &str, secret: Value, bedrock: &str) -> Command {
    let name = format!("{table}-secrets");
    let arn = moto_secret(&name, &secret).await;
    let env = template_env(
        "WorkerFunction",
        &[
            ("Table", table),
            ("WebFunctionUrl.FunctionUrl", WEB_URL),
            ("WorkerSecrets", &arn),
            ("MediaBucket", "bridle-media"),
        ],
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_worker"));
    cmd.env_clear()
        .envs(api.lambda_env("worker"))
        .env("AWS_ENDPOINT_URL", moto())
        .env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock)
        .envs(env);
    cmd
}

#[tokio::test]
async fn the_template_environment_starts_the_worker_and_it_answers_a_newcomer() {
    let (_store, table) = table().await;
    let bedrock = FakeBedrock::start([]).await.unwrap();
    let (replies, callback) = platform().await;
    let mut newcomer = job("m-tpl-1", "c-tpl", "hello");
    newcomer.external_user_id = "u-new".into();
    let batch = json!({"Records": [
        record("sqs-1", "generic#c-tpl", &queue_sqs::encode_job(&newcomer).unwrap()),
    ]});
    let mut api = RuntimeApi::start([("req-1".into(), batch)]).await.unwrap();
    let secret =
        json!({"GENERIC_CALLBACK_URL": callback, "GENERIC_CALLBACK_SECRET": CALLBACK_SECRET});
    let cmd = templated_worker(&api, &table, secret, &bedrock.endpoint()).await;
    let running = Bootstrap::spawn(cmd).unwrap();
    let posted = api.next_posted(Duration::from_secs(60)).await;
    let logs = running.stop().logs;

    assert_eq!(
        (posted.kind, posted.request_id.as_str()),
        (PostedKind::Response, "req-1"),
        "{logs}"
    );
    assert_eq!(posted.body, json!({"batchItemFailures": []}), "{logs}");
    assert!(logs.contains("worker ready"), "{logs}");
    // The template's caps leave nothing to warn of.
    assert!(
        !logs
            .lines()
            .any(|l| l.contains("WARN") && l.contains("BRIDLE_CAP_")),
        "{logs}"
    );
    // The onboarding reply links to the PUBLIC_BASE_URL the template derives: with no
    // PublicBaseUrl parameter, the web app (its function URL without the trailing "/").
    let texts: Vec<String> = replies
        .lock()
        .unwrap()
        .iter()
        .map(|r| r["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts.len(), 1, "{texts:?}\n{logs}");
    let url = WEB_URL.trim_end_matches('/');
    assert!(texts[0].contains(url), "{url} not in {:?}", texts[0]);
    assert!(
        bedrock.requests().is_empty(),
        "a newcomer costs no model call"
    );
    assert!(
        !logs.contains(CALLBACK_SECRET),
        "a secret reached the log: {logs}"
    );
}

#[tokio::test]
async fn the_template_environment_without_reply_credentials_is_one_clear_init_error() {
    let (_store, table) = table().await;
    let api = RuntimeApi::start([]).await.unwrap();
    // The secret as the template creates it: an empty object, for the operator to fill in.
    let cmd = templated_worker(&api, &table, json!({}), "http://127.0.0.1:9").await;
    let (ran, init_error) = run_to_exit(cmd, api).await;

    assert!(!ran.status.success());
    assert_eq!(
        init_error.body,
        json!({
            "errorType": "Bridle.Misconfigured",
            "errorMessage": "worker misconfigured: no reply channel is configured: set at least \
                             one channel's credentials",
        }),
        "only the missing credentials, nothing the template already gives: {}",
        ran.logs
    );
    assert!(
        ran.logs.contains(
            "worker misconfigured:\n  - no reply channel is configured: set at least one \
             channel's credentials"
        ),
        "{}",
        ran.logs
    );
}
