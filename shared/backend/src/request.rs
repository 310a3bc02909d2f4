use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use transcript::{Part, Role};

/// Everything a model call needs, in neutral form.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Model id or inference-profile ARN.
    pub model: String,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// Shared: the same catalogue goes out on every call of a turn.
    #[serde(with = "shared_slice")]
    pub tools: Arc<[ToolSpec]>,
    pub settings: InferenceSettings,
}

/// A message as sent: consecutive transcript rows of the same role, their parts unaltered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    /// Shared with the turn's history, so each call of a turn sends the history without
    /// copying it.
    #[serde(with = "shared_slice")]
    pub parts: Arc<[Part]>,
}

impl ChatMessage {
    pub fn new(role: Role, parts: Vec<Part>) -> Self {
        Self {
            role,
            parts: parts.into(),
        }
    }
}

/// Serde for `Arc<[T]>` as a plain sequence (without serde's `rc` feature).
mod shared_slice {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::sync::Arc;

    pub fn serialize<T: Serialize, S: Serializer>(v: &Arc<[T]>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref().serialize(s)
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Arc<[T]>, D::Error> {
        Vec::<T>::deserialize(d).map(Arc::from)
    }
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InferenceSettings {
    pub max_tokens: u32,
    pub temperature: Option<f32>,
    pub stop_sequences: Vec<String>,
    /// Token budget for extended reasoning, when the model supports it.
    pub reasoning_budget: Option<u32>,
    /// Ask the provider to cache the stable prefix (system, tools, history) where the model
    /// supports it. Adapters without prompt caching ignore it.
    #[serde(default = "yes")]
    pub prompt_cache: bool,
    /// Whether the model may, must or must not call a tool on this call. Adapters send nothing
    /// for [`ToolChoice::Auto`] (every provider's default) and nothing at all without tools.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// How hard a reasoning model should think, for providers that take an effort level
    /// (OpenAI-compatible `reasoning_effort`); Bedrock takes [`Self::reasoning_budget`] instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
}

/// Whether a call may use the tools offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the default everywhere).
    #[default]
    Auto,
    /// The model must call at least one tool (OpenAI `required`, Bedrock `any`).
    Required,
    /// The model must not call a tool (OpenAI `none`; Bedrock has no such choice).
    None,
}

impl ToolChoice {
    /// The setting's spelling: `auto`, `required`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoice::Auto => "auto",
            ToolChoice::Required => "required",
            ToolChoice::None => "none",
        }
    }
}

/// A reasoning model's effort level, as OpenAI-compatible servers name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    /// The wire and setting spelling: `minimal`, `low`, `medium`, `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

fn yes() -> bool {
    true
}

impl Default for InferenceSettings {
    fn default() -> Self {
        Self {
            max_tokens: 16_000,
            temperature: None,
            stop_sequences: Vec::new(),
            reasoning_budget: None,
            prompt_cache: true,
            tool_choice: ToolChoice::Auto,
            reasoning_effort: None,
        }
    }
}
