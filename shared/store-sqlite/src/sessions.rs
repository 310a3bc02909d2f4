//! `Sessions`: one row per session (by the hash of its secret) and one per sign-in in
//! progress; taking a sign-in is one `DELETE … RETURNING`, so it happens once.

use crate::SqliteStore;
use crate::error::{unavailable, write_error};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use store::{Session, Sessions, StoreError};

#[async_trait]
impl Sessions for SqliteStore {
    async fn put_session(&self, s: &Session) -> Result<(), StoreError> {
        let s = s.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO sessions (id_hash, user_id, csrf, created_at_ms, expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(unavailable)?
                .execute(params![
                    s.id_hash,
                    s.user.0,
                    s.csrf,
                    s.created_at_ms,
                    s.expires_at_ms
                ])
                .map_err(|e| write_error(e, || "session".to_owned()))?;
                Ok(())
            })
            .await
    }

    async fn session(&self, id_hash: &str, now_ms: i64) -> Result<Option<Session>, StoreError> {
        let id_hash = id_hash.to_owned();
        self.db
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT id_hash, user_id, csrf, created_at_ms, expires_at_ms FROM sessions
                 WHERE id_hash = ?1 AND expires_at_ms > ?2",
                )
                .map_err(unavailable)?
                .query_row(params![id_hash, now_ms], |r| {
                    Ok(Session {
                        id_hash: r.get(0)?,
                        user: r.get::<_, String>(1)?.into(),
                        csrf: r.get(2)?,
                        created_at_ms: r.get(3)?,
                        expires_at_ms: r.get(4)?,
                    })
                })
                .optional()
                .map_err(unavailable)
            })
            .await
    }

    async fn delete_session(&self, id_hash: &str) -> Result<(), StoreError> {
        let id_hash = id_hash.to_owned();
        self.db
            .write(move |conn| {
                conn.prepare_cached("DELETE FROM sessions WHERE id_hash = ?1")
                    .map_err(unavailable)?
                    .execute([id_hash])
                    .map_err(unavailable)?;
                Ok(())
            })
            .await
    }

    async fn first_use_of_login(
        &self,
        state: &str,
        now_ms: i64,
        keep_until_ms: i64,
    ) -> Result<bool, StoreError> {
        let state = state.to_owned();
        self.db
            .write(move |conn| {
                conn.prepare_cached("DELETE FROM used_logins WHERE keep_until_ms <= ?1")
                    .map_err(unavailable)?
                    .execute([now_ms])
                    .map_err(unavailable)?;
                let added = conn
                    .prepare_cached(
                        "INSERT INTO used_logins (state, keep_until_ms) VALUES (?1, ?2)
                         ON CONFLICT (state) DO NOTHING",
                    )
                    .map_err(unavailable)?
                    .execute(params![state, keep_until_ms])
                    .map_err(unavailable)?;
                Ok(added == 1)
            })
            .await
    }
}
