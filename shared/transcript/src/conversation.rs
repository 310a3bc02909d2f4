use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifies one conversation (one thread on one channel).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ConversationId(pub String);

/// Identifies an authenticated Bridle user. Built from authentication, never from model output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct UserId(pub String);

macro_rules! id_impls {
    ($t:ty) => {
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl From<&str> for $t {
            fn from(s: &str) -> Self {
                Self(s.to_owned())
            }
        }
        impl From<String> for $t {
            fn from(s: String) -> Self {
                Self(s)
            }
        }
    };
}
id_impls!(ConversationId);
id_impls!(UserId);

/// Whether the assistant answers in this conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ConversationStatus {
    #[default]
    Active,
    /// A human operator took over; the assistant stays quiet.
    Paused,
    Closed,
}

/// One conversation: who, where, for what, and where its transcript currently stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: ConversationId,
    pub user_id: UserId,
    /// The channel it lives on: `web`, `whatsapp`, `telegram`, `slack`, `sms`, ...
    pub channel: String,
    /// Which tool catalogue and prompt apply (a tool's `purposes` are matched against this).
    pub purpose: String,
    pub status: ConversationStatus,
    /// The system prompt version the conversation was last served with.
    pub prompt_version: String,
    /// The current transcript segment. Compaction opens a new one; old rows stay.
    pub segment: u32,
    /// How many user turns the conversation has had.
    pub turn: u64,
    pub created_at_ms: i64,
    /// A compaction of the current segment failed in a way trying again would not mend (no
    /// notes, a refusal): the next is tried once the segment holds this many characters of
    /// content. 0: at the threshold. A compaction that succeeds sets it back to 0.
    #[serde(default)]
    pub compaction_retry_at_chars: u64,
}

impl Conversation {
    /// A fresh, active conversation at segment 0, turn 0.
    pub fn new(
        id: impl Into<ConversationId>,
        user_id: impl Into<UserId>,
        channel: &str,
        purpose: &str,
    ) -> Self {
        Self {
            id: id.into(),
            user_id: user_id.into(),
            channel: channel.to_owned(),
            purpose: purpose.to_owned(),
            status: ConversationStatus::Active,
            prompt_version: String::new(),
            segment: 0,
            turn: 0,
            created_at_ms: 0,
            compaction_retry_at_chars: 0,
        }
    }
}
