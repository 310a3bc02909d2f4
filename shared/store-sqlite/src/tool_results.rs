//! `ToolResults`: one row per finished tool call; the first write of a key wins. Receipts
//! (`tool_receipts`) are written by `Records::commit` inside its transaction.

use crate::SqliteStore;
use crate::error::{corrupt, to_sql, unavailable, write_error};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use serde_json::Value;
use std::collections::HashMap;
use store::{Receipt, StoreError, ToolResults};
use transcript::{ConversationId, Part};

#[async_trait]
impl ToolResults for SqliteStore {
    async fn put_tool_result(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
    ) -> Result<(), StoreError> {
        let row = Row::of(conversation, asked_at, tool_use_id, result)?;
        self.db.write_resumable(move |conn| row.insert(conn)).await
    }

    async fn tool_results(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
    ) -> Result<HashMap<String, Part>, StoreError> {
        let conversation = conversation.clone();
        self.db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT tool_use_id, body FROM tool_results
                 WHERE conversation_id = ?1 AND asked_at = ?2",
                    )
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map(
                        params![conversation.0, to_sql(asked_at, "position")?],
                        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
                    )
                    .map_err(unavailable)?;
                let mut out = HashMap::new();
                for row in rows {
                    let (id, body) = row.map_err(unavailable)?;
                    let part = serde_json::from_str(&body)
                        .map_err(|e| corrupt(format!("tool result {conversation}#{id}"), e))?;
                    out.insert(id, part);
                }
                Ok(out)
            })
            .await
    }

    async fn receipt(&self, call_key: &str) -> Result<Option<Value>, StoreError> {
        let call_key = call_key.to_owned();
        self.db
            .read(move |conn| {
                let output: Option<String> = conn
                    .prepare_cached("SELECT output FROM tool_receipts WHERE call_key = ?1")
                    .map_err(unavailable)?
                    .query_row(params![call_key], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)?;
                output
                    .map(|o| {
                        serde_json::from_str(&o)
                            .map_err(|e| corrupt(format!("receipt {call_key}"), e))
                    })
                    .transpose()
            })
            .await
    }
}

/// A tool call's result as its row, ready to insert.
pub(crate) struct Row {
    conversation: String,
    asked_at: i64,
    tool_use_id: String,
    body: String,
    what: String,
}

impl Row {
    pub(crate) fn of(
        conversation: &ConversationId,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
    ) -> Result<Self, StoreError> {
        let what = format!("tool result {conversation}@{asked_at}#{tool_use_id}");
        Ok(Self {
            body: serde_json::to_string(result).map_err(|e| corrupt(what.clone(), e))?,
            conversation: conversation.0.clone(),
            asked_at: to_sql(asked_at, "position")?,
            tool_use_id: tool_use_id.to_owned(),
            what,
        })
    }

    /// Insert it; a result recorded already is [`StoreError::Conflict`].
    pub(crate) fn insert(self, conn: &rusqlite::Connection) -> Result<(), StoreError> {
        conn.prepare_cached(
            "INSERT INTO tool_results (conversation_id, asked_at, tool_use_id, body)
             VALUES (?1, ?2, ?3, ?4)",
        )
        .map_err(unavailable)?
        .execute(params![
            self.conversation,
            self.asked_at,
            self.tool_use_id,
            self.body
        ])
        .map_err(|e| write_error(e, || self.what))?;
        Ok(())
    }
}

/// Write `receipt` inside a commit's transaction; a key already written is `Conflict` (the
/// caller's transaction is then dropped, so the commit writes nothing). Public for a domain
/// that keeps its own table in the store's file (the local server's notes): its write and the
/// receipt commit in its own transaction on that file.
pub fn put_receipt(tx: &rusqlite::Connection, receipt: &Receipt) -> Result<(), StoreError> {
    let what = || format!("receipt {}", receipt.call_key);
    let output = serde_json::to_string(&receipt.output).map_err(|e| corrupt(what(), e))?;
    tx.prepare_cached("INSERT INTO tool_receipts (call_key, output) VALUES (?1, ?2)")
        .map_err(unavailable)?
        .execute(params![receipt.call_key, output])
        .map_err(|e| write_error(e, what))?;
    Ok(())
}

/// Whether the database `conn` is open on holds the store's receipts (a file the store has
/// opened), so a domain table beside them can commit receipts with its writes.
pub fn receipts_here(conn: &rusqlite::Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tool_receipts'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n == 1)
}
