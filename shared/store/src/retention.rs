//! Data kept only for a while: an unknown sender's lobby conversation (the text they sent and
//! the harness's replies) is let go some time after its last message, unless refreshed.
//!
//! On DynamoDB every item of the conversation carries the table's `ttl` attribute and DynamoDB
//! deletes it (within days of the date; reads treat it as gone from the date on); on SQLite
//! [`Retention::sweep_expired`] deletes it, run at start and periodically by `bridle serve`.

use crate::StoreError;
use async_trait::async_trait;
use transcript::ConversationId;

/// Expiry of whole conversations: their row, model messages and visible entries.
#[async_trait]
pub trait Retention: Send + Sync {
    /// Keep `conversation` until `until_ms`, then let it go: its row, its model messages and its
    /// visible entries as they are now (call again after writing more; each call moves the date
    /// of everything present — an adapter that dates each item may leave one already within a
    /// thirtieth of the time left of `until_ms`, never later than it). Data already past its date at `now_ms` is not kept longer: it
    /// stays gone (or is deleted now), so a sender who returns after the date starts afresh. A
    /// conversation that does not exist is no error.
    async fn expire_conversation(
        &self,
        conversation: &ConversationId,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// Delete every conversation past its date at `now_ms`, with its messages and visible
    /// entries; answers how many conversations went. Where the database deletes by itself
    /// (DynamoDB's TTL) this does nothing and answers 0.
    async fn sweep_expired(&self, now_ms: i64) -> Result<u64, StoreError>;
}
