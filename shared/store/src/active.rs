use crate::{Record, StoreError};
use async_trait::async_trait;
use transcript::{ConversationId, UserId};

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

    /// `owner`'s records of `kind` (as [`crate::Records::records_of`]) and `conversation`'s
    /// active record of that kind (as `active`), read together: the per-turn context block's
    /// read, one round trip where the store can make it one.
    async fn records_with_active(
        &self,
        owner: &UserId,
        kind: &str,
        conversation: &ConversationId,
    ) -> Result<(Vec<Record>, Option<String>), StoreError>;
}
