//! The I/O: POST the converted request, map HTTP failures before any event, then hand the body
//! to the shared SSE path. Deadlines and idle timeouts are the engine's job; the caller builds
//! the `reqwest::Client` (with a connect timeout).

use crate::convert::into_openai;
use crate::error::{excerpt, from_error_object, from_http, parse_retry_after};
use crate::sse::sse_events;
use async_trait::async_trait;
use backend::{BackendError, ChatModel, ChatRequest, EventStream};
use futures::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use std::fmt;
use std::sync::Arc;

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
        let response = call.send().await.map_err(send_error)?;

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
            let text = response.text().await.map_err(send_error)?;
            return Err(json_instead_of_stream(&text, self.config.key()));
        }
        Ok(sse_events(response.bytes_stream()).boxed())
    }
}

fn send_error(err: reqwest::Error) -> BackendError {
    let message = if err.is_connect() {
        "could not connect to the model server"
    } else if err.is_timeout() {
        "the request to the model server timed out"
    } else {
        "the request to the model server failed"
    };
    BackendError::Transport {
        message: message.into(),
        source: Some(Arc::new(err)),
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
