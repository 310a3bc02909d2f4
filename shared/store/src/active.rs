use crate::StoreError;
use async_trait::async_trait;
use transcript::ConversationId;

/// The record a conversation is about ("this event"), per record kind. A pointer, not domain
/// data: not audited, not undone. Whoever reads it gates it by owner like any other id.
#[async_trait]
pub trait ActiveRecords: Send + Sync {
    /// Make `id` the conversation's active record of `kind`.
    async fn set_active(
        &self,
        conversation: &ConversationId,
        kind: &str,
        id: &str,
    ) -> Result<(), StoreError>;

    async fn active(
        &self,
        conversation: &ConversationId,
        kind: &str,
    ) -> Result<Option<String>, StoreError>;
}
