//! How many requests a signed-in user may make through the web app each minute, in two counts
//! kept in the budget ledger (so every instance shares them), all of a user's sessions together
//! (and, before anyone is signed in, [`SIGN_INS`]: callbacks from the identity provider per
//! client address, `crate::auth::from_address`):
//!
//! - [`WRITES`] (`BRIDLE_WEB_WRITES_PER_MINUTE`, default 60): messages and button presses, new
//!   conversations, link codes, access tokens, the assistant's grant. Every one writes to the
//!   store, and a message starts a turn (the model's own caps only bound the model calls).
//!   Signing out is never counted.
//! - [`READS`] (`BRIDLE_WEB_READS_PER_MINUTE`, default 300): every other request — pages, the
//!   conversation list, history, notes, the timetable, the admin pages (a message's reply streams
//!   in the answer to its POST, a change). Each reads the session and the account and then what
//!   it shows (up to 200 conversations or 500 entries of history). The page makes 6–8 when it
//!   loads and about 30 a minute while a retry runs (it polls every 2 s then); static assets are
//!   public and not counted. Each count is one write to the ledger (on DynamoDB a conditional
//!   update, about the cost of a GET's own session and account reads).
//!
//! Without either, a session script could cost us store calls (and on AWS, invocations) at the
//! speed of HTTP. Without sign-in (the one local user, loopback only) nothing is counted.

use super::errors::ApiError;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use budget::{RequestCount, RequestRate};
use store::BudgetLedger;
use transcript::UserId;

/// One of the two counts: its variable and default, the ledger's name for it, and what a 429
/// says past it.
#[derive(Debug)]
pub struct WebRate {
    pub var: &'static str,
    pub default_per_minute: u64,
    /// The ledger's name for the count.
    pub window: &'static str,
    /// What is counted, for the variable's error.
    what: &'static str,
    /// The 429's sentence, from the rate and the seconds to wait.
    pub over: fn(u64, i64) -> String,
}

/// The changes each signed-in user may make a minute.
pub const WRITES: WebRate = WebRate {
    var: "BRIDLE_WEB_WRITES_PER_MINUTE",
    default_per_minute: 60,
    window: "web_writes_1m",
    what: "changes each signed-in user may make through the web app",
    over: |per_minute, wait_s| {
        format!(
            "That is more than {per_minute} changes in a minute (messages, presses, new \
             conversations). Nothing was sent or changed; try again in {wait_s} seconds."
        )
    },
};

/// The reads each signed-in user may make a minute.
pub const READS: WebRate = WebRate {
    var: "BRIDLE_WEB_READS_PER_MINUTE",
    default_per_minute: 300,
    window: "web_reads_1m",
    what: "reads each signed-in user may make through the web app",
    over: |per_minute, wait_s| {
        format!(
            "That is more than {per_minute} requests to read in a minute. Try again in \
             {wait_s} seconds."
        )
    },
};

/// The sign-ins that may come back from the identity provider to one client address a minute
/// and not be verified by it, or still be under way (`crate::auth::from_address`: a verified
/// one is given back).
pub const SIGN_INS: WebRate = WebRate {
    var: "BRIDLE_SIGN_INS_PER_MINUTE",
    default_per_minute: 20,
    window: "sign_ins_1m",
    what: "sign-ins from one client address that the identity provider does not verify",
    over: |per_minute, wait_s| {
        format!(
            "More than {per_minute} sign-ins from your network could not be verified in the \
             last minute. Please try again in {wait_s} seconds."
        )
    },
};

impl WebRate {
    /// The rate from a variable lookup; `Err` is one sentence naming the variable.
    pub fn from_vars(&self, var: impl Fn(&str) -> Option<String>) -> Result<RequestRate, String> {
        RequestRate::from_var(var, self.var, self.what, self.default_per_minute)
    }

    /// [`WebRate::from_vars`], a problem noted in `problems` (the default kept meanwhile), so
    /// that a start-up reports every bad setting at once.
    pub fn read(
        &self,
        var: impl Fn(&str) -> Option<String>,
        problems: &mut Vec<String>,
    ) -> RequestRate {
        self.from_vars(var).unwrap_or_else(|problem| {
            problems.push(problem);
            self.default_rate()
        })
    }

    /// [`WebRate::from_vars`]'s default.
    pub fn default_rate(&self) -> RequestRate {
        RequestRate {
            per_minute: self.default_per_minute,
        }
    }

    /// Count one request of `user` at `now_ms` at `rate`: `None` lets it through; `Some` is
    /// the answer that turns it away, with nothing done: 429 with `Retry-After` past the rate,
    /// 503 when the count cannot be kept (fail closed).
    pub async fn refusal(
        &self,
        rate: RequestRate,
        ledger: &dyn BudgetLedger,
        user: &UserId,
        now_ms: i64,
    ) -> Option<Response> {
        let window = self.window;
        match rate
            .count(ledger, format!("web_user:{user}"), window, now_ms)
            .await
        {
            RequestCount::Allowed => None,
            RequestCount::Over { wait_s } => {
                tracing::warn!(%user, window, per_minute = rate.per_minute, "web requests over the rate; refused");
                let mut response = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    (self.over)(rate.per_minute, wait_s),
                )
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
}
