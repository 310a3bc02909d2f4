//! The finance report: per user and window usage, cap and fill; the global fill; the
//! conversations that cost most; and the caps and prices with where each came from. Built from
//! the ledger's current windows; rendered as a table, JSON or CSV ([`render`]) or an SVG chart
//! ([`chart`]).

pub mod chart;
pub mod render;

use crate::bucket::{CONVERSATION_PREFIX, GLOBAL_SCOPE, UNLINKED_SCOPE, USER_PREFIX};
use crate::config::{Cap, Source};
use crate::meter::fraction;
use crate::{Bucket, BudgetConfig, Unit};
use serde::Serialize;
use std::collections::BTreeSet;
use store::{BudgetLedger, StoreError};

/// One bucket of one subject (a user, or everyone).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    /// A user id, or `*` for everyone.
    pub subject: String,
    pub bucket: Bucket,
    pub unit: Unit,
    pub used: u64,
    pub cap: Option<u64>,
    pub fill: f64,
    pub window_start_ms: i64,
    pub window_end_ms: i64,
}

/// A conversation's spend in the current 30-day window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConversationCost {
    pub conversation: String,
    pub usd_micros: u64,
}

/// A cap and its source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapRow {
    pub bucket: Bucket,
    pub unit: Unit,
    pub cap: Option<u64>,
    pub source: Source,
}

/// A model's price (micro-dollars per million tokens) and its source. `model` is `*` for the
/// price of any model not listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PriceRow {
    pub model: String,
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub source: Source,
}

/// The whole report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub generated_at_ms: i64,
    /// The global row first, then the strangers' (senders not linked yet), then each user's
    /// rows (by user id).
    pub usage: Vec<UsageRow>,
    /// Most expensive first.
    pub top_conversations: Vec<ConversationCost>,
    pub caps: Vec<CapRow>,
    pub prices: Vec<PriceRow>,
}

/// The subject of everyone's spend in a report.
pub const EVERYONE: &str = "*";
/// The subject of what replies to senders not linked yet cost ([`Bucket::UnlinkedUsd30d`]).
pub const STRANGERS: &str = "(not linked)";

const USER_BUCKETS: [Bucket; 3] = [
    Bucket::UserTokensMinute,
    Bucket::UserTokensHour,
    Bucket::UserUsd30d,
];

impl Report {
    /// Read the current windows of every bucket and put the report together; at most `top`
    /// conversations.
    pub async fn build(
        ledger: &dyn BudgetLedger,
        config: &BudgetConfig,
        now_ms: i64,
        top: usize,
    ) -> Result<Self, StoreError> {
        let mut usage = Vec::new();
        let row = |subject: &str, b: Bucket, used: u64| {
            let cap = config.cap(b).limit;
            let start = b.start(now_ms);
            UsageRow {
                subject: subject.to_owned(),
                bucket: b,
                unit: b.unit(),
                used,
                cap,
                fill: fraction(used, cap),
                window_start_ms: start,
                window_end_ms: start + b.length_ms(),
            }
        };

        let usd = ledger
            .buckets_of_window(
                Bucket::GlobalUsd30d.window(),
                Bucket::GlobalUsd30d.start(now_ms),
            )
            .await?;
        let global = usd
            .iter()
            .find(|u| u.bucket.scope == GLOBAL_SCOPE)
            .map_or(0, |u| u.used);
        usage.push(row(EVERYONE, Bucket::GlobalUsd30d, global));
        let strangers = usd
            .iter()
            .find(|u| u.bucket.scope == UNLINKED_SCOPE)
            .map_or(0, |u| u.used);
        usage.push(row(STRANGERS, Bucket::UnlinkedUsd30d, strangers));

        let mut per_bucket = Vec::new();
        let mut users = BTreeSet::new();
        for b in USER_BUCKETS {
            let rows = if b.window() == Bucket::GlobalUsd30d.window() {
                usd.clone()
            } else {
                ledger
                    .buckets_of_window(b.window(), b.start(now_ms))
                    .await?
            };
            let rows: Vec<(String, u64)> = rows
                .into_iter()
                .filter_map(|u| {
                    let user = u.bucket.scope.strip_prefix(USER_PREFIX)?.to_owned();
                    Some((user, u.used))
                })
                .collect();
            users.extend(rows.iter().map(|(u, _)| u.clone()));
            per_bucket.push((b, rows));
        }
        for user in &users {
            for (b, rows) in &per_bucket {
                let used = rows.iter().find(|(u, _)| u == user).map_or(0, |(_, n)| *n);
                usage.push(row(user, *b, used));
            }
        }

        let mut top_conversations: Vec<ConversationCost> = usd
            .iter()
            .filter_map(|u| {
                Some(ConversationCost {
                    conversation: u.bucket.scope.strip_prefix(CONVERSATION_PREFIX)?.to_owned(),
                    usd_micros: u.used,
                })
            })
            .collect();
        top_conversations.sort_by(|a, b| {
            b.usd_micros
                .cmp(&a.usd_micros)
                .then_with(|| a.conversation.cmp(&b.conversation))
        });
        top_conversations.truncate(top);

        let caps = [
            Bucket::UserTokensMinute,
            Bucket::UserTokensHour,
            Bucket::UserUsd30d,
            Bucket::GlobalUsd30d,
            Bucket::UnlinkedUsd30d,
            Bucket::ConversationMessagesHour,
        ]
        .into_iter()
        .map(|b| {
            let Cap { limit, source } = config.cap(b).clone();
            CapRow {
                bucket: b,
                unit: b.unit(),
                cap: limit,
                source,
            }
        })
        .collect();
        let price_row = |model: &str, e: &crate::prices::PriceEntry| PriceRow {
            model: model.to_owned(),
            input: e.price.input,
            output: e.price.output,
            cache_read: e.price.cache_read,
            cache_write: e.price.cache_write,
            source: e.source.clone(),
        };
        let mut prices = vec![price_row(EVERYONE, &config.prices.default)];
        prices.extend(
            config
                .prices
                .models
                .iter()
                .map(|(name, e)| price_row(name, e)),
        );

        Ok(Self {
            generated_at_ms: now_ms,
            usage,
            top_conversations,
            caps,
            prices,
        })
    }
}
