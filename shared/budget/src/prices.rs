//! The price table: micro-dollars per million tokens, per model, each price with its source.
//!
//! Defaults are compiled in from `prices.json`; an operator file of the same shape
//! (`BRIDLE_PRICES_FILE`) replaces the `default` entry and any model it names, and adds new
//! ones. Prices are decimal strings or numbers of US dollars per million tokens, parsed exactly.

use crate::BudgetError;
use crate::config::Source;
use crate::money::parse_usd;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use transcript::Usage;

/// The compiled-in price file.
pub const DEFAULT_PRICES: &str = include_str!("../prices.json");

/// What one model costs, in micro-dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Price {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

impl Price {
    /// The cost of `usage` in micro-dollars, rounded up once at the end (never per kind), so
    /// sums over many calls do not drift.
    pub fn cost(&self, usage: &Usage) -> u64 {
        let per_million = u128::from(usage.input_tokens) * u128::from(self.input)
            + u128::from(usage.output_tokens) * u128::from(self.output)
            + u128::from(usage.cache_read_tokens) * u128::from(self.cache_read)
            + u128::from(usage.cache_write_tokens) * u128::from(self.cache_write);
        u64::try_from(per_million.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}

/// A price and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PriceEntry {
    pub price: Price,
    pub source: Source,
}

/// Prices per model, plus the price of any model not listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PriceTable {
    pub default: PriceEntry,
    pub models: BTreeMap<String, PriceEntry>,
}

impl PriceTable {
    /// The compiled-in table.
    pub fn defaults() -> Self {
        let mut table = Self {
            default: PriceEntry {
                price: Price {
                    input: 0,
                    output: 0,
                    cache_read: 0,
                    cache_write: 0,
                },
                source: Source::Default,
            },
            models: BTreeMap::new(),
        };
        table
            .merge(DEFAULT_PRICES, "built-in prices.json", &Source::Default)
            .expect("the built-in prices.json is valid");
        table
    }

    /// The defaults with the operator file's text merged over them.
    pub fn with_file(path: &str, text: &str) -> Result<Self, BudgetError> {
        let mut table = Self::defaults();
        table.merge(text, path, &Source::File(path.to_owned()))?;
        Ok(table)
    }

    fn merge(&mut self, text: &str, path: &str, source: &Source) -> Result<(), BudgetError> {
        let bad = |problem: String| BudgetError::BadPrices {
            path: path.to_owned(),
            problem,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        let Value::Object(top) = value else {
            return Err(bad("the top level must be an object".into()));
        };
        if let Some(default) = top.get("default") {
            self.default = PriceEntry {
                price: price_of(default).map_err(|p| bad(format!("default: {p}")))?,
                source: source.clone(),
            };
        }
        match top.get("models") {
            None => {}
            Some(Value::Object(models)) => {
                for (name, v) in models {
                    let price = price_of(v).map_err(|p| bad(format!("models.{name}: {p}")))?;
                    self.models.insert(
                        name.clone(),
                        PriceEntry {
                            price,
                            source: source.clone(),
                        },
                    );
                }
            }
            Some(_) => return Err(bad("`models` must be an object".into())),
        }
        Ok(())
    }

    /// The entry for `model`: its exact name, else the longest listed name it contains, else
    /// the default; with the name that matched (`None` for the default).
    pub fn lookup(&self, model: &str) -> (Option<&str>, &PriceEntry) {
        if let Some((name, entry)) = self.models.get_key_value(model) {
            return (Some(name), entry);
        }
        self.models
            .iter()
            .filter(|(name, _)| model.contains(name.as_str()))
            .max_by_key(|(name, _)| name.len())
            .map(|(name, entry)| (Some(name.as_str()), entry))
            .unwrap_or((None, &self.default))
    }

    /// What `usage` on `model` costs, in micro-dollars.
    pub fn cost(&self, model: &str, usage: &Usage) -> u64 {
        self.lookup(model).1.price.cost(usage)
    }
}

fn price_of(value: &Value) -> Result<Price, String> {
    let field = |name: &str| -> Result<u64, String> {
        let text = match value.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => return Err(format!("{name} must be a decimal number, got {other}")),
            None => return Err(format!("{name} is missing")),
        };
        parse_usd(&text).ok_or_else(|| format!("{name}={text:?} is not a plain dollar amount"))
    };
    Ok(Price {
        input: field("input")?,
        output: field("output")?,
        cache_read: field("cache_read")?,
        cache_write: field("cache_write")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: cache_read,
            cache_write_tokens: cache_write,
        }
    }

    #[test]
    fn cost_counts_every_kind_of_token_and_rounds_up_once() {
        // $3 in, $15 out, $0.30 cache read, $3.75 cache write per million.
        let p = Price {
            input: 3_000_000,
            output: 15_000_000,
            cache_read: 300_000,
            cache_write: 3_750_000,
        };
        // 1,000 in = 3,000 µ$; 500 out = 7,500; 10,000 cache read = 3,000; 2,000 write = 7,500.
        assert_eq!(p.cost(&usage(1_000, 500, 10_000, 2_000)), 21_000);
        // One cache-read token costs 0.3 µ$: rounded up to 1, but three of them are 0.9 → 1,
        // not 3 (rounding happens once, at the end).
        assert_eq!(p.cost(&usage(0, 0, 1, 0)), 1);
        assert_eq!(p.cost(&usage(0, 0, 3, 0)), 1);
        assert_eq!(p.cost(&usage(0, 0, 10, 0)), 3);
        // A million of each is exactly the sum of the four prices.
        let m = 1_000_000;
        assert_eq!(p.cost(&usage(m, m, m, m)), 22_050_000);
        assert_eq!(p.cost(&Usage::default()), 0);
        // No overflow with absurd numbers.
        assert_eq!(p.cost(&usage(u64::MAX, u64::MAX, 0, 0)), u64::MAX);
    }

    #[test]
    fn models_match_exactly_then_by_the_longest_contained_name_then_default() {
        let t = PriceTable::defaults();
        let (name, e) = t.lookup("eu.anthropic.claude-3-5-haiku-20241022-v1:0");
        assert_eq!(name, Some("anthropic.claude-3-5-haiku"));
        assert_eq!(e.price.input, 800_000);
        assert_eq!(e.source, Source::Default);
        // "gpt-4o-mini" contains "gpt-4o" too; the longer name wins.
        assert_eq!(t.lookup("gpt-4o-mini").0, Some("gpt-4o-mini"));
        assert_eq!(t.lookup("gpt-4o-2024-08-06").0, Some("gpt-4o"));
        let (name, e) = t.lookup("some-unknown-model");
        assert_eq!(name, None);
        assert_eq!(
            e.price.output, 75_000_000,
            "unknown models get the (dear) default"
        );
    }

    #[test]
    fn an_operator_file_overrides_and_adds_and_says_so() {
        let text = r#"{"default": {"input": 1, "output": 2, "cache_read": 0.5, "cache_write": "0"},
                       "models": {"gpt-4o-mini": {"input": "0.10", "output": 0.4, "cache_read": 0, "cache_write": 0},
                                  "llama3.2": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}}}"#;
        let t = PriceTable::with_file("/etc/bridle/prices.json", text).unwrap();
        let file = Source::File("/etc/bridle/prices.json".into());
        assert_eq!(t.default.price.cache_read, 500_000);
        assert_eq!(t.default.source, file);
        let (_, mini) = t.lookup("gpt-4o-mini");
        assert_eq!((mini.price.input, mini.price.output), (100_000, 400_000));
        assert_eq!(mini.source, file);
        assert_eq!(t.lookup("llama3.2").1.price.output, 0);
        // Untouched entries keep their built-in source.
        assert_eq!(t.lookup("gpt-4o").1.source, Source::Default);
    }

    #[test]
    fn a_broken_price_file_names_the_problem() {
        for (text, needle) in [
            ("not json", "expected"),
            (
                r#"{"models": {"m": {"input": 1}}}"#,
                "models.m: output is missing",
            ),
            (
                r#"{"default": {"input": "-1", "output": 1, "cache_read": 1, "cache_write": 1}}"#,
                "default: input=\"-1\"",
            ),
            (r#"{"models": []}"#, "`models` must be an object"),
        ] {
            let err = PriceTable::with_file("p.json", text)
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{err}");
        }
    }
}
