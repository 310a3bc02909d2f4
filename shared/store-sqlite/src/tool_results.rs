//! `ToolResults`: one row per finished tool call; the first write of a key wins.

use crate::SqliteStore;
use crate::error::{corrupt, to_sql, unavailable, write_error};
use async_trait::async_trait;
use rusqlite::params;
use std::collections::HashMap;
use store::{StoreError, ToolResults};
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
        let what = || format!("tool result {conversation}@{asked_at}#{tool_use_id}");
        let body = serde_json::to_string(result).map_err(|e| corrupt(what(), e))?;
        self.conn()
            .prepare_cached(
                "INSERT INTO tool_results (conversation_id, asked_at, tool_use_id, body)
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(unavailable)?
            .execute(params![
                conversation.0,
                to_sql(asked_at, "position")?,
                tool_use_id,
                body
            ])
            .map_err(|e| write_error(e, what))?;
        Ok(())
    }

    async fn tool_results(
        &self,
        conversation: &ConversationId,
        asked_at: u64,
    ) -> Result<HashMap<String, Part>, StoreError> {
        let conn = self.conn();
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
    }
}
