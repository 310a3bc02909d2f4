//! The local Lambda Runtime API.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// How long a bootstrap gets for each invocation (the `lambda-runtime-deadline-ms` it is told).
pub const INVOCATION_TIMEOUT: Duration = Duration::from_secs(30);

/// What a bootstrap posted for an invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostedKind {
    /// `POST .../invocation/{id}/response`: the handler's result.
    Response,
    /// `POST .../invocation/{id}/error`: the invocation failed.
    Error,
    /// `POST /2018-06-01/runtime/init/error`: the bootstrap could not start (no request id).
    InitError,
}

/// One response or error, as posted.
#[derive(Debug, Clone)]
pub struct Posted {
    pub kind: PostedKind,
    /// The invocation's id; empty for an init error.
    pub request_id: String,
    /// The `Lambda-Runtime-Function-Error-Type` header, when one was sent.
    pub error_type: Option<String>,
    /// The posted JSON (`Value::Null` if it was not JSON).
    pub body: Value,
}

/// The state the Runtime API and its Function URL front share.
#[derive(Clone)]
pub(crate) struct Shared {
    /// Events for `next`, in order; the sender is kept here, so `next` waits for more.
    pub(crate) events: mpsc::UnboundedSender<(String, Value)>,
    queued: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<(String, Value)>>>,
    pub(crate) posted: mpsc::UnboundedSender<Posted>,
    /// Function URL requests waiting for their invocation's response, by request id.
    pub(crate) waiting: Arc<Mutex<HashMap<String, oneshot::Sender<axum::response::Response>>>>,
}

/// A Runtime API on a loopback port, serving until dropped with the test's runtime.
#[derive(Debug)]
pub struct RuntimeApi {
    address: String,
    posted: mpsc::UnboundedReceiver<Posted>,
    shared: Shared,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl RuntimeApi {
    /// Serve `events` (request id, event JSON), in order.
    pub async fn start(events: impl IntoIterator<Item = (String, Value)>) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        for event in events {
            let _ = events_tx.send(event);
        }
        let shared = Shared {
            events: events_tx,
            queued: Arc::new(tokio::sync::Mutex::new(events_rx)),
            posted: tx,
            waiting: Arc::default(),
        };
        let app = Router::new()
            .route("/2018-06-01/runtime/invocation/next", get(next))
            .route(
                "/2018-06-01/runtime/invocation/{id}/response",
                post(crate::function_url::response),
            )
            .route(
                "/2018-06-01/runtime/invocation/{id}/error",
                post(crate::function_url::error),
            )
            .route(
                "/2018-06-01/runtime/init/error",
                post(|s: State<Shared>, h: HeaderMap, body: Bytes| {
                    record(s, String::new(), h, body, PostedKind::InitError)
                }),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?.to_string();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            address,
            posted: rx,
            shared,
        })
    }

    /// Put a Lambda Function URL in front of this Runtime API: an HTTP server on a loopback port
    /// that turns each request into a Function URL event for `next` and answers it with that
    /// invocation's response, relayed as it arrives when the bootstrap streams it (see
    /// [`crate::function_url`]). Returns its base URL (`http://127.0.0.1:port`).
    pub async fn function_url(&self) -> std::io::Result<String> {
        crate::function_url::serve(self.shared.clone()).await
    }

    /// Queue one more event (request id, event JSON) after those given at the start.
    pub fn push(&self, request_id: &str, event: Value) {
        let _ = self.shared.events.send((request_id.to_owned(), event));
    }

    /// Where it listens (`host:port`, the value of `AWS_LAMBDA_RUNTIME_API`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The next response or error the bootstrap posts; panics if none comes `within`.
    pub async fn next_posted(&mut self, within: Duration) -> Posted {
        match tokio::time::timeout(within, self.posted.recv()).await {
            Ok(Some(posted)) => posted,
            Ok(None) => panic!("the Runtime API server stopped"),
            Err(_) => panic!("the bootstrap posted nothing within {within:?}"),
        }
    }

    /// The variables Lambda gives every function, pointing at this Runtime API: the function's
    /// own, its region and its role's (dummy) credentials. Instance metadata is off, so nothing
    /// reaches for a network the tests do not have.
    pub fn lambda_env(&self, function_name: &str) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_DEFAULT_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "test".into()),
            ("AWS_SECRET_ACCESS_KEY", "test".into()),
            ("AWS_SESSION_TOKEN", "test-session".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
            ("AWS_LAMBDA_RUNTIME_API", self.address.clone()),
            ("AWS_LAMBDA_FUNCTION_NAME", function_name.to_owned()),
            ("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256".into()),
            ("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST".into()),
            ("AWS_LAMBDA_LOG_STREAM_NAME", "stream".into()),
            (
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{function_name}"),
            ),
            ("AWS_LAMBDA_INITIALIZATION_TYPE", "on-demand".into()),
        ]
    }
}

/// `GET .../invocation/next`: the next event with Lambda's headers, waiting (as Lambda does)
/// until there is one.
async fn next(State(shared): State<Shared>) -> (HeaderMap, String) {
    let Some((id, event)) = shared.queued.lock().await.recv().await else {
        return std::future::pending().await;
    };
    let deadline_ms = (SystemTime::now() + INVOCATION_TIMEOUT)
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let mut headers = HeaderMap::new();
    let mut set = |name: &'static str, value: String| {
        headers.insert(name, value.parse().expect("a valid header value"));
    };
    set("lambda-runtime-aws-request-id", id);
    set("lambda-runtime-deadline-ms", deadline_ms.to_string());
    set(
        "lambda-runtime-invoked-function-arn",
        "arn:aws:lambda:us-east-1:123456789012:function:bootstrap-test".into(),
    );
    set(
        "lambda-runtime-trace-id",
        "Root=1-00000000-000000000000000000000000;Sampled=0".into(),
    );
    (headers, event.to_string())
}

pub(crate) async fn record(
    State(shared): State<Shared>,
    request_id: String,
    headers: HeaderMap,
    body: Bytes,
    kind: PostedKind,
) -> StatusCode {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let error_type = headers
        .get("lambda-runtime-function-error-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let _ = shared.posted.send(Posted {
        kind,
        request_id,
        error_type,
        body,
    });
    StatusCode::ACCEPTED
}
