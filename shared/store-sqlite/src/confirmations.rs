//! `Confirmations`: one row per `(conversation, hash)`. Taking is one `DELETE … RETURNING`
//! whose `WHERE` admits only a live record of another action, so it is consumed once.

use crate::SqliteStore;
use crate::error::unavailable;
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use store::{Confirmations, Pending, StoreError};
use transcript::ConversationId;

#[async_trait]
impl Confirmations for SqliteStore {
    async fn put_pending(&self, pending: &Pending) -> Result<(), StoreError> {
        let pending = pending.clone();
        self.db
            .write_resumable(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO pending_confirmations
                     (conversation_id, hash, created_on_action, description, expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (conversation_id, hash) DO UPDATE SET
                     created_on_action = excluded.created_on_action,
                     description = excluded.description,
                     expires_at_ms = excluded.expires_at_ms",
                )
                .map_err(unavailable)?
                .execute(params![
                    pending.conversation.0,
                    pending.hash,
                    pending.created_on_action,
                    pending.description,
                    pending.expires_at_ms
                ])
                .map_err(unavailable)?;
                Ok(())
            })
            .await
    }

    async fn take_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        current_action: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, StoreError> {
        let (conv, hash_, action) = (
            conversation.clone(),
            hash.to_owned(),
            current_action.to_owned(),
        );
        let taken: Option<(String, String, i64)> = self
            .db
            .write_resumable(move |conn| {
                conn.prepare_cached(
                    "DELETE FROM pending_confirmations
                 WHERE conversation_id = ?1 AND hash = ?2
                   AND created_on_action <> ?3 AND expires_at_ms > ?4
                 RETURNING created_on_action, description, expires_at_ms",
                )
                .map_err(unavailable)?
                .query_row(params![conv.0, hash_, action, now_ms], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
                .map_err(unavailable)
            })
            .await?;
        Ok(
            taken.map(|(created_on_action, description, expires_at_ms)| Pending {
                conversation: conversation.clone(),
                hash: hash.to_owned(),
                created_on_action,
                description,
                expires_at_ms,
            }),
        )
    }

    async fn read_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, StoreError> {
        let (conv, hash_) = (conversation.clone(), hash.to_owned());
        let found: Option<(String, String, i64)> = self
            .db
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT created_on_action, description, expires_at_ms
                     FROM pending_confirmations
                     WHERE conversation_id = ?1 AND hash = ?2 AND expires_at_ms > ?3",
                )
                .map_err(unavailable)?
                .query_row(params![conv.0, hash_, now_ms], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .optional()
                .map_err(unavailable)
            })
            .await?;
        Ok(
            found.map(|(created_on_action, description, expires_at_ms)| Pending {
                conversation: conversation.clone(),
                hash: hash.to_owned(),
                created_on_action,
                description,
                expires_at_ms,
            }),
        )
    }
}
