//! Conversation leases: one turn at a time per conversation, across processes and entrances
//! (the web function and the worker Lambda on AWS, both halves of `bridle serve` locally).
//! A lease is held until an expiry its holder keeps renewing while the turn runs; a holder that
//! died stops renewing, so its lease lapses and the next turn proceeds.

use crate::StoreError;
use async_trait::async_trait;
use transcript::ConversationId;

/// What [`Leases::acquire_lease`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lease {
    /// The caller holds the lease until the expiry it asked for (taken, or renewed).
    Held,
    /// Someone else holds a live lease until `until_ms`.
    Busy { holder: String, until_ms: i64 },
}

/// Adapters implement `acquire_lease` as one conditional write: it succeeds only when there is
/// no lease, the lease has expired, or the caller already holds it (a renewal).
#[async_trait]
pub trait Leases: Send + Sync {
    /// Take or renew `conversation`'s lease for `holder` until `expires_at_ms`.
    async fn acquire_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<Lease, StoreError>;

    /// Give the lease up, if `holder` still holds it (a lapsed lease someone else took is left
    /// alone).
    async fn release_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<(), StoreError>;
}
