//! A local Lambda Function URL in front of the [`RuntimeApi`](crate::RuntimeApi).
//!
//! Each HTTP request to the front becomes a Function URL event (the API Gateway HTTP API
//! payload 2.0 shape: `rawPath`, `rawQueryString`, `headers` with lower-case names and repeated
//! values joined by commas, `cookies` instead of a `Cookie` header, `body` — base64 with
//! `isBase64Encoded` when it is not UTF-8 text —, `requestContext.http` with the client's
//! address as `sourceIp` (a test client bound to another loopback address, say `127.0.0.2`, is
//! another client), stage `$default`),
//! queued for the bootstrap's `next`. The invocation's response goes back to the HTTP client:
//!
//! - **streamed** (`Lambda-Runtime-Function-Response-Mode: streaming`, what a function with
//!   `InvokeMode: RESPONSE_STREAM` sends): with `Content-Type:
//!   application/vnd.awslambda.http-integration-response`, a JSON prelude `{statusCode, headers,
//!   cookies}`, eight NUL bytes, then the body; each body chunk is relayed **as it arrives**, so
//!   a client sees server-sent events before the response ends. Another content type is the raw
//!   body with status 200, as Lambda does.
//! - **buffered**: the handler's JSON (`{statusCode, headers, multiValueHeaders, cookies, body,
//!   isBase64Encoded}`; JSON without `statusCode` is itself the body, status 200).
//! - an invocation error: 502, as a Function URL answers.
//!
//! Every response and error is also recorded for [`RuntimeApi::next_posted`](crate::RuntimeApi::next_posted),
//! once it is complete (a streamed response's recorded body is `{"prelude": …, "body": text}`).

use crate::runtime_api::{INVOCATION_TIMEOUT, Posted, PostedKind, Shared, record};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// A Function URL takes request bodies up to 6 MB.
pub const MAX_REQUEST_BYTES: usize = 6 * 1024 * 1024;

/// The content type of a streamed HTTP integration response (prelude, NULs, body).
const INTEGRATION: &str = "application/vnd.awslambda.http-integration-response";
const DELIMITER: [u8; 8] = [0; 8];

pub(crate) async fn serve(shared: Shared) -> std::io::Result<String> {
    let app = Router::new().fallback(front).with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let app = app.into_make_service_with_connect_info::<SocketAddr>();
        let _ = axum::serve(listener, app).await;
    });
    Ok(url)
}

/// One HTTP request: an invocation, answered with its response.
async fn front(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    request: Request,
) -> Response {
    static INVOCATIONS: AtomicU64 = AtomicU64::new(0);
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "Request Entity Too Large").into_response();
    };
    let id = format!(
        "url-{}-{}",
        std::process::id(),
        INVOCATIONS.fetch_add(1, Ordering::Relaxed)
    );
    let event = event(
        parts.method.as_str(),
        &parts.uri,
        &parts.headers,
        &body,
        client.ip(),
        &id,
    );
    let (tx, rx) = oneshot::channel();
    shared.waiting.lock().unwrap().insert(id.clone(), tx);
    let _ = shared.events.send((id.clone(), event));
    match tokio::time::timeout(INVOCATION_TIMEOUT, rx).await {
        Ok(Ok(response)) => response,
        _ => {
            shared.waiting.lock().unwrap().remove(&id);
            (StatusCode::GATEWAY_TIMEOUT, "the function did not answer").into_response()
        }
    }
}

/// The Function URL event for a request.
pub fn event(
    method: &str,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    body: &[u8],
    source_ip: IpAddr,
    request_id: &str,
) -> Value {
    let mut names = Map::new();
    let mut cookies = Vec::new();
    for name in headers.keys() {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        if name == axum::http::header::COOKIE {
            cookies.extend(
                values
                    .iter()
                    .flat_map(|v| v.split(';'))
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(str::to_owned),
            );
        } else {
            names.insert(name.as_str().to_owned(), json!(values.join(",")));
        }
    }
    names
        .entry("x-forwarded-proto")
        .or_insert_with(|| json!("http"));
    names
        .entry("x-forwarded-for")
        .or_insert_with(|| json!(source_ip.to_string()));
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let mut event = json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": uri.path(),
        "rawQueryString": uri.query().unwrap_or_default(),
        "headers": names,
        "requestContext": {
            "accountId": "anonymous",
            "apiId": "fakeurl",
            "domainName": host,
            "domainPrefix": host.split('.').next().unwrap_or(host),
            "http": {
                "method": method,
                "path": uri.path(),
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip.to_string(),
                "userAgent": headers
                    .get(axum::http::header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default(),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": now.as_secs().to_string(),
            "timeEpoch": now.as_millis() as u64,
        },
        "isBase64Encoded": false,
    });
    if !cookies.is_empty() {
        event["cookies"] = json!(cookies);
    }
    if !body.is_empty() {
        match std::str::from_utf8(body) {
            Ok(text) => event["body"] = json!(text),
            Err(_) => {
                event["body"] = json!(base64::engine::general_purpose::STANDARD.encode(body));
                event["isBase64Encoded"] = json!(true);
            }
        }
    }
    event
}

/// `POST .../invocation/{id}/response`: to the waiting HTTP client if there is one, as it
/// arrives; recorded once complete.
pub(crate) async fn response(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> StatusCode {
    let waiter = shared.waiting.lock().unwrap().remove(&id);
    let streamed = headers
        .get("lambda-runtime-function-response-mode")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"streaming"));
    if streamed {
        let integration = headers
            .get(axum::http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(INTEGRATION.as_bytes()));
        return relay(shared, id, headers, body, integration, waiter).await;
    }
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_REQUEST;
    };
    if let Some(waiter) = waiter {
        let _ = waiter.send(buffered(&bytes));
    }
    record(State(shared), id, headers, bytes, PostedKind::Response).await
}

/// `POST .../invocation/{id}/error`: a 502 for the waiting client, and recorded.
pub(crate) async fn error(
    State(shared): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    if let Some(waiter) = shared.waiting.lock().unwrap().remove(&id) {
        let _ = waiter.send(
            (
                StatusCode::BAD_GATEWAY,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                r#"{"Message":"Internal Server Error"}"#,
            )
                .into_response(),
        );
    }
    record(State(shared), id, headers, body, PostedKind::Error).await
}

/// A streamed response: the prelude first (the HTTP head), then every chunk to the client as
/// soon as the bootstrap sends it. Lambda answers the bootstrap once the stream has ended.
async fn relay(
    shared: Shared,
    id: String,
    headers: HeaderMap,
    body: Body,
    integration: bool,
    waiter: Option<oneshot::Sender<Response>>,
) -> StatusCode {
    let mut chunks = body.into_data_stream();
    let mut head = Vec::new();
    let (prelude, rest) = if integration {
        loop {
            if let Some(at) = head.windows(8).position(|w| w == DELIMITER) {
                let prelude: Value = serde_json::from_slice(&head[..at]).unwrap_or(Value::Null);
                break (prelude, head[at + 8..].to_vec());
            }
            match chunks.next().await {
                Some(Ok(chunk)) => head.extend_from_slice(&chunk),
                _ => {
                    // The stream ended (or broke) before the prelude did: Lambda answers 502.
                    if let Some(waiter) = waiter {
                        let _ = waiter.send(StatusCode::BAD_GATEWAY.into_response());
                    }
                    return StatusCode::BAD_REQUEST;
                }
            }
        }
    } else {
        (json!({"statusCode": 200}), Vec::new())
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    if let Some(waiter) = waiter {
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|c| (Ok::<_, Infallible>(c), rx))
        });
        let mut response = head_from(&prelude).body(Body::from_stream(stream));
        if !integration {
            response = response.map(|mut r| {
                r.headers_mut().insert(
                    axum::http::header::CONTENT_TYPE,
                    HeaderValue::from_static("application/octet-stream"),
                );
                r
            });
        }
        let _ = waiter.send(response.unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response()));
    }
    let mut text = rest.clone();
    // A client that went away stops the relay, not the bootstrap's stream.
    let mut client = Some(tx);
    if !rest.is_empty() {
        forward(&mut client, Bytes::from(rest)).await;
    }
    while let Some(chunk) = chunks.next().await {
        let Ok(chunk) = chunk else { break };
        text.extend_from_slice(&chunk);
        forward(&mut client, chunk).await;
    }
    drop(client);
    let _ = shared.posted.send(Posted {
        kind: PostedKind::Response,
        request_id: id,
        error_type: headers
            .get("lambda-runtime-function-error-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: json!({"prelude": prelude, "body": String::from_utf8_lossy(&text)}),
    });
    StatusCode::ACCEPTED
}

/// Send `chunk` to the client, or forget a client that is gone.
async fn forward(client: &mut Option<mpsc::Sender<Bytes>>, chunk: Bytes) {
    if let Some(tx) = client
        && tx.send(chunk).await.is_err()
    {
        *client = None;
    }
}

/// The status, headers and cookies of a prelude (or of a buffered response).
fn head_from(prelude: &Value) -> axum::http::response::Builder {
    let status = prelude["statusCode"].as_u64().unwrap_or(200) as u16;
    let mut builder = Response::builder().status(status);
    let mut add = |name: &str, value: &Value| {
        let values: Vec<&str> = match value {
            Value::String(s) => vec![s.as_str()],
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        for v in values {
            if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(v)) {
                builder = std::mem::take(&mut builder).header(n, v);
            }
        }
    };
    for key in ["headers", "multiValueHeaders"] {
        if let Some(headers) = prelude[key].as_object() {
            for (name, value) in headers {
                add(name, value);
            }
        }
    }
    if let Some(cookies) = prelude["cookies"].as_array() {
        for cookie in cookies {
            add("set-cookie", cookie);
        }
    }
    builder
}

/// A buffered response's JSON as the HTTP response a Function URL gives.
fn buffered(bytes: &[u8]) -> Response {
    let parsed: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    if parsed.get("statusCode").is_none() {
        return (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            bytes.to_vec(),
        )
            .into_response();
    }
    let text = parsed["body"].as_str().unwrap_or_default();
    let body = if parsed["isBase64Encoded"].as_bool() == Some(true) {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap_or_default()
    } else {
        text.as_bytes().to_vec()
    };
    head_from(&parsed)
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
