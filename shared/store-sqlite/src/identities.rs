//! `Identities`: link codes in `link_codes` (redeeming stamps `used_at_ms` and the redeeming
//! account, `used_by`, which a code made for one account has from the start; the row stays
//! until a new code of the same string replaces it) and bound
//! accounts in `identities`, one row per `(channel, external_id)` (listed by user through
//! `identities_by_user`; unbinding deletes the row). Creating and redeeming are each one
//! statement whose `WHERE` admits only what the port allows, so there is no read-then-write
//! race.

use crate::SqliteStore;
use crate::error::unavailable;
use async_trait::async_trait;
use rusqlite::{OptionalExtension, params};
use store::{Binding, Identities, StoreError};
use transcript::UserId;

impl SqliteStore {
    /// A new link code, redeemable by anyone or (`for_redeemer`) by that account only: its
    /// `used_by` is set from the start, unredeemed (`used_at_ms` NULL).
    async fn new_link_code(
        &self,
        code: &str,
        user: &UserId,
        for_redeemer: Option<&str>,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        let code = code.to_owned();
        let user = user.clone();
        let for_redeemer = for_redeemer.map(str::to_owned);
        self.db
            .write(move |conn| {
                let written = conn
                    .prepare_cached(
                        "INSERT INTO link_codes (code, user_id, expires_at_ms, used_at_ms, used_by)
                 VALUES (?1, ?2, ?4, NULL, ?5)
                 ON CONFLICT (code) DO UPDATE SET
                     user_id = excluded.user_id,
                     expires_at_ms = excluded.expires_at_ms,
                     used_at_ms = NULL,
                     used_by = excluded.used_by
                 WHERE link_codes.expires_at_ms <= ?3",
                    )
                    .map_err(unavailable)?
                    .execute(params![code, user.0, now_ms, expires_at_ms, for_redeemer])
                    .map_err(unavailable)?;
                if written == 0 {
                    return Err(StoreError::Conflict {
                        what: format!("link code {code}"),
                    });
                }
                Ok(())
            })
            .await
    }
}

#[async_trait]
impl Identities for SqliteStore {
    async fn create_link_code(
        &self,
        code: &str,
        user: &UserId,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.new_link_code(code, user, None, now_ms, expires_at_ms)
            .await
    }

    async fn create_link_code_for(
        &self,
        code: &str,
        user: &UserId,
        redeemer: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.new_link_code(code, user, Some(redeemer), now_ms, expires_at_ms)
            .await
    }

    async fn consume_link_code(
        &self,
        code: &str,
        redeemer: &str,
        now_ms: i64,
    ) -> Result<Option<UserId>, StoreError> {
        let code = code.to_owned();
        let redeemer = redeemer.to_owned();
        self.db
            .write(move |conn| {
                let user: Option<String> = conn
                    .prepare_cached(
                        "UPDATE link_codes SET used_at_ms = COALESCE(used_at_ms, ?2), used_by = ?3
                 WHERE code = ?1 AND expires_at_ms > ?2
                   AND (used_by = ?3 OR (used_by IS NULL AND used_at_ms IS NULL))
                 RETURNING user_id",
                    )
                    .map_err(unavailable)?
                    .query_row(params![code, now_ms, redeemer], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)?;
                Ok(user.map(UserId))
            })
            .await
    }

    async fn link_code_redeemed_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        let code = code.to_owned();
        self.db
            .read(move |conn| {
                let at: Option<Option<i64>> = conn
                    .prepare_cached("SELECT used_at_ms FROM link_codes WHERE code = ?1")
                    .map_err(unavailable)?
                    .query_row(params![code], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)?;
                Ok(at.flatten())
            })
            .await
    }

    async fn link_code_expires_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        let code = code.to_owned();
        self.db
            .read(move |conn| {
                conn.prepare_cached("SELECT expires_at_ms FROM link_codes WHERE code = ?1")
                    .map_err(unavailable)?
                    .query_row(params![code], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)
            })
            .await
    }

    async fn bind_identity(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let channel = channel.to_owned();
        let external_id = external_id.to_owned();
        let user = user.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(
                    "INSERT INTO identities (channel, external_id, user_id, bound_at_ms)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (channel, external_id) DO UPDATE SET
                     user_id = excluded.user_id,
                     bound_at_ms = excluded.bound_at_ms",
                )
                .map_err(unavailable)?
                .execute(params![channel, external_id, user.0, now_ms])
                .map_err(unavailable)?;
                Ok(())
            })
            .await
    }

    async fn bind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        was: Option<&UserId>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let channel = channel.to_owned();
        let external_id = external_id.to_owned();
        let user = user.clone();
        let was = was.cloned();
        self.db
            .write(move |conn| {
                let written = match &was {
                    // Bound to `user` already (this very write, tried again): done.
                    None => conn
                        .prepare_cached(
                            "INSERT INTO identities (channel, external_id, user_id, bound_at_ms)
                             VALUES (?1, ?2, ?3, ?4)
                             ON CONFLICT (channel, external_id) DO UPDATE SET user_id = user_id
                             WHERE user_id = excluded.user_id",
                        )
                        .map_err(unavailable)?
                        .execute(params![channel, external_id, user.0, now_ms]),
                    Some(was) => conn
                        .prepare_cached(
                            "UPDATE identities SET user_id = ?3,
                                 bound_at_ms = CASE WHEN user_id = ?3 THEN bound_at_ms ELSE ?4 END
                             WHERE channel = ?1 AND external_id = ?2 AND user_id IN (?5, ?3)",
                        )
                        .map_err(unavailable)?
                        .execute(params![channel, external_id, user.0, now_ms, was.0]),
                }
                .map_err(unavailable)?;
                match written {
                    1 => Ok(()),
                    _ => Err(StoreError::Conflict {
                        what: format!("identity {channel}#{external_id}"),
                    }),
                }
            })
            .await
    }

    async fn identity(
        &self,
        channel: &str,
        external_id: &str,
    ) -> Result<Option<UserId>, StoreError> {
        let channel = channel.to_owned();
        let external_id = external_id.to_owned();
        self.db
            .read(move |conn| {
                let user: Option<String> = conn
                    .prepare_cached(
                        "SELECT user_id FROM identities WHERE channel = ?1 AND external_id = ?2",
                    )
                    .map_err(unavailable)?
                    .query_row(params![channel, external_id], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)?;
                Ok(user.map(UserId))
            })
            .await
    }

    async fn bindings(&self, user: Option<&UserId>) -> Result<Vec<Binding>, StoreError> {
        let user = user.cloned();
        self.db
            .read(move |conn| {
                let mut statement = conn
                    .prepare_cached(
                        "SELECT channel, external_id, user_id, bound_at_ms FROM identities
                 WHERE ?1 IS NULL OR user_id = ?1
                 ORDER BY user_id, channel, external_id",
                    )
                    .map_err(unavailable)?;
                let rows = statement
                    .query_map(params![user.as_ref().map(|u| u.0.as_str())], |r| {
                        Ok(Binding {
                            channel: r.get(0)?,
                            external_id: r.get(1)?,
                            user: UserId(r.get(2)?),
                            bound_at_ms: r.get(3)?,
                        })
                    })
                    .map_err(unavailable)?;
                rows.collect::<Result<_, _>>().map_err(unavailable)
            })
            .await
    }

    async fn unbind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        bound_by_ms: i64,
    ) -> Result<Option<UserId>, StoreError> {
        let channel = channel.to_owned();
        let external_id = external_id.to_owned();
        self.db
            .write(move |conn| {
                let user: Option<String> = conn
                    .prepare_cached(
                        "DELETE FROM identities
                         WHERE channel = ?1 AND external_id = ?2 AND bound_at_ms <= ?3
                         RETURNING user_id",
                    )
                    .map_err(unavailable)?
                    .query_row(params![channel, external_id, bound_by_ms], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)?;
                if user.is_some() {
                    return Ok(user.map(UserId));
                }
                let newer: bool = conn
                    .prepare_cached(
                        "SELECT EXISTS (SELECT 1 FROM identities
                         WHERE channel = ?1 AND external_id = ?2)",
                    )
                    .map_err(unavailable)?
                    .query_row(params![channel, external_id], |r| r.get(0))
                    .map_err(unavailable)?;
                match newer {
                    true => Err(StoreError::Conflict {
                        what: format!("identity {channel}#{external_id}"),
                    }),
                    false => Ok(None),
                }
            })
            .await
    }

    async fn unbind_identity_of(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
    ) -> Result<bool, StoreError> {
        let (channel, external_id, user) =
            (channel.to_owned(), external_id.to_owned(), user.clone());
        self.db
            .write(move |conn| {
                let deleted = conn
                    .prepare_cached(
                        "DELETE FROM identities
                         WHERE channel = ?1 AND external_id = ?2 AND user_id = ?3",
                    )
                    .map_err(unavailable)?
                    .execute(params![channel, external_id, user.0])
                    .map_err(unavailable)?;
                Ok(deleted > 0)
            })
            .await
    }
}
