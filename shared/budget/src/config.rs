//! Caps, prices, the output allowance and its floor, from the environment, each value with its source.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `BRIDLE_CAP_USER_TOKENS_PER_MINUTE` | a user's tokens (all kinds) in the current minute | 100000 |
//! | `BRIDLE_CAP_USER_TOKENS_PER_HOUR` | a user's tokens in the current hour | 1000000 |
//! | `BRIDLE_CAP_USER_USD_30D` | a user's estimated dollars in the current 30-day window | 20 |
//! | `BRIDLE_CAP_GLOBAL_USD_30D` | everyone's estimated dollars in the current 30-day window | 500 |
//! | `BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR` | user messages per conversation per hour | 60 |
//! | `BRIDLE_CAP_UNLINKED_USD_30D` | what replies to senders not linked yet cost (SMS), this 30-day window | 20 |
//! | `BRIDLE_BUDGET_OUTPUT_ALLOWANCE` | the most output tokens one call is given (and reserved for) | 16000 |
//! | `BRIDLE_BUDGET_MIN_OUTPUT_TOKENS` | below this much room for output, a call is refused rather than sent | 1000 |
//! | `BRIDLE_PRICES_FILE` | a JSON price file merged over the built-in prices | — |
//! | `BRIDLE_SMS_USD_PER_SEGMENT` | what one SMS segment of a reply costs, counted in the dollar caps | 0.0083 |
//!
//! A cap set to `off` is no cap. Windows are fixed and aligned to the Unix epoch (see
//! [`Bucket`](crate::Bucket)).

use crate::money::parse_usd;
use crate::prices::PriceTable;
use crate::{Bucket, BudgetError};
use serde::Serialize;

pub const CAP_USER_TOKENS_PER_MINUTE: &str = "BRIDLE_CAP_USER_TOKENS_PER_MINUTE";
pub const CAP_USER_TOKENS_PER_HOUR: &str = "BRIDLE_CAP_USER_TOKENS_PER_HOUR";
pub const CAP_USER_USD_30D: &str = "BRIDLE_CAP_USER_USD_30D";
pub const CAP_GLOBAL_USD_30D: &str = "BRIDLE_CAP_GLOBAL_USD_30D";
pub const CAP_CONVERSATION_MESSAGES_PER_HOUR: &str = "BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR";
pub const CAP_UNLINKED_USD_30D: &str = "BRIDLE_CAP_UNLINKED_USD_30D";
pub const OUTPUT_ALLOWANCE: &str = "BRIDLE_BUDGET_OUTPUT_ALLOWANCE";
pub const MIN_OUTPUT_TOKENS: &str = "BRIDLE_BUDGET_MIN_OUTPUT_TOKENS";
pub const PRICES_FILE: &str = "BRIDLE_PRICES_FILE";
pub const SMS_USD_PER_SEGMENT: &str = "BRIDLE_SMS_USD_PER_SEGMENT";

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "name", rename_all = "snake_case")]
pub enum Source {
    /// Built in.
    Default,
    /// An environment variable.
    Env(String),
    /// An operator file.
    File(String),
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default => f.write_str("default"),
            Self::Env(var) => write!(f, "env {var}"),
            Self::File(path) => write!(f, "file {path}"),
        }
    }
}

/// A cap (tokens, micro-dollars or messages; `None` = no cap) and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cap {
    pub limit: Option<u64>,
    pub source: Source,
}

/// Everything the budget guards need, parsed once at start-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetConfig {
    pub user_tokens_per_minute: Cap,
    pub user_tokens_per_hour: Cap,
    /// Micro-dollars.
    pub user_usd_30d: Cap,
    /// Micro-dollars.
    pub global_usd_30d: Cap,
    pub conversation_messages_per_hour: Cap,
    /// Micro-dollars: what replies to senders not linked yet may cost (SMS segments).
    pub unlinked_usd_30d: Cap,
    /// The most output tokens one call is given: the request's `max_tokens` is lowered to this,
    /// and further to what every cap has left, and the call is reserved for that worst case
    /// (the input is estimated from the request).
    pub output_allowance: u64,
    pub output_allowance_source: Source,
    /// When the caps leave room for fewer output tokens than this, the call is refused with
    /// the tripped bucket's sentence instead of being sent with a uselessly small allowance
    /// (never more than the call's own allowance).
    pub min_output_tokens: u64,
    pub min_output_tokens_source: Source,
    pub prices: PriceTable,
    /// Micro-dollars one text-message segment of a reply costs (Twilio's US price by default;
    /// other countries cost more), counted in the dollar buckets as it goes out.
    pub sms_segment_usd: u64,
    pub sms_segment_usd_source: Source,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        let cap = |limit| Cap {
            limit: Some(limit),
            source: Source::Default,
        };
        Self {
            user_tokens_per_minute: cap(100_000),
            user_tokens_per_hour: cap(1_000_000),
            user_usd_30d: cap(20_000_000),
            global_usd_30d: cap(500_000_000),
            conversation_messages_per_hour: cap(60),
            unlinked_usd_30d: cap(20_000_000),
            output_allowance: 16_000,
            output_allowance_source: Source::Default,
            min_output_tokens: 1_000,
            min_output_tokens_source: Source::Default,
            prices: PriceTable::defaults(),
            sms_segment_usd: 8_300,
            sms_segment_usd_source: Source::Default,
        }
    }
}

enum Unit {
    Count,
    Usd,
}

impl BudgetConfig {
    /// Read the settings through `var` (the environment in `main`, a map in tests); every
    /// problem is reported at once.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, BudgetError> {
        let mut config = Self::default();
        let mut problems = Vec::new();
        let mut cap = |name: &str, unit: Unit, slot: &mut Cap| {
            let Some(value) = var(name).filter(|v| !v.trim().is_empty()) else {
                return;
            };
            let parsed = if value.trim().eq_ignore_ascii_case("off") {
                Some(None)
            } else {
                match unit {
                    Unit::Count => value.trim().replace('_', "").parse::<u64>().ok().map(Some),
                    Unit::Usd => parse_usd(&value).map(Some),
                }
            };
            match parsed {
                Some(limit) => {
                    *slot = Cap {
                        limit,
                        source: Source::Env(name.to_owned()),
                    }
                }
                None => problems.push(BudgetError::BadValue {
                    var: name.to_owned(),
                    value,
                    expected: match unit {
                        Unit::Count => "a whole number, or `off`",
                        Unit::Usd => "a dollar amount such as 20 or 12.50, or `off`",
                    },
                }),
            }
        };
        cap(
            CAP_USER_TOKENS_PER_MINUTE,
            Unit::Count,
            &mut config.user_tokens_per_minute,
        );
        cap(
            CAP_USER_TOKENS_PER_HOUR,
            Unit::Count,
            &mut config.user_tokens_per_hour,
        );
        cap(CAP_USER_USD_30D, Unit::Usd, &mut config.user_usd_30d);
        cap(CAP_GLOBAL_USD_30D, Unit::Usd, &mut config.global_usd_30d);
        cap(
            CAP_CONVERSATION_MESSAGES_PER_HOUR,
            Unit::Count,
            &mut config.conversation_messages_per_hour,
        );
        cap(
            CAP_UNLINKED_USD_30D,
            Unit::Usd,
            &mut config.unlinked_usd_30d,
        );
        let mut tokens = |name: &str, slot: &mut u64, source: &mut Source| {
            let Some(value) = var(name).filter(|v| !v.trim().is_empty()) else {
                return;
            };
            match value.trim().replace('_', "").parse() {
                Ok(n) => {
                    *slot = n;
                    *source = Source::Env(name.into());
                }
                Err(_) => problems.push(BudgetError::BadValue {
                    var: name.into(),
                    value,
                    expected: "a whole number of tokens",
                }),
            }
        };
        tokens(
            OUTPUT_ALLOWANCE,
            &mut config.output_allowance,
            &mut config.output_allowance_source,
        );
        tokens(
            MIN_OUTPUT_TOKENS,
            &mut config.min_output_tokens,
            &mut config.min_output_tokens_source,
        );
        if let Some(value) = var(SMS_USD_PER_SEGMENT).filter(|v| !v.trim().is_empty()) {
            match parse_usd(&value) {
                Some(usd) => {
                    config.sms_segment_usd = usd;
                    config.sms_segment_usd_source = Source::Env(SMS_USD_PER_SEGMENT.into());
                }
                None => problems.push(BudgetError::BadValue {
                    var: SMS_USD_PER_SEGMENT.into(),
                    value,
                    expected: "a dollar amount such as 0.0083 (0: not counted)",
                }),
            }
        }
        if let Some(path) = var(PRICES_FILE).filter(|v| !v.trim().is_empty()) {
            match std::fs::read_to_string(&path) {
                Ok(text) => match PriceTable::with_file(&path, &text) {
                    Ok(prices) => config.prices = prices,
                    Err(e) => problems.push(e),
                },
                Err(source) => problems.push(BudgetError::ReadPrices { path, source }),
            }
        }
        match problems.len() {
            0 => Ok(config),
            1 => Err(problems.remove(0)),
            _ => Err(BudgetError::Several(problems)),
        }
    }

    /// Settings that parse but leave a door open, one sentence each naming its variables, for
    /// the start-up log (`assembly::assemble`, once per process). The strangers' cap is
    /// what keeps a crowd of unknown numbers (SMS pumping) from spending everyone's dollars, so
    /// it is a warning when it is off or not below everyone's; and no cap on everyone's dollars
    /// at all is one too.
    pub fn warnings(&self) -> Vec<String> {
        let mut said = Vec::new();
        match (self.unlinked_usd_30d.limit, self.global_usd_30d.limit) {
            (None, Some(_)) => said.push(format!(
                "{CAP_UNLINKED_USD_30D} is off: replies to senders not linked yet (paid per \
                 segment on SMS) are bounded only by {CAP_GLOBAL_USD_30D}, so a crowd of \
                 unknown numbers can spend everyone's dollars; set it well below that cap"
            )),
            (Some(strangers), Some(everyone)) if strangers >= everyone => said.push(format!(
                "{CAP_UNLINKED_USD_30D} ({}) is not below {CAP_GLOBAL_USD_30D} ({}): a crowd \
                 of unknown numbers can spend everyone's dollars before the strangers' cap \
                 stops them; set it well below",
                crate::money::format_usd(strangers),
                crate::money::format_usd(everyone),
            )),
            _ => {}
        }
        if self.global_usd_30d.limit.is_none() {
            said.push(format!(
                "{CAP_GLOBAL_USD_30D} is off: nothing bounds what everyone together spends \
                 in a 30-day window"
            ));
        }
        said
    }

    /// The cap of a bucket (conversation dollars have none).
    pub fn cap(&self, bucket: Bucket) -> &Cap {
        const NONE: Cap = Cap {
            limit: None,
            source: Source::Default,
        };
        match bucket {
            Bucket::UserTokensMinute => &self.user_tokens_per_minute,
            Bucket::UserTokensHour => &self.user_tokens_per_hour,
            Bucket::UserUsd30d => &self.user_usd_30d,
            Bucket::GlobalUsd30d => &self.global_usd_30d,
            Bucket::ConversationMessagesHour => &self.conversation_messages_per_hour,
            Bucket::ConversationUsd30d => &NONE,
            Bucket::UnlinkedUsd30d => &self.unlinked_usd_30d,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    /// The deploy parameters' patterns are held to the same samples (infra/test_compare.py):
    /// what is accepted here deploys, what is refused here is refused at deploy.
    #[test]
    fn the_caps_accept_and_refuse_the_deploy_templates_samples() {
        let samples: serde_json::Value =
            serde_json::from_str(include_str!("../../../infra/parameter_samples.json")).unwrap();
        for (kind, var) in [
            ("count", CAP_USER_TOKENS_PER_MINUTE),
            ("usd", CAP_USER_USD_30D),
            ("price", SMS_USD_PER_SEGMENT),
        ] {
            for (verdict, accepted) in [("accepted", true), ("refused", false)] {
                for value in samples[kind][verdict].as_array().unwrap() {
                    let value = value.as_str().unwrap();
                    assert_eq!(
                        BudgetConfig::from_vars(vars(&[(var, value)])).is_ok(),
                        accepted,
                        "{var}={value:?} should be {verdict}"
                    );
                }
            }
        }
    }

    /// The strangers' cap off, or at or above everyone's, and no cap on everyone's at all are
    /// said at start-up; the defaults, and a strangers' cap below everyone's, say nothing.
    #[test]
    fn caps_that_leave_everyones_dollars_to_strangers_are_warned_of() {
        let warned =
            |pairs: &[(&str, &str)]| BudgetConfig::from_vars(vars(pairs)).unwrap().warnings();
        assert!(warned(&[]).is_empty(), "{:?}", warned(&[]));
        assert!(warned(&[(CAP_UNLINKED_USD_30D, "5"), (CAP_GLOBAL_USD_30D, "100")]).is_empty());
        let off = warned(&[(CAP_UNLINKED_USD_30D, "off")]);
        assert_eq!(off.len(), 1, "{off:?}");
        assert!(
            off[0].starts_with("BRIDLE_CAP_UNLINKED_USD_30D is off"),
            "{off:?}"
        );
        let above = warned(&[(CAP_UNLINKED_USD_30D, "500"), (CAP_GLOBAL_USD_30D, "300")]);
        assert_eq!(above.len(), 1, "{above:?}");
        assert!(above[0].contains("($500.00) is not below"), "{above:?}");
        assert!(above[0].contains("($300.00)"), "{above:?}");
        let equal = warned(&[(CAP_UNLINKED_USD_30D, "300"), (CAP_GLOBAL_USD_30D, "300")]);
        assert_eq!(equal.len(), 1, "{equal:?}");
        let no_global = warned(&[(CAP_GLOBAL_USD_30D, "off")]);
        assert_eq!(no_global.len(), 1, "{no_global:?}");
        assert!(
            no_global[0].starts_with("BRIDLE_CAP_GLOBAL_USD_30D is off"),
            "{no_global:?}"
        );
        // Both off: everyone's is what matters, said once.
        let both = warned(&[(CAP_UNLINKED_USD_30D, "off"), (CAP_GLOBAL_USD_30D, "off")]);
        assert_eq!(both.len(), 1, "{both:?}");
    }

    #[test]
    fn defaults_when_nothing_is_set() {
        let c = BudgetConfig::from_vars(vars(&[])).unwrap();
        assert_eq!(c, BudgetConfig::default());
        assert_eq!(c.conversation_messages_per_hour.limit, Some(60));
        assert_eq!(c.user_usd_30d.source, Source::Default);
    }

    #[test]
    fn an_sms_segment_costs_what_finance_sets_and_nothing_else_is_taken() {
        assert_eq!(BudgetConfig::default().sms_segment_usd, 8_300);
        let c = BudgetConfig::from_vars(vars(&[(SMS_USD_PER_SEGMENT, "$0.0525")])).unwrap();
        assert_eq!(c.sms_segment_usd, 52_500);
        assert_eq!(
            c.sms_segment_usd_source,
            Source::Env(SMS_USD_PER_SEGMENT.into())
        );
        let c = BudgetConfig::from_vars(vars(&[(SMS_USD_PER_SEGMENT, "0")])).unwrap();
        assert_eq!(c.sms_segment_usd, 0, "0: not counted");
        for bad in ["off", "-1", "0.0000001", "8 cents"] {
            assert!(
                BudgetConfig::from_vars(vars(&[(SMS_USD_PER_SEGMENT, bad)])).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn variables_override_and_are_named_as_the_source() {
        let c = BudgetConfig::from_vars(vars(&[
            (CAP_USER_TOKENS_PER_MINUTE, "5_000"),
            (CAP_USER_USD_30D, "12.50"),
            (CAP_GLOBAL_USD_30D, "off"),
            (OUTPUT_ALLOWANCE, "500"),
            (MIN_OUTPUT_TOKENS, "200"),
        ]))
        .unwrap();
        assert_eq!(c.user_tokens_per_minute.limit, Some(5_000));
        assert_eq!(
            c.user_tokens_per_minute.source,
            Source::Env(CAP_USER_TOKENS_PER_MINUTE.into())
        );
        assert_eq!(c.user_usd_30d.limit, Some(12_500_000));
        assert_eq!(c.global_usd_30d.limit, None);
        assert_eq!(c.output_allowance, 500);
        assert_eq!(c.min_output_tokens, 200);
        assert_eq!(
            c.min_output_tokens_source,
            Source::Env(MIN_OUTPUT_TOKENS.into())
        );
        assert_eq!(c.user_tokens_per_hour.source, Source::Default);
    }

    #[test]
    fn every_bad_value_is_reported_at_once() {
        let err = BudgetConfig::from_vars(vars(&[
            (CAP_USER_TOKENS_PER_HOUR, "lots"),
            (CAP_GLOBAL_USD_30D, "-5"),
            (PRICES_FILE, "/nonexistent/prices.json"),
            (MIN_OUTPUT_TOKENS, "some"),
        ]))
        .unwrap_err()
        .to_string();
        for needle in [
            CAP_USER_TOKENS_PER_HOUR,
            CAP_GLOBAL_USD_30D,
            "/nonexistent/prices.json",
            MIN_OUTPUT_TOKENS,
        ] {
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn a_price_file_from_the_environment_is_merged() {
        let file = tempfile::Builder::new()
            .prefix("bridle-prices-")
            .suffix(".json")
            .tempfile()
            .unwrap();
        let path = file.path();
        std::fs::write(
            path,
            r#"{"models": {"my-model": {"input": 1, "output": 2, "cache_read": 0, "cache_write": 0}}}"#,
        )
        .unwrap();
        let path_s = path.display().to_string();
        let c = BudgetConfig::from_vars(vars(&[(PRICES_FILE, &path_s)])).unwrap();
        let (_, entry) = c.prices.lookup("my-model");
        assert_eq!(entry.price.output, 2_000_000);
        assert_eq!(entry.source, Source::File(path_s));
    }
}
