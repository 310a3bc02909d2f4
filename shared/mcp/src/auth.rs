//! The door of `/mcp`: `Authorization: Bearer <token>` only. The token is looked up by its
//! hash; a missing, unknown, revoked or expired one, one whose account is closed, or one made
//! at or before its owner signed out everywhere, gets 401 with `WWW-Authenticate` and one
//! sentence (as a closed account's web session ends). A live one puts an [`McpCaller`] (its user, id and scope) in the request's
//! extensions, where the MCP handler finds it; its last use is stamped (at most once a
//! minute). The per-user limit of requests per minute ([`RateLimit`], all a user's tokens
//! together) is counted in the store's budget ledger ([`budget::RequestRate`]), one
//! conditional add per request, so every instance shares it.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use budget::RequestCount;
use engine::Clock;
use serde_json::json;
use std::sync::Arc;
use store::{AccountStatus, Accounts, BudgetLedger, TokenScope, Tokens};
use transcript::UserId;

/// Why `token` opens nothing for its `account` (read now), if it does not: a closed account
/// (a paused one may still read, as on the web; its writes are refused where every write is
/// checked), or a token made before its person signed out everywhere (revoked then too, and
/// held to it here as well, so one the revocation missed opens nothing). No account at all is
/// the local server's user without sign-in (`local`).
pub(crate) fn account_refusal(
    account: Option<&store::Account>,
    token: &store::McpToken,
) -> Option<&'static str> {
    let account = account?;
    if account.status == AccountStatus::Closed {
        return Some("This access token's account is closed.");
    }
    (account.sessions_ended_at_ms > 0 && token.created_at_ms <= account.sessions_ended_at_ms)
        .then_some(
            "This access token was made before its owner signed out everywhere. Create a new \
             one in Bridle under \"Connect an AI client\".",
        )
}

/// Who is calling over MCP, from the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpCaller {
    pub token_id: String,
    pub user: UserId,
    pub scope: TokenScope,
}

/// What the door needs.
#[derive(Clone)]
pub struct Door {
    pub tokens: Arc<dyn Tokens>,
    /// Whose account is closed: their tokens open nothing.
    pub accounts: Arc<dyn Accounts>,
    /// Where every request of a token's user is counted ([`RateLimit::every_request`]).
    pub ledger: Arc<dyn BudgetLedger>,
    pub every_request: budget::RequestRate,
    pub clock: Clock,
}

impl std::fmt::Debug for Door {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Door")
    }
}

/// How often a token's last use is written at most.
const TOUCH_EVERY_MS: i64 = 60_000;

/// The middleware in front of `/mcp`.
pub async fn authenticate(State(door): State<Door>, mut request: Request, next: Next) -> Response {
    let Some(presented) = bearer(&request) else {
        return unauthorized(
            None,
            "This endpoint needs an access token: send it as `Authorization: Bearer <token>`. \
             Create one in Bridle under \"Connect an AI client\".",
        );
    };
    let hash = crate::hash_token(presented);
    let now = (door.clock)();
    let token = match door.tokens.token_by_hash(&hash).await {
        Ok(token) => token,
        Err(err) => {
            tracing::error!(error = %err, "looking up an MCP token failed");
            return sentence(
                StatusCode::SERVICE_UNAVAILABLE,
                "Bridle could not check the access token just now. Try again in a moment.",
            );
        }
    };
    let Some(token) = token.filter(|t| t.is_live(now)) else {
        return unauthorized(
            Some("invalid_token"),
            "This access token is not valid: it is unknown, revoked or expired. Create a new \
             one in Bridle under \"Connect an AI client\".",
        );
    };
    // A closed account reads nothing more through its tokens (a paused one may, as on the
    // web; its writes are refused where every write is checked). No account at all is the
    // local server's user without sign-in (`local`), whose writes need none.
    match door.accounts.account(&token.user).await {
        Ok(account) => {
            if let Some(refused) = account_refusal(account.as_ref(), &token) {
                return unauthorized(Some("invalid_token"), refused);
            }
        }
        Err(err) => {
            tracing::error!(error = %err, "reading an MCP token's account failed");
            return sentence(
                StatusCode::SERVICE_UNAVAILABLE,
                "Bridle could not check the access token just now. Try again in a moment.",
            );
        }
    }
    // Every request, whatever its method (`initialize`, `ping`, notifications, …), has a place
    // in the user's count of all requests; tool calls and lists are also counted, more
    // tightly and in words a model reads, by the handler.
    match door
        .every_request
        .count(
            door.ledger.as_ref(),
            format!("mcp_user:{}", token.user),
            EVERY_REQUEST_WINDOW,
            now,
        )
        .await
    {
        RequestCount::Allowed => {}
        RequestCount::Over { wait_s } => {
            tracing::warn!(user = %token.user, per_minute = door.every_request.per_minute, "MCP requests over the rate; refused");
            let mut refused = sentence(
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "Too many requests with your access tokens: at most {} a minute of any \
                     kind. Nothing was done; try again in {wait_s} seconds.",
                    door.every_request.per_minute
                ),
            );
            refused
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(wait_s));
            return refused;
        }
        RequestCount::Unchecked => {
            return sentence(
                StatusCode::SERVICE_UNAVAILABLE,
                "Bridle could not check your request limit just now. Try again in a moment.",
            );
        }
    }
    if token
        .last_used_ms
        .is_none_or(|last| now - last >= TOUCH_EVERY_MS)
        && let Err(err) = door.tokens.touch_token(&token.id, now).await
    {
        // Only a stamp: the request goes on.
        tracing::warn!(token_id = %token.id, error = %err, "stamping an MCP token's last use failed");
    }
    request.extensions_mut().insert(McpCaller {
        token_id: token.id,
        user: token.user,
        scope: token.scope,
    });
    next.run(request).await
}

/// The token of an `Authorization: Bearer …` header (the scheme in any case).
fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unauthorized(error: Option<&str>, text: &str) -> Response {
    let challenge = match error {
        Some(code) => format!("Bearer realm=\"bridle\", error=\"{code}\""),
        None => "Bearer realm=\"bridle\"".to_owned(),
    };
    let mut response = sentence(StatusCode::UNAUTHORIZED, text);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_str(&challenge).expect("the challenge is ASCII"),
    );
    response
}

fn sentence(status: StatusCode, text: &str) -> Response {
    (status, axum::Json(json!({ "error": text }))).into_response()
}

/// Requests per minute each user may make through MCP, all their access tokens together
/// (`BRIDLE_MCP_REQUESTS_PER_MINUTE`): tokens cost nothing to make, so a limit per token would
/// be one a user multiplies at will.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub per_minute: u64,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self { per_minute: 120 }
    }
}

/// The budget-ledger window the per-user counts are kept in.
pub const RATE_WINDOW: &str = "mcp_requests_1m";

/// The window of the count of every request, whatever its method.
pub const EVERY_REQUEST_WINDOW: &str = "mcp_all_1m";

/// What counting one request said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counted {
    Allowed,
    /// Over the limit: the sentence to answer with.
    Refused(String),
}

impl RateLimit {
    /// The rate of requests of any kind (four times the tool calls' and lists'): a client
    /// makes a few besides its calls (`initialize`, `notifications/initialized`, `ping`), and
    /// each reads the token and its account, so none may go uncounted.
    pub fn every_request(&self) -> budget::RequestRate {
        budget::RequestRate {
            per_minute: self.per_minute.saturating_mul(4),
        }
    }

    /// Count one request of `user` (through any of their tokens) at `now_ms` in this minute's
    /// bucket; refused, and not counted, past the limit. A ledger that cannot be read refuses
    /// too (fail closed).
    pub async fn count(&self, ledger: &dyn BudgetLedger, user: &UserId, now_ms: i64) -> Counted {
        let rate = budget::RequestRate {
            per_minute: self.per_minute,
        };
        match rate
            .count(ledger, format!("mcp_user:{user}"), RATE_WINDOW, now_ms)
            .await
        {
            RequestCount::Allowed => Counted::Allowed,
            RequestCount::Over { wait_s } => Counted::Refused(format!(
                "Too many requests with your access tokens: at most {} a minute in all. \
                 Nothing was done; try again in {wait_s} seconds.",
                self.per_minute
            )),
            RequestCount::Unchecked => Counted::Refused(
                "Bridle could not check your request limit just now. Nothing was done; \
                 try again in a moment."
                    .into(),
            ),
        }
    }

    /// The limit from a variable lookup: `BRIDLE_MCP_REQUESTS_PER_MINUTE` (default 120).
    /// `Err` is one sentence naming the variable.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let rate = budget::RequestRate::from_var(
            var,
            "BRIDLE_MCP_REQUESTS_PER_MINUTE",
            "MCP requests each user may make, all their access tokens together,",
            Self::default().per_minute,
        )?;
        Ok(Self {
            per_minute: rate.per_minute,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_read_once_with_a_sentence() {
        let vars = |v: &'static str| move |_: &str| Some(v.to_owned());
        assert_eq!(RateLimit::from_vars(|_| None), Ok(RateLimit::default()));
        assert_eq!(
            RateLimit::from_vars(vars("30")),
            Ok(RateLimit { per_minute: 30 })
        );
        let err = RateLimit::from_vars(vars("0")).unwrap_err();
        assert!(err.contains("BRIDLE_MCP_REQUESTS_PER_MINUTE"), "{err}");
    }

    #[tokio::test]
    async fn a_user_gets_the_limit_per_minute_across_all_their_tokens() {
        let store = store_sqlite::SqliteStore::open_in_memory().unwrap();
        let limit = RateLimit { per_minute: 2 };
        let (ana, bo) = (UserId::from("ana"), UserId::from("bo"));
        // A whole minute.
        let t0 = 1_800_000_000_000;
        assert_eq!(limit.count(&store, &ana, t0).await, Counted::Allowed);
        assert_eq!(limit.count(&store, &ana, t0 + 1).await, Counted::Allowed);
        // However many tokens she makes, they share the count.
        let Counted::Refused(text) = limit.count(&store, &ana, t0 + 30_000).await else {
            panic!("the third request in a minute must be refused");
        };
        assert!(
            text.contains("at most 2 a minute") && text.contains("30 seconds"),
            "{text}"
        );
        // Another user has their own count; the next minute starts again.
        assert_eq!(limit.count(&store, &bo, t0 + 2).await, Counted::Allowed);
        assert_eq!(
            limit.count(&store, &ana, t0 + 60_000).await,
            Counted::Allowed
        );
    }
}
