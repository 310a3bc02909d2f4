//! The HTTP side: an axum server on `127.0.0.1:0` answering
//! `POST /model/{modelId}/converse-stream` with the next scenario, and recording every request.

use crate::delivery::{body, plan};
use crate::scenario::{Answer, Scenario};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// One request the fake received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The model id from the path, percent-decoded.
    pub model_id: String,
    /// The raw request path.
    pub path: String,
    /// Header names in lower case; values as text.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (a string holding the raw text if it was not JSON).
    pub body: Value,
    /// The body exactly as received, for byte-level comparisons.
    pub raw_body: Bytes,
}

#[derive(Debug, Default)]
struct Shared {
    scenarios: Mutex<VecDeque<Scenario>>,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// A running fake Bedrock runtime. The server stops when this is dropped.
#[derive(Debug)]
pub struct FakeBedrock {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl FakeBedrock {
    /// Start serving on a free local port; each request gets the next scenario, in order. Must
    /// be called inside a Tokio runtime.
    pub async fn start(scenarios: impl IntoIterator<Item = Scenario>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        shared.scenarios.lock().unwrap().extend(scenarios);
        let app = Router::new()
            .route("/model/{model_id}/converse-stream", post(converse_stream))
            // Requests with attachments' bytes run to tens of megabytes (Bedrock takes them);
            // axum's own 2 MB default would refuse them.
            .layer(axum::extract::DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { addr, shared, task })
    }

    /// The endpoint URL to give the SDK (`endpoint_url`, `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queue one more scenario.
    pub fn push(&self, scenario: Scenario) {
        self.shared.scenarios.lock().unwrap().push_back(scenario);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }
}

impl Drop for FakeBedrock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn converse_stream(
    State(shared): State<Arc<Shared>>,
    Path(model_id): Path<String>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    request_body: Bytes,
) -> Response {
    let json: Value = serde_json::from_slice(&request_body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request_body).into_owned()));
    // As Bedrock does: a model that reads no S3 location (Anthropic's, and every family but
    // Amazon Nova's) refuses a request with one, before any scenario is played.
    let s3_refused = !reads_s3_links(&model_id) && has_s3_location(&json);
    shared.requests.lock().unwrap().push(RecordedRequest {
        model_id,
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                (name.as_str().to_owned(), value)
            })
            .collect(),
        body: json,
        raw_body: request_body,
    });
    if s3_refused {
        return error_response(400, "ValidationException", S3_LINKS_REFUSED_MESSAGE);
    }
    let next = shared.scenarios.lock().unwrap().pop_front();
    let Some(scenario) = next else {
        return error_response(
            500,
            "InternalServerException",
            "fake-bedrock has no scenario left for this request",
        );
    };
    match scenario.answer {
        Answer::Stream(stream) => Response::builder()
            .header(header::CONTENT_TYPE, "application/vnd.amazon.eventstream")
            .header("x-amzn-requestid", "fake-request-id")
            .body(Body::from_stream(body(plan(&stream))))
            .unwrap(),
        Answer::Http {
            status,
            error_type,
            message,
        } => error_response(status, &error_type, &message),
    }
}

/// The refusal of an S3 location by a model that reads none.
pub const S3_LINKS_REFUSED_MESSAGE: &str =
    "This model doesn't support S3 locations for images or documents. Send the bytes instead.";

/// Whether `model_id` (decoded from the path) is one that reads S3 locations: Amazon Nova's
/// Premier, Pro and Lite.
fn reads_s3_links(model_id: &str) -> bool {
    let model = model_id.to_ascii_lowercase();
    model.contains("amazon.nova-") && !model.contains("nova-micro")
}

/// Whether any image or document of the request's messages has an `s3Location` source.
fn has_s3_location(body: &Value) -> bool {
    let blocks = body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().into_iter().flatten());
    blocks
        .flat_map(|b| [&b["image"], &b["document"]])
        .any(|media| !media["source"]["s3Location"].is_null())
}

/// An error as Bedrock sends it: the type in `x-amzn-errortype` (with its namespace suffix)
/// and `{"message": ...}` as the body.
fn error_response(status: u16, error_type: &str, message: &str) -> Response {
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(header::CONTENT_TYPE, "application/json")
        .header(
            "x-amzn-errortype",
            format!("{error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        )
        .header("x-amzn-requestid", "fake-request-id")
        .body(Body::from(json!({ "message": message }).to_string()))
        .unwrap()
}
