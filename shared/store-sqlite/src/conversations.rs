//! `ConversationStore`: one row per conversation, one column per field.

use crate::SqliteStore;
use crate::error::{corrupt, unavailable, write_error};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, params};
use store::{ConversationStore, StoreError};
use transcript::{Conversation, ConversationId, ConversationStatus, UserId};

const COLUMNS: &str = "id, user_id, channel, purpose, status, prompt_version, segment, turn, \
     created_at_ms, compaction_retry_at_chars";

#[async_trait]
impl ConversationStore for SqliteStore {
    async fn create_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        let c = c.clone();
        self.db
            .write(move |conn| {
                let mut stmt = conn
            .prepare_cached(&format!(
                "INSERT INTO conversations ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
            ))
            .map_err(unavailable)?;
                stmt.execute(params![
                    c.id.0,
                    c.user_id.0,
                    c.channel,
                    c.purpose,
                    status_to_sql(c.status),
                    c.prompt_version,
                    c.segment,
                    turn_to_sql(c.turn)?,
                    c.created_at_ms,
                    crate::error::to_sql(c.compaction_retry_at_chars, "compaction retry mark")?,
                ])
                .map_err(|e| write_error(e, || format!("conversation {}", c.id)))?;
                Ok(())
            })
            .await
    }

    async fn conversation(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError> {
        let id = id.clone();
        self.db.read(move |conn| read(conn, &id)).await
    }

    async fn update_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        let c = c.clone();
        self.db
            .write_resumable(move |conn| {
                if !update(conn, &c)? {
                    return Err(StoreError::NotFound {
                        what: format!("conversation {}", c.id),
                    });
                }
                Ok(())
            })
            .await
    }

    /// Newest first; ties by id, descending.
    async fn conversations_of(&self, user: &UserId) -> Result<Vec<Conversation>, StoreError> {
        let user = user.clone();
        self.db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM conversations WHERE user_id = ?1
                 ORDER BY created_at_ms DESC, id DESC"
                    ))
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map([&user.0], RawConversation::read)
                    .map_err(unavailable)?;
                rows.map(|raw| RawConversation::decode(raw.map_err(unavailable)?))
                    .collect()
            })
            .await
    }

    /// The page from the `(user_id, created_at_ms, id)` order, `limit` rows.
    async fn conversations_page(
        &self,
        user: &UserId,
        after: Option<&(i64, ConversationId)>,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        let user = user.clone();
        // With no cursor, one past every row: i64::MAX is not a creation time anyone has.
        let (at, id) = after.map_or((i64::MAX, String::new()), |(at, id)| (*at, id.0.clone()));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM conversations WHERE user_id = ?1
                 AND (created_at_ms < ?2 OR (created_at_ms = ?2 AND id < ?3))
                 ORDER BY created_at_ms DESC, id DESC LIMIT ?4"
                    ))
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map(
                        rusqlite::params![&user.0, at, id, limit],
                        RawConversation::read,
                    )
                    .map_err(unavailable)?;
                rows.map(|raw| RawConversation::decode(raw.map_err(unavailable)?))
                    .collect()
            })
            .await
    }
}

/// Store `c`'s purpose, status, prompt version, segment, turn and compaction retry mark;
/// whether the conversation was there to update.
pub(crate) fn update(conn: &rusqlite::Connection, c: &Conversation) -> Result<bool, StoreError> {
    let changed = conn
        .prepare_cached(
            "UPDATE conversations
             SET purpose = ?2, status = ?3, prompt_version = ?4, segment = ?5, turn = ?6,
                 compaction_retry_at_chars = ?7
             WHERE id = ?1",
        )
        .map_err(unavailable)?
        .execute(params![
            c.id.0,
            c.purpose,
            status_to_sql(c.status),
            c.prompt_version,
            c.segment,
            turn_to_sql(c.turn)?,
            crate::error::to_sql(c.compaction_retry_at_chars, "compaction retry mark")?,
        ])
        .map_err(unavailable)?;
    Ok(changed > 0)
}

/// The conversation `id`, if there is one.
pub(crate) fn read(
    conn: &rusqlite::Connection,
    id: &ConversationId,
) -> Result<Option<Conversation>, StoreError> {
    let raw = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM conversations WHERE id = ?1"
        ))
        .map_err(unavailable)?
        .query_row([&id.0], RawConversation::read)
        .optional()
        .map_err(unavailable)?;
    raw.map(RawConversation::decode).transpose()
}

/// A row as SQLite holds it; [`RawConversation::decode`] checks what SQL cannot.
struct RawConversation {
    id: String,
    user_id: String,
    channel: String,
    purpose: String,
    status: String,
    prompt_version: String,
    segment: i64,
    turn: i64,
    created_at_ms: i64,
    compaction_retry_at_chars: i64,
}

impl RawConversation {
    fn read(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            user_id: row.get(1)?,
            channel: row.get(2)?,
            purpose: row.get(3)?,
            status: row.get(4)?,
            prompt_version: row.get(5)?,
            segment: row.get(6)?,
            turn: row.get(7)?,
            created_at_ms: row.get(8)?,
            compaction_retry_at_chars: row.get(9)?,
        })
    }

    fn decode(self) -> Result<Conversation, StoreError> {
        let what = || format!("conversation {}", self.id);
        let status = serde_json::from_value(serde_json::Value::String(self.status.clone()))
            .map_err(|e| corrupt(what(), e))?;
        let segment = u32::try_from(self.segment).map_err(|e| corrupt(what(), e))?;
        let turn = crate::error::from_sql(self.turn, what)?;
        let compaction_retry_at_chars =
            crate::error::from_sql(self.compaction_retry_at_chars, what)?;
        Ok(Conversation {
            id: ConversationId(self.id),
            user_id: UserId(self.user_id),
            channel: self.channel,
            purpose: self.purpose,
            status,
            prompt_version: self.prompt_version,
            segment,
            turn,
            created_at_ms: self.created_at_ms,
            compaction_retry_at_chars,
        })
    }
}

/// The status's serde name (`active`, `paused`, ...), so new variants need no code here.
pub(crate) fn status_to_sql(status: ConversationStatus) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(name)) => name,
        other => unreachable!("ConversationStatus serializes as a string, got {other:?}"),
    }
}

pub(crate) fn turn_to_sql(turn: u64) -> Result<i64, StoreError> {
    crate::error::to_sql(turn, "turn")
}
