use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Why the model stopped, normalised across providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "raw", rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    /// The model declined to answer.
    Refusal,
    /// The provider's content filter cut the answer.
    ContentFiltered,
    /// A configured guardrail intervened.
    Guardrail,
    ContextWindowExceeded,
    /// The model produced a tool call the provider could not parse.
    MalformedToolUse,
    /// A value we do not know yet; the raw string is kept.
    Other(String),
}

impl StopReason {
    /// The reason named by [`StopReason::as_str`]; any other name is kept as `Other`.
    pub fn from_name(name: &str) -> Self {
        match name {
            "end_turn" => StopReason::EndTurn,
            "tool_use" => StopReason::ToolUse,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "refusal" => StopReason::Refusal,
            "content_filtered" => StopReason::ContentFiltered,
            "guardrail" => StopReason::Guardrail,
            "context_window_exceeded" => StopReason::ContextWindowExceeded,
            "malformed_tool_use" => StopReason::MalformedToolUse,
            other => StopReason::Other(other.to_owned()),
        }
    }

    /// The stable snake_case name, or the raw value for [`StopReason::Other`].
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal => "refusal",
            StopReason::ContentFiltered => "content_filtered",
            StopReason::Guardrail => "guardrail",
            StopReason::ContextWindowExceeded => "context_window_exceeded",
            StopReason::MalformedToolUse => "malformed_tool_use",
            StopReason::Other(raw) => raw,
        }
    }
}

/// Token usage of one model call, cache tokens included.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_read_tokens += o.cache_read_tokens;
        self.cache_write_tokens += o.cache_write_tokens;
    }
}
