use crate::StoreError;
use async_trait::async_trait;
use transcript::ConversationId;

/// A risky call waiting for the user's yes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub conversation: ConversationId,
    /// Hash of the tool name and its canonical arguments.
    pub hash: String,
    /// The action (user turn) the call was first refused on.
    pub created_on_action: String,
    /// What the user was asked to confirm.
    pub description: String,
    pub expires_at_ms: i64,
}

/// Pending confirmations: at most one per `(conversation, hash)`.
///
/// A record is live while `now_ms < expires_at_ms`; an expired record counts as absent (stores
/// that delete by TTL only ever remove records this rule already treats as gone).
#[async_trait]
pub trait Confirmations: Send + Sync {
    /// Store (or replace) the pending record.
    async fn put_pending(&self, pending: &Pending) -> Result<(), StoreError>;

    /// Consume the record: `Some` exactly once, and only when it is live at `now_ms` and was
    /// created on another action than `current_action` (a later user turn). A conditional
    /// delete (DynamoDB reads the record first, then deletes it only as read, applied once
    /// if its answer is lost), so of concurrent takers at most one gets it. A record of the
    /// current action is left in place and gives `None`.
    async fn take_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        current_action: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, StoreError>;

    /// The record, when it is live at `now_ms`, left in place (a page that shows a question
    /// before a person answers it).
    async fn read_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, StoreError>;
}
