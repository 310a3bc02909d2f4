//! How many reads a signed-in user may make through the web app each minute
//! (`BRIDLE_WEB_READS_PER_MINUTE`, default 300): pages, the conversation list, history, notes,
//! the timetable, the admin pages (a message's reply streams in the answer to its POST, a
//! change). Each reads the session and the account and then what it shows — up to 200
//! conversations or 500 entries of history a request — and on AWS each is an invocation, so a
//! session script could otherwise cost us reads at the speed of HTTP. The page makes 6–8 when
//! it loads and about 30 a minute while a retry runs (it polls every 2 s then); static assets
//! are public and not counted. Each count is one write to the ledger (on DynamoDB a conditional
//! update, about the cost of a GET's own session and account reads).
//! Counted in the budget ledger beside the changes ([`super::write_rate`]), all of a user's
//! sessions together; without sign-in (the one local user, loopback only) nothing is counted.

use super::write_rate::counted;
use axum::response::Response;
use budget::RequestRate;
use store::BudgetLedger;
use transcript::UserId;

/// The variable, and its default.
pub const VAR: &str = "BRIDLE_WEB_READS_PER_MINUTE";
pub const DEFAULT_PER_MINUTE: u64 = 300;

/// The ledger's name for the count.
pub const WINDOW: &str = "web_reads_1m";

/// The rate from a variable lookup; `Err` is one sentence naming the variable.
pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<RequestRate, String> {
    RequestRate::from_var(
        var,
        VAR,
        "reads each signed-in user may make through the web app",
        DEFAULT_PER_MINUTE,
    )
}

/// [`from_vars`]'s default.
pub fn default_rate() -> RequestRate {
    RequestRate {
        per_minute: DEFAULT_PER_MINUTE,
    }
}

/// Count one read of `user` at `now_ms`: `None` lets it through; `Some` is 429 with
/// `Retry-After` past the rate, 503 when the count cannot be kept (fail closed).
pub async fn refusal(
    rate: RequestRate,
    ledger: &dyn BudgetLedger,
    user: &UserId,
    now_ms: i64,
) -> Option<Response> {
    counted(rate, ledger, user, now_ms, WINDOW, |per_minute, wait_s| {
        format!(
            "That is more than {per_minute} requests to read in a minute. Try again in \
             {wait_s} seconds."
        )
    })
    .await
}
