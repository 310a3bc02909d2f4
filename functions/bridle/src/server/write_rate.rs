//! How many changes a signed-in user may make through the web app each minute
//! (`BRIDLE_WEB_WRITES_PER_MINUTE`, default 60): messages and button presses, new conversations,
//! link codes, access tokens, the assistant's grant. Every one of them writes to the store, and
//! a message starts a turn, so a session script could otherwise cost us writes (and on AWS,
//! invocations) at the speed of HTTP; the model's own caps only bound the model calls. All of a
//! user's sessions share the count, which is kept in the budget ledger so every instance does.
//! Reading is counted apart ([`super::read_rate`]); signing out is never counted. Without sign-in (the one local user, loopback
//! only) nothing is counted.

use super::errors::ApiError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use budget::{RequestCount, RequestRate};
use store::BudgetLedger;
use transcript::UserId;

/// The variable, and its default.
pub const VAR: &str = "BRIDLE_WEB_WRITES_PER_MINUTE";
pub const DEFAULT_PER_MINUTE: u64 = 60;

/// The ledger's name for the count.
pub const WINDOW: &str = "web_writes_1m";

/// The rate from a variable lookup; `Err` is one sentence naming the variable.
pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<RequestRate, String> {
    RequestRate::from_var(
        var,
        VAR,
        "changes each signed-in user may make through the web app",
        DEFAULT_PER_MINUTE,
    )
}

/// [`from_vars`]'s default.
pub fn default_rate() -> RequestRate {
    RequestRate {
        per_minute: DEFAULT_PER_MINUTE,
    }
}

/// Count one change of `user` at `now_ms`: `None` lets it through; `Some` is the answer that
/// turns it away, with nothing done: 429 with `Retry-After` past the rate, 503 when the count
/// cannot be kept (fail closed).
pub async fn refusal(
    rate: RequestRate,
    ledger: &dyn BudgetLedger,
    user: &UserId,
    now_ms: i64,
) -> Option<Response> {
    counted(rate, ledger, user, now_ms, WINDOW, |per_minute, wait_s| {
        format!(
            "That is more than {per_minute} changes in a minute (messages, presses, new \
             conversations). Nothing was sent or changed; try again in {wait_s} seconds."
        )
    })
    .await
}

/// Count one request of `user` in `window` at `now_ms` (see [`refusal`]); past the rate, the
/// 429's sentence is `over(per_minute, wait_s)`.
pub(super) async fn counted(
    rate: RequestRate,
    ledger: &dyn BudgetLedger,
    user: &UserId,
    now_ms: i64,
    window: &str,
    over: impl FnOnce(u64, i64) -> String,
) -> Option<Response> {
    match rate
        .count(ledger, format!("web_user:{user}"), window, now_ms)
        .await
    {
        RequestCount::Allowed => None,
        RequestCount::Over { wait_s } => {
            tracing::warn!(%user, window, per_minute = rate.per_minute, "web requests over the rate; refused");
            let mut response =
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, over(rate.per_minute, wait_s))
                    .into_response();
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(wait_s));
            Some(response)
        }
        RequestCount::Unchecked => Some(
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Bridle could not check your request limit just now. Nothing was done; try \
                 again in a moment.",
            )
            .into_response(),
        ),
    }
}
