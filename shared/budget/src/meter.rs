//! The usage meter: how full each of a user's buckets is.

use crate::{Bucket, BudgetConfig, Unit};
use serde::Serialize;
use std::sync::Arc;
use store::{BudgetLedger, StoreError};
use transcript::{ConversationId, UserId};

/// One bucket's fill for the meter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fill {
    pub bucket: Bucket,
    pub unit: Unit,
    pub used: u64,
    /// `None`: no cap.
    pub cap: Option<u64>,
    /// `used / cap`, 0 without a cap; may pass 1 after an overshoot.
    pub fraction: f64,
    /// When this window ends and the bucket starts again from zero.
    pub resets_at_ms: i64,
}

/// Reads each spend bucket of a user (their minute and hour tokens, 30-day dollars, and the
/// global 30-day dollars).
#[derive(Clone)]
pub struct Meter {
    ledger: Arc<dyn BudgetLedger>,
    config: Arc<BudgetConfig>,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter").finish_non_exhaustive()
    }
}

impl Meter {
    /// The fill at or above which a meter should be shown.
    pub const SHOW_FROM: f64 = 0.8;

    pub fn new(ledger: Arc<dyn BudgetLedger>, config: Arc<BudgetConfig>) -> Self {
        Self { ledger, config }
    }

    pub async fn fill(&self, user: &UserId, now_ms: i64) -> Result<Vec<Fill>, StoreError> {
        let none = ConversationId::from("");
        let keys: Vec<_> = Bucket::SPEND
            .iter()
            .map(|b| b.key(user, &none, now_ms))
            .collect();
        let used = self.ledger.bucket_usage(&keys).await?;
        Ok(Bucket::SPEND
            .into_iter()
            .zip(keys)
            .zip(used)
            .map(|((b, key), used)| {
                let cap = self.config.cap(b).limit;
                Fill {
                    bucket: b,
                    unit: b.unit(),
                    used,
                    cap,
                    fraction: fraction(used, cap),
                    resets_at_ms: key.start_ms + b.length_ms(),
                }
            })
            .collect())
    }
}

/// `used / cap` for display (0 without a cap; a cap of 0 is full).
pub(crate) fn fraction(used: u64, cap: Option<u64>) -> f64 {
    match cap {
        None => 0.0,
        Some(0) => 1.0,
        Some(cap) => used as f64 / cap as f64,
    }
}
