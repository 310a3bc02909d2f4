//! `Sessions`: one row per session (by the hash of its secret) and one per sign-in in
//! progress; taking a sign-in is one `DELETE … RETURNING`, so it happens once.

use crate::SqliteStore;
use crate::error::{unavailable, write_error};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use store::{PendingLogin, Session, Sessions, StoreError};

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

    async fn put_login(&self, l: &PendingLogin) -> Result<(), StoreError> {
        let l = l.clone();
        self.db
            .write(move |conn| {
                conn
            .prepare_cached(
                "INSERT INTO pending_logins (state, nonce, pkce_verifier, return_to, expires_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(unavailable)?
            .execute(params![
                l.state,
                l.nonce,
                l.pkce_verifier,
                l.return_to,
                l.expires_at_ms
            ])
            .map_err(|e| write_error(e, || "sign-in in progress".to_owned()))?;
                Ok(())
            })
            .await
    }

    async fn take_login(
        &self,
        state: &str,
        now_ms: i64,
    ) -> Result<Option<PendingLogin>, StoreError> {
        let state = state.to_owned();
        self.db
            .write(move |conn| {
                let taken = conn
                    .prepare_cached(
                        "DELETE FROM pending_logins WHERE state = ?1
                 RETURNING state, nonce, pkce_verifier, return_to, expires_at_ms",
                    )
                    .map_err(unavailable)?
                    .query_row([state], |r| {
                        Ok(PendingLogin {
                            state: r.get(0)?,
                            nonce: r.get(1)?,
                            pkce_verifier: r.get(2)?,
                            return_to: r.get(3)?,
                            expires_at_ms: r.get(4)?,
                        })
                    })
                    .optional()
                    .map_err(unavailable)?;
                Ok(taken.filter(|l| l.expires_at_ms > now_ms))
            })
            .await
    }
}
