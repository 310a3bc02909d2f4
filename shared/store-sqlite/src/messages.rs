//! `MessageStore`: the model transcript, one row per message, the whole message as JSON.

use crate::SqliteStore;
use crate::error::{corrupt, from_sql, to_sql, unavailable, write_error};
use async_trait::async_trait;
use rusqlite::params;
use store::{MessageStore, StoreError, VisibleEntry};
use transcript::{Conversation, ConversationId, Message};

#[async_trait]
impl MessageStore for SqliteStore {
    async fn append_message(&self, m: &Message) -> Result<(), StoreError> {
        let what = || format!("message {}@{}", m.conversation_id, m.position);
        let body = serde_json::to_string(m).map_err(|e| corrupt(what(), e))?;
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "INSERT INTO messages (conversation_id, position, segment, role, body)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(unavailable)?;
        stmt.execute(params![
            m.conversation_id.0,
            to_sql(m.position, "position")?,
            m.segment,
            m.role.as_str(),
            body,
        ])
        .map_err(|e| write_error(e, what))?;
        Ok(())
    }

    async fn start_turn(
        &self,
        c: &Conversation,
        m: &Message,
        e: &VisibleEntry,
    ) -> Result<(), StoreError> {
        let what = || format!("message {}@{}", m.conversation_id, m.position);
        let seen = || format!("visible entry {}@{}", e.conversation_id, e.position);
        let body = serde_json::to_string(m).map_err(|err| corrupt(what(), err))?;
        let shown = serde_json::to_string(e).map_err(|err| corrupt(seen(), err))?;
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(unavailable)?;
        let changed = tx
            .prepare_cached(
                "UPDATE conversations
                 SET purpose = ?2, status = ?3, prompt_version = ?4, segment = ?5, turn = ?6
                 WHERE id = ?1",
            )
            .map_err(unavailable)?
            .execute(params![
                c.id.0,
                c.purpose,
                crate::conversations::status_to_sql(c.status),
                c.prompt_version,
                c.segment,
                crate::conversations::turn_to_sql(c.turn)?,
            ])
            .map_err(unavailable)?;
        if changed == 0 {
            return Err(StoreError::Conflict {
                what: format!("conversation {} (gone)", c.id),
            });
        }
        tx.prepare_cached(
            "INSERT INTO messages (conversation_id, position, segment, role, body)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(unavailable)?
        .execute(params![
            m.conversation_id.0,
            to_sql(m.position, "position")?,
            m.segment,
            m.role.as_str(),
            body,
        ])
        .map_err(|err| write_error(err, what))?;
        tx.prepare_cached(
            "INSERT INTO visible (conversation_id, position, body) VALUES (?1, ?2, ?3)",
        )
        .map_err(unavailable)?
        .execute(params![
            e.conversation_id.0,
            to_sql(e.position, "position")?,
            shown
        ])
        .map_err(|err| write_error(err, seen))?;
        // Dropped without commit on any error above: neither row is written.
        tx.commit().map_err(unavailable)
    }

    async fn messages(
        &self,
        conversation: &ConversationId,
        segment: u32,
    ) -> Result<Vec<Message>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT position, body FROM messages
                 WHERE conversation_id = ?1 AND segment = ?2 ORDER BY position",
            )
            .map_err(unavailable)?;
        let rows = stmt
            .query_map(params![conversation.0, segment], |row| {
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
            })
            .map_err(unavailable)?;
        rows.map(|row| {
            let (position, body) = row.map_err(unavailable)?;
            decode(conversation, position, &body)
        })
        .collect()
    }

    async fn next_position(&self, conversation: &ConversationId) -> Result<u64, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached("SELECT MAX(position) FROM messages WHERE conversation_id = ?1")
            .map_err(unavailable)?;
        let max: Option<i64> = stmt
            .query_row([&conversation.0], |row| row.get(0))
            .map_err(unavailable)?;
        match max {
            None => Ok(0),
            Some(max) => Ok(from_sql(max, || format!("message {conversation}@{max}"))? + 1),
        }
    }
}

/// The stored JSON, checked against the key it was stored under.
fn decode(conversation: &ConversationId, position: i64, body: &str) -> Result<Message, StoreError> {
    let what = || format!("message {conversation}@{position}");
    let message: Message = serde_json::from_str(body).map_err(|e| corrupt(what(), e))?;
    if &message.conversation_id != conversation || i64::try_from(message.position) != Ok(position) {
        return Err(corrupt(what(), "body does not match the row's key"));
    }
    Ok(message)
}
