use crate::BackendError;
use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use transcript::{StopReason, Usage};

/// The stream a model call yields.
pub type EventStream = BoxStream<'static, Result<ModelEvent, BackendError>>;

/// One neutral event of a streamed model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ModelEvent {
    /// A piece of answer text.
    Text { text: String },
    /// A piece of reasoning.
    Reasoning { delta: ReasoningDelta },
    /// A complete tool call (adapters assemble partial input before emitting it).
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// Bytes arrived that carry no content (an SSE `: ping` comment, a frame with nothing to
    /// say): the server is alive. The engine only restarts its idle timer.
    KeepAlive,
    /// The response is complete.
    Done {
        stop_reason: StopReason,
        usage: Usage,
    },
}

impl ModelEvent {
    pub fn text(text: impl Into<String>) -> Self {
        ModelEvent::Text { text: text.into() }
    }
}

/// Reasoning arrives as text pieces, then a signature; or as one redacted blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ReasoningDelta {
    Text(String),
    Signature(String),
    Redacted(Vec<u8>),
}
