//! One line of an export: a conversation with everything recorded about it. `bridle export`
//! writes these, `bridle eval` reads them.

use serde::{Deserialize, Serialize};
use store::VisibleEntry;
use transcript::{Conversation, Message};

/// The format this build writes and reads.
pub const FORMAT: &str = "bridle-export/1";

/// One conversation: the conversation row, the model transcript segment by segment (each
/// assistant message with its call record, each tool message with the results the model was
/// given), and the visible transcript (what the user saw).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExportedConversation {
    /// [`FORMAT`].
    pub format: String,
    pub conversation: Conversation,
    pub segments: Vec<Segment>,
    pub visible: Vec<VisibleEntry>,
    /// Whether personal data was replaced by placeholders.
    #[serde(default)]
    pub redacted: bool,
}

/// The rows of one segment, by position (compaction opens a new segment).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub segment: u32,
    pub messages: Vec<Message>,
}
