//! Requests per user per minute at an entrance that is not a model call: MCP's tool calls, the
//! web app's writes. Each is counted in the store's budget ledger, one conditional add per
//! request, so every instance (every Lambda environment) shares the count; an entrance says
//! what a refusal means in its own words.

use store::{Adjustment, BucketKey, BudgetLedger, Charge, Reserve};

/// At most `per_minute` requests of one scope (a user at an entrance) in each minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRate {
    pub per_minute: u64,
}

/// What counting one request said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestCount {
    Allowed,
    /// Over the limit, and not counted: the minute starts again in `wait_s` seconds (at least
    /// 1).
    Over {
        wait_s: i64,
    },
    /// The ledger could not be read or written: refuse (fail closed).
    Unchecked,
}

/// The count of `scope` in `window` for the minute (aligned to the epoch) holding `now_ms`, and
/// when it may be swept: a minute past its own.
fn minute(scope: String, window: &str, now_ms: i64) -> (BucketKey, i64) {
    let start_ms = now_ms - now_ms.rem_euclid(60_000);
    let bucket = BucketKey {
        scope,
        window: window.into(),
        start_ms,
    };
    (bucket, start_ms + 120_000)
}

impl RequestRate {
    /// Count one request of `scope` (say `mcp_user:<id>`) in `window` (the ledger's name for
    /// the count) at `now_ms`, in the minute aligned to the epoch.
    pub async fn count(
        &self,
        ledger: &dyn BudgetLedger,
        scope: String,
        window: &str,
        now_ms: i64,
    ) -> RequestCount {
        let (bucket, expires_at_ms) = minute(scope, window, now_ms);
        let start_ms = bucket.start_ms;
        let charge = Charge {
            bucket,
            amount: 1,
            limit: Some(self.per_minute),
            expires_at_ms,
        };
        match ledger.reserve(&[charge]).await {
            Ok(Reserve::Reserved) => RequestCount::Allowed,
            Ok(Reserve::Tripped { .. }) => RequestCount::Over {
                wait_s: (start_ms + 60_000 - now_ms).div_euclid(1000).max(1),
            },
            Err(err) => {
                tracing::error!(window, error = %err, "counting a request failed; refused");
                RequestCount::Unchecked
            }
        }
    }

    /// Take back one request [`count`](Self::count) let through with the same `scope`,
    /// `window` and `now_ms` (the same minute's count), once it turned out not to be what the
    /// rate is for. Best effort: a failure is logged and the request stays counted.
    pub async fn give_back(
        &self,
        ledger: &dyn BudgetLedger,
        scope: String,
        window: &str,
        now_ms: i64,
    ) {
        let (bucket, expires_at_ms) = minute(scope, window, now_ms);
        let back = Adjustment {
            bucket,
            delta: -1,
            expires_at_ms,
        };
        if let Err(err) = ledger.adjust(&[back]).await {
            tracing::warn!(window, error = %err, "giving back a counted request failed; it stays counted");
        }
    }

    /// The rate in variable `name` (what it counts, for the error: `what`), or `default` when
    /// unset. `Err` is one sentence naming the variable.
    pub fn from_var(
        var: impl Fn(&str) -> Option<String>,
        name: &str,
        what: &str,
        default: u64,
    ) -> Result<Self, String> {
        let Some(raw) = var(name).filter(|v| !v.trim().is_empty()) else {
            return Ok(Self {
                per_minute: default,
            });
        };
        match raw.trim().parse::<u64>() {
            Ok(n) if (1..=1_000_000).contains(&n) => Ok(Self { per_minute: n }),
            _ => Err(format!(
                "{name}={raw:?} must be a whole number from 1 to 1000000 ({what} per minute)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_is_read_with_a_sentence_naming_the_variable() {
        let read = |value: Option<&str>| {
            RequestRate::from_var(
                |name: &str| (name == "X_PER_MINUTE").then(|| value.map(str::to_owned))?,
                "X_PER_MINUTE",
                "things",
                7,
            )
        };
        assert_eq!(read(None), Ok(RequestRate { per_minute: 7 }));
        assert_eq!(read(Some(" 30 ")), Ok(RequestRate { per_minute: 30 }));
        for bad in ["0", "lots", "-3", "1000001"] {
            let err = read(Some(bad)).unwrap_err();
            assert!(
                err.contains("X_PER_MINUTE") && err.contains("things per minute"),
                "{err}"
            );
        }
    }

    #[tokio::test]
    async fn each_scope_gets_the_rate_each_minute_and_a_refusal_is_not_counted() {
        let store = store_sqlite::SqliteStore::open_in_memory().unwrap();
        let rate = RequestRate { per_minute: 2 };
        let count = |scope: &str, at| rate.count(&store, scope.to_owned(), "w_1m", at);
        let t0 = 1_800_000_000_000; // a whole minute
        assert_eq!(count("a", t0).await, RequestCount::Allowed);
        assert_eq!(count("a", t0 + 1).await, RequestCount::Allowed);
        assert_eq!(
            count("a", t0 + 30_000).await,
            RequestCount::Over { wait_s: 30 }
        );
        assert_eq!(
            count("a", t0 + 59_900).await,
            RequestCount::Over { wait_s: 1 }
        );
        assert_eq!(count("b", t0 + 2).await, RequestCount::Allowed);
        assert_eq!(count("a", t0 + 60_000).await, RequestCount::Allowed);
    }
}
