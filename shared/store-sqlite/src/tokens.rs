//! `Tokens`: one row per MCP token in `mcp_tokens` (its hash unique), listed per user by
//! creation time. A taken id or hash is a constraint failure inside SQLite: `Conflict`.

use crate::SqliteStore;
use crate::error::{corrupt, unavailable};
use async_trait::async_trait;
use rusqlite::{OptionalExtension, Row, ffi, params};
use store::{McpToken, StoreError, TokenScope, Tokens};
use transcript::UserId;

const COLUMNS: &str = "id, hash, user_id, name, scope, created_at_ms, expires_at_ms, \
                       last_used_ms, revoked_at_ms";

fn read_row(r: &Row<'_>) -> rusqlite::Result<(McpToken, String)> {
    let scope: String = r.get(4)?;
    Ok((
        McpToken {
            id: r.get(0)?,
            hash: r.get(1)?,
            user: r.get::<_, String>(2)?.into(),
            name: r.get(3)?,
            scope: TokenScope::Read,
            created_at_ms: r.get(5)?,
            expires_at_ms: r.get(6)?,
            last_used_ms: r.get(7)?,
            revoked_at_ms: r.get(8)?,
        },
        scope,
    ))
}

fn decode((mut token, scope): (McpToken, String)) -> Result<McpToken, StoreError> {
    token.scope = TokenScope::parse(&scope).ok_or_else(|| {
        corrupt(
            format!("MCP token {}", token.id),
            format!("scope {scope:?}"),
        )
    })?;
    Ok(token)
}

#[async_trait]
impl Tokens for SqliteStore {
    async fn create_token(&self, t: &McpToken) -> Result<(), StoreError> {
        let t = t.clone();
        self.db
            .write(move |conn| {
                conn.prepare_cached(&format!(
                    "INSERT INTO mcp_tokens ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ))
                .map_err(unavailable)?
                .execute(params![
                    t.id,
                    t.hash,
                    t.user.0,
                    t.name,
                    t.scope.as_str(),
                    t.created_at_ms,
                    t.expires_at_ms,
                    t.last_used_ms,
                    t.revoked_at_ms
                ])
                .map_err(|e| match e.sqlite_error().map(|e| e.extended_code) {
                    Some(ffi::SQLITE_CONSTRAINT_PRIMARYKEY | ffi::SQLITE_CONSTRAINT_UNIQUE) => {
                        StoreError::Conflict {
                            what: "MCP token".into(),
                        }
                    }
                    _ => unavailable(e),
                })?;
                Ok(())
            })
            .await
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<McpToken>, StoreError> {
        let hash = hash.to_owned();
        self.db
            .read(move |conn| {
                let row = conn
                    .prepare_cached(&format!("SELECT {COLUMNS} FROM mcp_tokens WHERE hash = ?1"))
                    .map_err(unavailable)?
                    .query_row([hash], read_row)
                    .optional()
                    .map_err(unavailable)?;
                row.map(decode).transpose()
            })
            .await
    }

    async fn token(&self, id: &str) -> Result<Option<McpToken>, StoreError> {
        let id = id.to_owned();
        self.db
            .read(move |conn| {
                let row = conn
                    .prepare_cached(&format!("SELECT {COLUMNS} FROM mcp_tokens WHERE id = ?1"))
                    .map_err(unavailable)?
                    .query_row([id], read_row)
                    .optional()
                    .map_err(unavailable)?;
                row.map(decode).transpose()
            })
            .await
    }

    async fn tokens_of(&self, user: &UserId) -> Result<Vec<McpToken>, StoreError> {
        let user = user.clone();
        self.db
            .read(move |conn| {
                let rows = conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM mcp_tokens WHERE user_id = ?1 ORDER BY created_at_ms, id"
            ))
            .map_err(unavailable)?
            .query_map([&user.0], read_row)
            .map_err(unavailable)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(unavailable)?;
                rows.into_iter().map(decode).collect()
            })
            .await
    }

    async fn revoke_token(&self, id: &str, at_ms: i64) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.db
            .write(move |conn| {
                let changed = conn
            .prepare_cached(
                "UPDATE mcp_tokens SET revoked_at_ms = COALESCE(revoked_at_ms, ?2) WHERE id = ?1",
            )
            .map_err(unavailable)?
            .execute(params![id, at_ms])
            .map_err(unavailable)?;
                Ok(changed > 0)
            })
            .await
    }

    async fn touch_token(&self, id: &str, at_ms: i64) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.db
            .write_resumable(move |conn| {
                conn.prepare_cached(
                    "UPDATE mcp_tokens SET last_used_ms = ?2
                 WHERE id = ?1 AND (last_used_ms IS NULL OR last_used_ms < ?2)",
                )
                .map_err(unavailable)?
                .execute(params![id, at_ms])
                .map_err(unavailable)?;
                Ok(())
            })
            .await
    }
}
