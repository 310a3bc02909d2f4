use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One piece of a message. Adapters map these to and from each provider's blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Part {
    Text {
        text: String,
    },
    Reasoning(Reasoning),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        content: Value,
        is_error: bool,
    },
    Image(MediaRef),
    Document(MediaRef),
}

impl Part {
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    /// The text of a `Text` part, if it is one.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Part::Text { text } => Some(text),
            _ => None,
        }
    }

    /// UTF-8 bytes this part's own content adds to the context, reasoning excluded, and an
    /// attachment's reference only (what its blob weighs is the backend's to say): with the
    /// attachments' weight, what compaction's threshold is measured in. Bytes, not characters,
    /// because tokens track bytes (a script of two to four bytes a character runs at about a
    /// token per one to three characters), and a per-minute token cap must not be reached before
    /// the segment is compacted.
    pub fn content_bytes(&self) -> usize {
        match self {
            Part::Text { text } => text.len(),
            Part::Reasoning(_) => 0,
            Part::ToolUse { name, input, .. } => name.len() + crate::json_bytes(input),
            Part::ToolResult { content, .. } => crate::json_bytes(content),
            Part::Image(m) | Part::Document(m) => m.key.len(),
        }
    }

    /// Characters this part adds to the context, reasoning excluded.
    pub fn content_chars(&self) -> usize {
        match self {
            Part::Text { text } => text.chars().count(),
            Part::Reasoning(_) => 0,
            Part::ToolUse { name, input, .. } => name.chars().count() + crate::json_chars(input),
            Part::ToolResult { content, .. } => crate::json_chars(content),
            Part::Image(m) | Part::Document(m) => m.key.len(),
        }
    }
}

/// Model reasoning, replayed to the provider exactly as received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum Reasoning {
    /// Readable reasoning with the provider's signature (needed to replay it).
    Text {
        text: String,
        signature: Option<String>,
    },
    /// Reasoning the provider encrypted; opaque bytes that must be replayed unchanged.
    Redacted { data: Vec<u8> },
}

/// A stored media object, by reference. The bytes live in a blob store, never in the transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaRef {
    /// The blob store key.
    pub key: String,
    pub mime_type: String,
    pub size_bytes: u64,
}
