//! The I/O: POST the converted request, map HTTP failures before any event, then hand the body
//! to the shared SSE path (or, from a server that ignored `stream: true`, take its one JSON
//! completion as a one-shot stream). A connection that cannot be made is `Unreachable`, naming
//! the endpoint without credentials. Deadlines and idle timeouts are the engine's job; the caller builds
//! the `reqwest::Client` (with a connect timeout).

use crate::completion::events_from_completion;
use crate::convert::into_openai;
use crate::error::{excerpt, from_error_object, from_http, parse_retry_after};
use crate::sse::sse_events;
use async_trait::async_trait;
use backend::{BackendError, ChatModel, ChatRequest, EventStream};
use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where and as whom to call. Built by the caller (typically from `OPENAI_BASE_URL`,
/// `OPENAI_API_KEY`, `OPENAI_MODEL`); this crate reads no environment. `Debug` hides the key.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// The API root, e.g. `https://api.openai.com/v1` or `http://127.0.0.1:11434/v1` (a
    /// trailing slash is fine); requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer ...` when set and non-empty; local servers need none.
    pub api_key: Option<String>,
    /// The model used when a request names none.
    pub model: String,
}

impl OpenAiConfig {
    /// The endpoint requests are POSTed to.
    pub fn chat_completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    fn key(&self) -> Option<&str> {
        self.api_key.as_deref().filter(|k| !k.is_empty())
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.key().map(|_| "[redacted]"))
            .field("model", &self.model)
            .finish()
    }
}

/// A [`ChatModel`] served by an OpenAI-compatible Chat Completions endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    config: OpenAiConfig,
    client: reqwest::Client,
    url: String,
}

impl OpenAiModel {
    pub fn new(config: OpenAiConfig, client: reqwest::Client) -> Self {
        let url = config.chat_completions_url();
        Self {
            config,
            client,
            url,
        }
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    fn name(&self) -> &str {
        "openai"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError> {
        let body = into_openai(&request, &self.config.model);
        tracing::debug!(
            url = %self.url,
            model = %body["model"],
            messages = body["messages"].as_array().map_or(0, Vec::len),
            tools = request.tools.len(),
            "opening chat completions stream"
        );
        let mut call = self
            .client
            .post(&self.url)
            .header(ACCEPT, "text/event-stream")
            .json(&body);
        if let Some(key) = self.config.key() {
            call = call.bearer_auth(key);
        }
        let response = call.send().await.map_err(|e| send_error(e, &self.url))?;

        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let text = response.text().await.unwrap_or_default();
            let err = from_http(status.as_u16(), retry_after, &text, self.config.key());
            tracing::warn!(
                status = status.as_u16(),
                kind = err.kind(),
                body = %excerpt(&text, self.config.key()),
                "chat completions request failed"
            );
            return Err(err);
        }
        if is_json(response.headers()) {
            // Not a stream: an error object some servers send with 200, or `stream` ignored.
            let text = response
                .text()
                .await
                .map_err(|e| send_error(e, &self.url))?;
            let value = serde_json::from_str::<serde_json::Value>(&text).ok();
            if let Some(events) = value.as_ref().and_then(events_from_completion) {
                if !JSON_FALLBACK_LOGGED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        url = %self.url,
                        "the model server answered one JSON completion instead of a stream \
                         (it ignores stream: true); taking it whole, so replies appear at once"
                    );
                }
                return Ok(futures::stream::iter(events).boxed());
            }
            return Err(json_instead_of_stream(&text, self.config.key()));
        }
        Ok(sse_events(response.bytes_stream()).boxed())
    }
}

/// The JSON fallback is said once per process, not on every call.
static JSON_FALLBACK_LOGGED: AtomicBool = AtomicBool::new(false);

fn send_error(err: reqwest::Error, url: &str) -> BackendError {
    // The URL may carry a key (user info, query): the message names the endpoint instead.
    let err = err.without_url();
    if err.is_connect() {
        return BackendError::Unreachable {
            endpoint: endpoint_for_logs(url),
            source: Some(Arc::new(err)),
        };
    }
    let message = if err.is_timeout() {
        "the request to the model server timed out"
    } else {
        "the request to the model server failed"
    };
    BackendError::Transport {
        message: message.into(),
        source: Some(Arc::new(err)),
    }
}

/// Where the call went, for the operator's log: scheme, host, port and path; no user, password
/// or query (a key may ride in either).
fn endpoint_for_logs(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "(an address that does not parse)".to_owned(),
    }
}

fn retry_after(headers: &HeaderMap) -> Option<std::time::Duration> {
    let value = |name| headers.get(name).and_then(|v| v.to_str().ok());
    parse_retry_after(value(RETRY_AFTER.as_str()), value("retry-after-ms"))
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}

fn json_instead_of_stream(text: &str, api_key: Option<&str>) -> BackendError {
    let value = serde_json::from_str::<serde_json::Value>(text).ok();
    match value.as_ref().and_then(|v| v.get("error")) {
        Some(error) => from_error_object(error),
        None => BackendError::transport(format!(
            "expected an event stream, got JSON (does the server support stream: true?): {}",
            excerpt(text, api_key)
        )),
    }
}
