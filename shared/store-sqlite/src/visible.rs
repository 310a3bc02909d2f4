//! `VisibleStore`: what the user saw, one row per entry, the whole entry as JSON.

use crate::SqliteStore;
use crate::error::{corrupt, from_sql, to_sql, unavailable, write_error};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::{StoreError, VisibleEntry, VisibleStore};
use transcript::ConversationId;

#[async_trait]
impl VisibleStore for SqliteStore {
    fn turn_writes(&self) -> Option<&dyn store::TurnWrites> {
        Some(self)
    }

    async fn append_visible(&self, e: &VisibleEntry) -> Result<(), StoreError> {
        let row = Row::of(e)?;
        self.db.write(move |conn| row.insert(conn)).await
    }

    /// Every position: the whole range.
    async fn visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Vec<VisibleEntry>, StoreError> {
        self.visible_range(conversation, 0, u64::MAX).await
    }

    async fn next_visible_position(
        &self,
        conversation: &ConversationId,
    ) -> Result<u64, StoreError> {
        let conversation = conversation.clone();
        self.db
            .read(move |conn| next_position(conn, &conversation))
            .await
    }

    async fn last_visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        self.end_entry(conversation, End::Last).await
    }

    async fn first_visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        self.end_entry(conversation, End::First).await
    }

    /// The rows of the range, from the primary key's index.
    async fn visible_range(
        &self,
        conversation: &ConversationId,
        from: u64,
        before: u64,
    ) -> Result<Vec<VisibleEntry>, StoreError> {
        let conversation = conversation.clone();
        // SQLite's integers are signed: a bound past i64::MAX is no bound.
        let bound = |p: u64| i64::try_from(p).unwrap_or(i64::MAX);
        let (from, before) = (bound(from), bound(before));
        self.db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT position, body FROM visible WHERE conversation_id = ?1 \
                         AND position >= ?2 AND position < ?3 ORDER BY position",
                    )
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map(params![&conversation.0, from, before], |row| {
                        Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                    })
                    .map_err(unavailable)?;
                rows.map(|row| {
                    let (position, body) = row.map_err(unavailable)?;
                    decode(&conversation, position, &body)
                })
                .collect()
            })
            .await
    }
}

/// Which end of a conversation's visible transcript.
#[derive(Clone, Copy)]
enum End {
    First,
    Last,
}

impl SqliteStore {
    /// The entry at `end` of the conversation's transcript: one indexed row.
    async fn end_entry(
        &self,
        conversation: &ConversationId,
        end: End,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        let conversation = conversation.clone();
        let sql = match end {
            End::First => {
                "SELECT position, body FROM visible WHERE conversation_id = ?1 \
                 ORDER BY position LIMIT 1"
            }
            End::Last => {
                "SELECT position, body FROM visible WHERE conversation_id = ?1 \
                 ORDER BY position DESC LIMIT 1"
            }
        };
        self.db
            .read(move |conn| {
                let mut stmt = conn.prepare_cached(sql).map_err(unavailable)?;
                let row = stmt
                    .query_row([&conversation.0], |row| {
                        Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                    })
                    .optional()
                    .map_err(unavailable)?;
                row.map(|(position, body)| decode(&conversation, position, &body))
                    .transpose()
            })
            .await
    }
}

/// A visible entry as its row, ready to insert.
pub(crate) struct Row {
    conversation: String,
    position: i64,
    body: String,
    what: String,
}

impl Row {
    pub(crate) fn of(e: &VisibleEntry) -> Result<Self, StoreError> {
        let what = format!("visible entry {}@{}", e.conversation_id, e.position);
        Ok(Self {
            body: serde_json::to_string(e).map_err(|err| corrupt(what.clone(), err))?,
            conversation: e.conversation_id.0.clone(),
            position: to_sql(e.position, "position")?,
            what,
        })
    }

    /// Insert it; a taken position is [`StoreError::Conflict`].
    pub(crate) fn insert(self, conn: &Connection) -> Result<(), StoreError> {
        conn.prepare_cached(
            "INSERT INTO visible (conversation_id, position, body) VALUES (?1, ?2, ?3)",
        )
        .map_err(unavailable)?
        .execute(params![self.conversation, self.position, self.body])
        .map_err(|err| write_error(err, || self.what))?;
        Ok(())
    }
}

/// Where `conversation`'s next visible entry goes.
pub(crate) fn next_position(
    conn: &Connection,
    conversation: &ConversationId,
) -> Result<u64, StoreError> {
    let max: Option<i64> = conn
        .prepare_cached("SELECT MAX(position) FROM visible WHERE conversation_id = ?1")
        .map_err(unavailable)?
        .query_row([&conversation.0], |row| row.get(0))
        .map_err(unavailable)?;
    match max {
        None => Ok(0),
        Some(max) => Ok(from_sql(max, || format!("visible entry {conversation}@{max}"))? + 1),
    }
}

/// The stored JSON, checked against the key it was stored under.
fn decode(
    conversation: &ConversationId,
    position: i64,
    body: &str,
) -> Result<VisibleEntry, StoreError> {
    let what = || format!("visible entry {conversation}@{position}");
    let entry: VisibleEntry = serde_json::from_str(body).map_err(|e| corrupt(what(), e))?;
    if &entry.conversation_id != conversation || i64::try_from(entry.position) != Ok(position) {
        return Err(corrupt(what(), "body does not match the row's key"));
    }
    Ok(entry)
}
