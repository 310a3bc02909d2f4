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
        let row = Row::of(m)?;
        self.db.write_resumable(move |conn| row.insert(conn)).await
    }

    async fn start_turn(
        &self,
        c: &Conversation,
        m: &Message,
        e: &VisibleEntry,
    ) -> Result<(), StoreError> {
        let (message, entry) = (Row::of(m)?, crate::visible::Row::of(e)?);
        let (id, purpose, status, prompt_version, conv_segment) = (
            c.id.clone(),
            c.purpose.clone(),
            c.status,
            c.prompt_version.clone(),
            c.segment,
        );
        let turn = crate::conversations::turn_to_sql(c.turn)?;
        // One savepoint in the writer's batch: on any error below neither row is written.
        self.db
            .write_resumable(move |conn| {
                let changed = conn
                    .prepare_cached(
                        "UPDATE conversations
                     SET purpose = ?2, status = ?3, prompt_version = ?4, segment = ?5, turn = ?6
                     WHERE id = ?1",
                    )
                    .map_err(unavailable)?
                    .execute(params![
                        id.0,
                        purpose,
                        crate::conversations::status_to_sql(status),
                        prompt_version,
                        conv_segment,
                        turn,
                    ])
                    .map_err(unavailable)?;
                if changed == 0 {
                    return Err(StoreError::Conflict {
                        what: format!("conversation {id} (gone)"),
                    });
                }
                message.insert(conn)?;
                entry.insert(conn)?;
                Ok(())
            })
            .await
    }

    async fn messages(
        &self,
        conversation: &ConversationId,
        segment: u32,
    ) -> Result<Vec<Message>, StoreError> {
        let conversation = conversation.clone();
        self.db
            .read(move |conn| {
                let conversation = &conversation;
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
            })
            .await
    }

    async fn next_position(&self, conversation: &ConversationId) -> Result<u64, StoreError> {
        let conversation = conversation.clone();
        self.db
            .read(move |conn| {
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
            })
            .await
    }
}

/// A message as its row, ready to insert.
pub(crate) struct Row {
    conversation: String,
    position: i64,
    segment: u32,
    role: &'static str,
    body: String,
    what: String,
}

impl Row {
    pub(crate) fn of(m: &Message) -> Result<Self, StoreError> {
        let what = format!("message {}@{}", m.conversation_id, m.position);
        Ok(Self {
            body: serde_json::to_string(m).map_err(|e| corrupt(what.clone(), e))?,
            conversation: m.conversation_id.0.clone(),
            position: to_sql(m.position, "position")?,
            segment: m.segment,
            role: m.role.as_str(),
            what,
        })
    }

    /// Insert it; a taken position is [`StoreError::Conflict`].
    pub(crate) fn insert(self, conn: &rusqlite::Connection) -> Result<(), StoreError> {
        conn.prepare_cached(
            "INSERT INTO messages (conversation_id, position, segment, role, body)
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .map_err(unavailable)?
        .execute(params![
            self.conversation,
            self.position,
            self.segment,
            self.role,
            self.body
        ])
        .map_err(|e| write_error(e, || self.what))?;
        Ok(())
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
