//! Web sessions and sign-ins in progress. A session is found by the SHA-256 of its cookie's
//! secret (the secret itself is never stored, so a copy of the table signs nobody in); a
//! sign-in in progress (OpenID Connect state, nonce, PKCE verifier) is taken once.

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

/// A sign-in that went to the identity provider and has not come back yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingLogin {
    /// The OAuth `state`: the key, echoed by the provider and held in the browser's cookie.
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
    /// Where to go after signing in (a path of this site).
    pub return_to: String,
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

    /// Remember a sign-in in progress; [`StoreError::Conflict`] when the state exists.
    async fn put_login(&self, login: &PendingLogin) -> Result<(), StoreError>;

    /// Take the sign-in in progress with this state, once: a second take, or one after it
    /// expired, finds nothing.
    async fn take_login(
        &self,
        state: &str,
        now_ms: i64,
    ) -> Result<Option<PendingLogin>, StoreError>;
}
