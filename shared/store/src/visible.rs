use serde::{Deserialize, Serialize};
use transcript::ConversationId;

/// Who an entry of the visible transcript came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VisibleRole {
    User,
    Assistant,
}

/// A button as the user saw it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Button {
    pub id: String,
    pub title: String,
}

/// One entry of the visible transcript: exactly what the user saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VisibleEntry {
    pub conversation_id: ConversationId,
    pub position: u64,
    pub role: VisibleRole,
    pub text: String,
    pub buttons: Vec<Button>,
    /// A reaction the assistant put on the user's message (e.g. an emoji), if any.
    pub reaction: Option<String>,
    /// The user turn this entry belongs to.
    pub turn: u64,
    pub created_at_ms: i64,
}
