//! Web sessions and verified sign-ins. A session is found by the SHA-256 of its cookie's
//! secret (the secret itself is never stored, so a copy of the table signs nobody in). A
//! sign-in in progress is the browser's to hold (its cookie): nothing is stored when one
//! starts, so starting sign-ins costs no write; a verified one is recorded by its state, once.

use crate::StoreError;
use async_trait::async_trait;
use transcript::UserId;

/// A signed-in browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Hex SHA-256 of the cookie's secret.
    pub id_hash: String,
    pub user: UserId,
    /// The token the page sends back on every state-changing request.
    pub csrf: String,
    pub created_at_ms: i64,
    /// The session ends then (or at sign-out, whichever is first).
    pub expires_at_ms: i64,
}

#[async_trait]
pub trait Sessions: Send + Sync {
    /// Store a new session; [`StoreError::Conflict`] when the hash exists.
    async fn put_session(&self, session: &Session) -> Result<(), StoreError>;

    /// The session with this hash, unless it has expired (`now_ms >= expires_at_ms`).
    async fn session(&self, id_hash: &str, now_ms: i64) -> Result<Option<Session>, StoreError>;

    /// End the session (signing out); ending an unknown one is fine.
    async fn delete_session(&self, id_hash: &str) -> Result<(), StoreError>;

    /// Record that the sign-in with this OAuth `state` came back from the identity provider
    /// verified, kept until `keep_until_ms`: `true` the first time, `false` for a state already
    /// recorded (a replayed callback, which must sign nobody in). A record whose `keep_until_ms`
    /// is past `now_ms` may be swept, and its state is then new again.
    async fn first_use_of_login(
        &self,
        state: &str,
        now_ms: i64,
        keep_until_ms: i64,
    ) -> Result<bool, StoreError>;
}
