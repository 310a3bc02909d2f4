//! `Retention`: a conversation's date in `conversation_expiry`; past it, one transaction deletes
//! the conversation's row, messages, visible entries, tool results, pending confirmations and
//! active records, and the date itself. A refresh that finds the date passed deletes first, so
//! old words are never kept past their date by a late refresh.

use crate::SqliteStore;
use crate::error::unavailable;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::{Retention, StoreError};
use transcript::ConversationId;

/// Every table holding a conversation's data, by its conversation column.
const CONVERSATION_TABLES: &[(&str, &str)] = &[
    ("messages", "conversation_id"),
    ("visible", "conversation_id"),
    ("tool_results", "conversation_id"),
    ("pending_confirmations", "conversation_id"),
    ("active_records", "conversation_id"),
    ("conversation_expiry", "conversation_id"),
    ("conversations", "id"),
];

fn delete_conversation(tx: &Connection, id: &str) -> Result<(), StoreError> {
    for (table, column) in CONVERSATION_TABLES {
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE {column} = ?1"))
            .map_err(unavailable)?
            .execute([id])
            .map_err(unavailable)?;
    }
    Ok(())
}

#[async_trait]
impl Retention for SqliteStore {
    async fn expire_conversation(
        &self,
        conversation: &ConversationId,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let conversation = conversation.clone();
        self.db
            .write(move |conn| {
                let tx = conn;
                let current: Option<i64> = tx
                    .prepare_cached(
                        "SELECT expires_at_ms FROM conversation_expiry WHERE conversation_id = ?1",
                    )
                    .map_err(unavailable)?
                    .query_row([&conversation.0], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)?;
                if current.is_some_and(|date| date <= now_ms) {
                    delete_conversation(tx, &conversation.0)?;
                }
                tx.prepare_cached(
            "INSERT INTO conversation_expiry (conversation_id, expires_at_ms) VALUES (?1, ?2)
             ON CONFLICT (conversation_id) DO UPDATE SET expires_at_ms = excluded.expires_at_ms",
        )
        .map_err(unavailable)?
        .execute(params![conversation.0, until_ms])
        .map_err(unavailable)?;
                Ok(())
            })
            .await
    }

    async fn sweep_expired(&self, now_ms: i64) -> Result<u64, StoreError> {
        self.db
            .write(move |conn| {
                let tx = conn;
                let expired: Vec<String> = tx
                    .prepare_cached(
                        "SELECT conversation_id FROM conversation_expiry WHERE expires_at_ms <= ?1",
                    )
                    .map_err(unavailable)?
                    .query_map([now_ms], |r| r.get(0))
                    .map_err(unavailable)?
                    .collect::<Result<_, _>>()
                    .map_err(unavailable)?;
                for id in &expired {
                    delete_conversation(tx, id)?;
                }
                Ok(expired.len() as u64)
            })
            .await
    }
}
