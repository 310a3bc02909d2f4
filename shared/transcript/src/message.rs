use crate::{ConversationId, Part, StopReason, Usage};
use serde::{Deserialize, Serialize};

/// Who wrote a message. Tool results have their own role in the neutral record; adapters fold
/// them into whatever the provider expects (Bedrock: a user message with `toolResult` blocks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One row of the model transcript, written once at `(segment, position)` and never edited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub conversation_id: ConversationId,
    pub segment: u32,
    /// Position within the conversation, across segments; strictly increasing from 0.
    pub position: u64,
    pub role: Role,
    pub parts: Vec<Part>,
    /// Present on assistant messages that a model call produced.
    pub call: Option<CallRecord>,
    /// The request (turn job) that wrote this message. A retried job finds its own rows by it
    /// and resumes instead of writing them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_id: Option<String>,
    pub created_at_ms: i64,
}

impl Message {
    /// Concatenated text of the message's text parts.
    pub fn text(&self) -> String {
        self.parts.iter().filter_map(Part::as_text).collect()
    }
}

/// What one model call was and cost: kept on the assistant message it produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The adapter that served the call (`bedrock`, `openai`, `scripted`).
    pub backend: String,
    /// The model id or inference-profile ARN.
    pub model: String,
    /// Why the model stopped; `None` when the call failed.
    pub stop_reason: Option<StopReason>,
    /// The failure kind when the call failed (never the provider's raw text).
    pub error: Option<String>,
    pub usage: Usage,
    pub latency_ms: u64,
    /// Names of the tools offered on this call, in the order offered.
    pub tools_offered: Vec<String>,
}
