//! What the server puts up with from a client, and how it says no. The connection loop (hyper
//! with a timer) closes a connection whose request headers do not arrive within
//! [`HttpLimits::header_read`] — the same timer closes a keep-alive connection left idle that
//! long — and serves at most [`HttpLimits::max_connections`] at once (the rest wait in the
//! listen backlog). A request must arrive whole and be answered (its response begun) within
//! [`HttpLimits::request`]: a slow or short body gets 408. An MCP call ([`MCP_PATH`]) must
//! arrive whole within it, and is then answered when it is done. A connection that takes nothing of
//! an answer for [`HttpLimits::write_stall`] is closed. Every error the router answers has a
//! JSON body with a sentence, whoever made it (a rejection, axum's 405 with its `Allow`, an
//! over-long URI or header block).

use super::errors::ApiError;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

/// The longest request target (path and query) accepted; longer gets 414.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// The largest header block accepted; larger gets 431.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

/// The server's limits (`BRIDLE_HTTP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// Request headers must arrive within this, and an idle keep-alive connection is closed
    /// after it.
    pub header_read: Duration,
    /// A request must arrive whole and its response begin within this.
    pub request: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// Connections one client address (an IPv6 address by its /64) may hold at once: one client
    /// trickling requests cannot take every place of [`HttpLimits::max_connections`]. Loopback
    /// and the trusted proxies are not counted (everyone comes through them).
    pub max_per_peer: usize,
    /// A connection whose client takes nothing of what the server writes for this long (its
    /// receive window full: a stalled reader, or one that stopped reading on purpose) is
    /// closed, so it does not hold its place among [`HttpLimits::max_connections`] for good.
    /// A turn goes on without it; its answer is in the history.
    pub write_stall: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read: Duration::from_secs(10),
            request: Duration::from_secs(30),
            max_connections: 1024,
            max_per_peer: 64,
            write_stall: Duration::from_secs(30),
        }
    }
}

/// 408 for a request that took too long to arrive or to be answered; 414 and 431 for an
/// over-long target or header block.
pub async fn limit_requests(limits: HttpLimits, request: Request, next: Next) -> Response {
    if request.uri().to_string().len() > MAX_URI_BYTES {
        return ApiError::new(
            StatusCode::URI_TOO_LONG,
            format!("The address is longer than the {MAX_URI_BYTES}-byte limit."),
        )
        .with_limit(MAX_URI_BYTES)
        .into_response();
    }
    let header_bytes: usize = request
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if header_bytes > MAX_HEADER_BYTES {
        return ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("The request headers are larger than the {MAX_HEADER_BYTES}-byte limit."),
        )
        .with_limit(MAX_HEADER_BYTES)
        .into_response();
    }
    if request.uri().path() == MCP_PATH {
        return untimed_once_arrived(limits, request, next).await;
    }
    match tokio::time::timeout(limits.request, next.run(request)).await {
        Ok(response) => response,
        Err(_) => did_not_arrive(limits),
    }
}

/// Where MCP clients call. A call runs to deadlines of its own (its wait for the token's turn,
/// a plan, the run: under a minute together), and is not cut short when its answer is late
/// (rmcp runs the handler apart from the connection): a 408 there, which tells a client to
/// send it again, would have a call that is still running done twice. Only its arrival is
/// timed.
pub const MCP_PATH: &str = "/mcp";
/// The most of an MCP request body read here: the MCP handler's own cap
/// ([`mcp::handler::MAX_REQUEST_BYTES`]).
const MCP_BODY_READ: usize = mcp::handler::MAX_REQUEST_BYTES;

/// `request`'s body read whole within [`HttpLimits::request`] (408 when it was not), then the
/// handler's answer, however long it takes. A request with no bearer token is handed on
/// unread (the handler answers 401 without reading it). One with any bearer token, a made-up
/// one too, is read before the token is checked: at most [`MCP_BODY_READ`] for at most
/// [`HttpLimits::request`], on one of the client's share of connections
/// ([`HttpLimits::max_per_peer`]).
async fn untimed_once_arrived(limits: HttpLimits, request: Request, next: Next) -> Response {
    let bearer = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.get(..7)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer "))
        });
    if !bearer {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    match tokio::time::timeout(limits.request, axum::body::to_bytes(body, MCP_BODY_READ)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(_)) if declared.is_some_and(|n| n > MCP_BODY_READ) => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("The request is larger than the {MCP_BODY_READ}-byte limit."),
        )
        .with_limit(MCP_BODY_READ)
        .into_response(),
        Ok(Err(_)) => ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "The request body could not be read whole (cut off, or larger than the \
                 {MCP_BODY_READ}-byte limit)."
            ),
        )
        .into_response(),
        Err(_) => did_not_arrive(limits),
    }
}

/// 408, and the connection closed.
fn did_not_arrive(limits: HttpLimits) -> Response {
    let mut response = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        format!(
            "The request did not arrive whole within {} seconds; send it again.",
            limits.request.as_secs()
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Give every error response without a body of its own kind a JSON one: `{"error": "…"}` with
/// the text it had (or the status's reason), keeping its headers (`Allow` on a 405). Pages
/// (HTML) and JSON are left as they are.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if kind.starts_with("application/json") || kind.starts_with("text/html") {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, 16 * 1024).await {
        Ok(bytes) if !bytes.is_empty() => String::from_utf8_lossy(&bytes).trim().to_owned(),
        _ => String::new(),
    };
    let sentence = match (status, text.is_empty()) {
        (StatusCode::METHOD_NOT_ALLOWED, _) => {
            "This address does not take that method; its Allow header lists the ones it does."
                .to_owned()
        }
        (_, false) => text,
        (_, true) => status
            .canonical_reason()
            .unwrap_or("The request failed")
            .to_owned(),
    };
    let body = serde_json::json!({ "error": sentence }).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}
