//! The `ChatModel` port: a neutral [`ChatRequest`] in, a stream of neutral [`ModelEvent`]s out.
//!
//! Adapters (Bedrock ConverseStream, OpenAI-compatible Chat Completions) live in their own crates
//! and convert to and from these types. [`ScriptedModel`] is the seam every loop behaviour is
//! tested through: it plays scripted replies and records every request it receives.
//!
//! Depends on `transcript` only (plus async plumbing). Never on AWS, Lambda, stores or the engine.

pub mod documents;
mod error;
mod event;
mod media;
mod request;
mod script_file;
mod scripted;

pub use error::{BackendError, OptionalFeature};
pub use event::{EventStream, ModelEvent, ReasoningDelta};
pub use media::MediaSource;
pub use request::{
    ChatMessage, ChatRequest, InferenceSettings, ReasoningEffort, ToolChoice, ToolSpec,
};
pub use script_file::ScriptError;
pub use scripted::{Reply, ScriptedModel, Step};
pub use transcript::{StopReason, Usage};

use async_trait::async_trait;

/// A model provider. `stream` fails early (`Err`) when the call could not start; errors that
/// happen after the stream opened arrive as `Err` items inside the stream.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The adapter's short name, recorded on every call (`bedrock`, `openai`, `scripted`).
    fn name(&self) -> &str;

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError>;
}
