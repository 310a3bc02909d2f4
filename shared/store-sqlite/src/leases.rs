//! `Leases`: one row per leased conversation. Taking a lease is a single upsert whose `WHERE`
//! admits only a missing row, an expired lease or the same holder (a renewal); running both in
//! the one write makes the read that explains a refusal consistent with it.

use crate::SqliteStore;
use crate::error::unavailable;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::{Lease, Leases, StoreError};
use transcript::ConversationId;

#[async_trait]
impl Leases for SqliteStore {
    async fn acquire_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<Lease, StoreError> {
        let (conversation, holder) = (conversation.clone(), holder.to_owned());
        self.db
            .write_resumable(move |conn| {
                acquire(conn, &conversation, &holder, now_ms, expires_at_ms)
            })
            .await
    }

    async fn release_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<(), StoreError> {
        let (conversation, holder) = (conversation.clone(), holder.to_owned());
        self.db
            .write_resumable(move |conn| release(conn, &conversation, &holder).map(drop))
            .await
    }
}

/// Take (or renew) `conversation`'s lease for `holder` until `expires_at_ms`: one upsert whose
/// `WHERE` admits only a missing row, an expired lease or the same holder.
pub(crate) fn acquire(
    conn: &Connection,
    conversation: &ConversationId,
    holder: &str,
    now_ms: i64,
    expires_at_ms: i64,
) -> Result<Lease, StoreError> {
    let taken = conn
        .prepare_cached(
            "INSERT INTO conversation_leases (conversation_id, holder, expires_at_ms)
             VALUES (?1, ?2, ?4)
             ON CONFLICT (conversation_id) DO UPDATE SET
                 holder = excluded.holder,
                 expires_at_ms = excluded.expires_at_ms
             WHERE conversation_leases.holder = ?2
                OR conversation_leases.expires_at_ms <= ?3
             RETURNING 1",
        )
        .map_err(unavailable)?
        .query_row(
            params![conversation.0, holder, now_ms, expires_at_ms],
            |_| Ok(()),
        )
        .optional()
        .map_err(unavailable)?;
    if taken.is_some() {
        return Ok(Lease::Held);
    }
    let (holder, until_ms) = conn
        .prepare_cached(
            "SELECT holder, expires_at_ms FROM conversation_leases WHERE conversation_id = ?1",
        )
        .map_err(unavailable)?
        .query_row([&conversation.0], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(unavailable)?;
    Ok(Lease::Busy { holder, until_ms })
}

/// Give `conversation`'s lease up if `holder` holds it; whether it did.
pub(crate) fn release(
    conn: &Connection,
    conversation: &ConversationId,
    holder: &str,
) -> Result<bool, StoreError> {
    let gone = conn
        .prepare_cached(
            "DELETE FROM conversation_leases WHERE conversation_id = ?1 AND holder = ?2",
        )
        .map_err(unavailable)?
        .execute(params![conversation.0, holder])
        .map_err(unavailable)?;
    Ok(gone == 1)
}
