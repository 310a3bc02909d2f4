//! The webhook bootstrap itself (`src/main.rs`), started as Lambda starts it: the built binary,
//! the environment Lambda gives a function, a local Lambda Runtime API that hands it API Gateway
//! events, and the SQS queue in moto (`AWS_ENDPOINT_URL`; `scripts/test` starts it). This is the
//! wiring the handler tests do not reach: configuration from the environment, the SDK clients,
//! the runtime the bootstrap runs on, and what it logs.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use channels::generic::sign;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

const SECRET: &str = "bootstrap-test-secret";

fn moto() -> String {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the tests with scripts/test, which starts moto")
}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// What the bootstrap posted back to the Runtime API: (path kind, request id, body).
type Posted = (String, String, Value);

#[derive(Clone)]
struct RuntimeApi {
    events: Arc<Mutex<VecDeque<(String, Value)>>>,
    posted: mpsc::UnboundedSender<Posted>,
}

/// `GET .../invocation/next`: the next event, or no answer at all once they are used up (as
/// Lambda does while no request comes).
async fn next(State(api): State<RuntimeApi>) -> (HeaderMap, String) {
    let Some((id, event)) = api.events.lock().unwrap().pop_front() else {
        return std::future::pending().await;
    };
    let deadline_ms = (SystemTime::now() + Duration::from_secs(30))
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let mut headers = HeaderMap::new();
    headers.insert("lambda-runtime-aws-request-id", id.parse().unwrap());
    headers.insert(
        "lambda-runtime-deadline-ms",
        deadline_ms.to_string().parse().unwrap(),
    );
    headers.insert(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:webhook"
            .parse()
            .unwrap(),
    );
    (headers, event.to_string())
}

async fn runtime_api(events: Vec<(String, Value)>) -> (String, mpsc::UnboundedReceiver<Posted>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let api = RuntimeApi {
        events: Arc::new(Mutex::new(events.into())),
        posted: tx,
    };
    let record = |kind: &'static str| {
        move |State(api): State<RuntimeApi>, Path(id): Path<String>, body: Bytes| async move {
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let _ = api.posted.send((kind.to_owned(), id, body));
            axum::http::StatusCode::ACCEPTED
        }
    };
    let app = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(record("response")),
        )
        .route(
            "/2018-06-01/runtime/invocation/{id}/error",
            post(record("error")),
        )
        .with_state(api);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, rx)
}

/// An API Gateway v2 delivery of `body` to the generic channel, signed with `secret` now.
fn delivery(body: &str, secret: &str) -> Value {
    let ts = now_s();
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../../events/apigw-generic-message.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    event["body"] = json!(body);
    event["headers"]["x-bridle-timestamp"] = json!(ts.to_string());
    event["headers"]["x-bridle-signature"] = json!(sign(secret.as_bytes(), ts, body.as_bytes()));
    event
}

fn bootstrap(runtime_api: &str, queue_url: &str, secret: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_webhook"));
    cmd.env_clear()
        .env("AWS_LAMBDA_RUNTIME_API", runtime_api)
        .env("AWS_LAMBDA_FUNCTION_NAME", "webhook")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_STREAM_NAME", "stream")
        .env("AWS_LAMBDA_LOG_GROUP_NAME", "group")
        .env("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", moto())
        .env("QUEUE_URL", queue_url)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(secret) = secret {
        cmd.env("GENERIC_WEBHOOK_SECRET", secret);
    }
    cmd
}

/// The running bootstrap; killed when dropped, so a failing test leaves no process behind.
struct Running(Option<Child>);

impl Running {
    /// Stops it and returns what it wrote.
    fn stop(mut self) -> Output {
        let mut child = self.0.take().unwrap();
        let _ = child.kill();
        child.wait_with_output().unwrap()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

async fn fifo_queue(sqs: &aws_sdk_sqs::Client) -> String {
    let name = format!(
        "bootstrap-{}-{}.fifo",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let (url, _dlq) = queue_sqs::create_fifo_queue_with_dlq(sqs, &name, &Default::default())
        .await
        .unwrap();
    url
}

async fn sqs_client() -> aws_sdk_sqs::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&config)
}

#[tokio::test]
async fn the_bootstrap_serves_deliveries_through_the_runtime_api_onto_the_queue() {
    let sqs = sqs_client().await;
    let queue_url = fifo_queue(&sqs).await;
    let message = r#"{"type": "message", "id": "m-boot-1", "user": "u-9", "conversation": "c-boot", "text": "from the bootstrap"}"#;
    let (api, mut posted) = runtime_api(vec![
        ("req-1".into(), delivery(message, SECRET)),
        ("req-2".into(), delivery(message, "not-the-secret")),
        ("req-3".into(), json!({"version": "2.0", "rawPath": 17})),
    ])
    .await;
    let running = Running(Some(
        bootstrap(&api, &queue_url, Some(SECRET)).spawn().unwrap(),
    ));

    let mut replies = Vec::new();
    for _ in 0..3 {
        let got = tokio::time::timeout(Duration::from_secs(60), posted.recv())
            .await
            .expect("the bootstrap answers each invocation within 60 s")
            .unwrap();
        replies.push(got);
    }
    let out = running.stop();
    let logs = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let (kind, id, reply) = &replies[0];
    assert_eq!((kind.as_str(), id.as_str()), ("response", "req-1"));
    assert_eq!(reply["statusCode"], 200, "{reply}");
    assert_eq!(
        serde_json::from_str::<Value>(reply["body"].as_str().unwrap()).unwrap(),
        json!({"status": "queued", "count": 1})
    );
    let (kind, id, reply) = &replies[1];
    assert_eq!((kind.as_str(), id.as_str()), ("response", "req-2"));
    assert_eq!(reply["statusCode"], 401, "{reply}");
    // An event that is not an API Gateway request is the invocation's error, not a crash: the
    // bootstrap stays up for the next one.
    let (kind, id, _) = &replies[2];
    assert_eq!((kind.as_str(), id.as_str()), ("error", "req-3"));

    let got = sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let messages = got.messages();
    assert_eq!(messages.len(), 1, "exactly the signed delivery is queued");
    let job = queue_sqs::decode_job(messages[0].body().unwrap()).unwrap();
    assert_eq!(
        (
            job.channel.as_str(),
            job.message_id.as_str(),
            job.text.as_str()
        ),
        ("generic", "m-boot-1", "from the bootstrap")
    );
    let group = messages[0]
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId));
    assert_eq!(group, Some(&queue_sqs::sqs_id(&job.group())));

    assert!(logs.contains("webhook ready"), "{logs}");
    assert!(!logs.contains(SECRET), "a secret reached the log: {logs}");
}

#[tokio::test]
async fn a_bootstrap_without_a_channel_stops_at_init_and_says_why() {
    let (api, _posted) = runtime_api(vec![]).await;
    let mut cmd = bootstrap(&api, "http://127.0.0.1:9/123456789012/q.fifo", None);
    let run = tokio::task::spawn_blocking(move || cmd.output());
    let out = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the bootstrap exits at once")
        .unwrap()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no channel is configured"), "{stderr}");
}
