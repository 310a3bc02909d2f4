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
        let start = Start::of(c, m, e)?;
        // One savepoint in the writer's batch: on any error below neither row is written.
        self.db.write_resumable(move |conn| start.write(conn)).await
    }

    async fn messages(
        &self,
        conversation: &ConversationId,
        segment: u32,
    ) -> Result<Vec<Message>, StoreError> {
        let conversation = conversation.clone();
        self.db
            .read(move |conn| segment_of(conn, &conversation, segment))
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

/// The messages of `conversation`'s `segment`, by position.
pub(crate) fn segment_of(
    conn: &rusqlite::Connection,
    conversation: &ConversationId,
    segment: u32,
) -> Result<Vec<Message>, StoreError> {
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

/// A turn's start as its rows: the conversation moved on, the user's message and its visible
/// entry.
pub(crate) struct Start {
    conversation: Conversation,
    message: Row,
    entry: crate::visible::Row,
}

impl Start {
    pub(crate) fn of(c: &Conversation, m: &Message, e: &VisibleEntry) -> Result<Self, StoreError> {
        Ok(Self {
            conversation: c.clone(),
            message: Row::of(m)?,
            entry: crate::visible::Row::of(e)?,
        })
    }

    /// Write all three (inside the caller's savepoint: an error leaves it to roll back).
    pub(crate) fn write(self, conn: &rusqlite::Connection) -> Result<(), StoreError> {
        if !crate::conversations::update(conn, &self.conversation)? {
            return Err(StoreError::Conflict {
                what: format!("conversation {} (gone)", self.conversation.id),
            });
        }
        self.message.insert(conn)?;
        self.entry.insert(conn)
    }
}
