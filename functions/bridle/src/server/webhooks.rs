//! `/webhooks/{channel}`: the platforms' webhooks, through the very same handler as the webhook
//! Lambda ([`webhook::Webhook::handle`]: size cap, signature on the raw bytes, parse, enqueue,
//! 200), enqueueing into the embedded queue. A channel that is not configured answers 404.

use super::App;
use crate::channel_setup::ChannelSetup;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use channel_jobs::ChannelJobs;
use std::sync::Arc;
use webhook::{Incoming, Webhook};

/// The channel side of the server.
#[derive(Clone)]
pub struct Channels {
    pub webhook: Arc<Webhook>,
    /// Claim → identity → turn → deliver → record, the same code as the worker Lambda.
    pub jobs: Arc<ChannelJobs>,
    pub setup: Arc<ChannelSetup>,
}

impl std::fmt::Debug for Channels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channels")
            .field("webhook", &self.webhook)
            .field("setup", &self.setup)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Any method: the handler decides (POST, GET for WhatsApp's handshake, 405 otherwise).
pub async fn receive(
    State(app): State<App>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let headers: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let answer = app
        .channels
        .webhook
        .handle(Incoming {
            method: method.as_str(),
            path: uri.path(),
            query: uri.query(),
            headers: &headers,
            body: &body,
            now_ms: now_ms(),
            // Twilio's URL is `PUBLIC_BASE_URL`'s here (required with it, `ChannelSetup`).
            origin: None,
        })
        .await;
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(header::CONTENT_TYPE, answer.content_type)],
        answer.body,
    )
        .into_response()
}
