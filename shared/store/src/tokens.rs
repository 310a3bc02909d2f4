//! MCP access tokens: a user's bearer tokens for external AI clients. Only the SHA-256 of a
//! token is stored (a copy of the table opens nothing); a token is found by that hash, listed
//! by its user, revoked by its id, and stamped with when it was last used.

use crate::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use transcript::UserId;

/// What a token may do, each level including the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenScope {
    /// Read-only tools.
    Read,
    /// Also tools that change things.
    Write,
    /// Also the calls the confirmation policy calls risky (each still asks the human).
    Risky,
}

impl TokenScope {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Read => "read",
            TokenScope::Write => "write",
            TokenScope::Risky => "risky",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "read" => TokenScope::Read,
            "write" => TokenScope::Write,
            "risky" => TokenScope::Risky,
            _ => return None,
        })
    }
}

/// One token, as stored: never the token itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpToken {
    /// Public id (shown in listings, used to revoke).
    pub id: String,
    /// Hex SHA-256 of the token.
    pub hash: String,
    pub user: UserId,
    /// The owner's label ("Claude Desktop at home").
    pub name: String,
    pub scope: TokenScope,
    pub created_at_ms: i64,
    /// The token stops working then; `None`: until revoked.
    pub expires_at_ms: Option<i64>,
    pub last_used_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

impl McpToken {
    /// Whether the token opens anything at `now_ms`: not revoked, not expired.
    pub fn is_live(&self, now_ms: i64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms.is_none_or(|end| now_ms < end)
    }
}

#[async_trait]
pub trait Tokens: Send + Sync {
    /// Store a new token; [`StoreError::Conflict`] when its id or hash exists (nothing written).
    async fn create_token(&self, token: &McpToken) -> Result<(), StoreError>;

    /// The token with this hash, revoked and expired ones included (the caller decides).
    async fn token_by_hash(&self, hash: &str) -> Result<Option<McpToken>, StoreError>;

    /// The token with this id.
    async fn token(&self, id: &str) -> Result<Option<McpToken>, StoreError>;

    /// A user's tokens, oldest first (ties by id), revoked and expired ones included.
    async fn tokens_of(&self, user: &UserId) -> Result<Vec<McpToken>, StoreError>;

    /// Revoke a token at `at_ms`. `false`: no such token. Revoking twice keeps the first time.
    async fn revoke_token(&self, id: &str, at_ms: i64) -> Result<bool, StoreError>;

    /// Stamp the token as used at `at_ms` (never moves the stamp back). Unknown ids are ignored.
    async fn touch_token(&self, id: &str, at_ms: i64) -> Result<(), StoreError>;

    /// Revoke every token of `user` still live at `at_ms`; how many there were. One read, then
    /// one write each (a failure part way leaves the rest live: call again).
    async fn revoke_tokens_of(&self, user: &UserId, at_ms: i64) -> Result<usize, StoreError> {
        let mut revoked = 0;
        for token in self
            .tokens_of(user)
            .await?
            .iter()
            .filter(|t| t.is_live(at_ms))
        {
            self.revoke_token(&token.id, at_ms).await?;
            revoked += 1;
        }
        Ok(revoked)
    }
}
