use crate::StoreError;
use async_trait::async_trait;

/// One counter of the budget ledger: what it counts for (`scope`, e.g. `user:ana` or `global`),
/// which window kind (`window`, e.g. `tokens_1m`), and where that window starts (`start_ms`,
/// aligned by the caller). Adapters treat the three as opaque and keep them as separate fields
/// (a user id inside a scope may hold any character).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BucketKey {
    pub scope: String,
    pub window: String,
    pub start_ms: i64,
}

/// Add `amount` to `bucket`, refused when the bucket would then hold more than `limit`
/// (`None`: no cap, the add always fits). `expires_at_ms` is when the bucket's window has passed
/// and the record may be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub bucket: BucketKey,
    pub amount: u64,
    pub limit: Option<u64>,
    pub expires_at_ms: i64,
}

/// An unconditional change of a bucket (settling a reservation: real minus reserved, so it may
/// be negative). A bucket never reads below zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adjustment {
    pub bucket: BucketKey,
    pub delta: i64,
    pub expires_at_ms: i64,
}

/// What [`BudgetLedger::reserve`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reserve {
    /// Every charge was added.
    Reserved,
    /// Nothing was added: `bucket` (the first in charge order that would overflow) holds `used`
    /// and its cap is `limit`.
    Tripped {
        bucket: BucketKey,
        used: u64,
        limit: u64,
    },
}

/// A bucket and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketUsage {
    pub bucket: BucketKey,
    pub used: u64,
}

/// The budget ledger: counters per scope and window, reserved before a model call and settled
/// after it.
///
/// [`reserve`](Self::reserve) is all-or-nothing and atomic against every other writer: of any
/// number of concurrent reservations against one bucket, the ones that succeed never take it
/// past its cap. So the only overshoot is settling: a call that used more than it reserved.
#[async_trait]
pub trait BudgetLedger: Send + Sync {
    /// Add every charge, or none when any bucket would pass its cap.
    async fn reserve(&self, charges: &[Charge]) -> Result<Reserve, StoreError>;

    /// Apply each adjustment unconditionally (a bucket that does not exist yet starts at 0).
    async fn adjust(&self, adjustments: &[Adjustment]) -> Result<(), StoreError>;

    /// What each bucket holds now, in the order asked (0 for a bucket never written).
    async fn bucket_usage(&self, buckets: &[BucketKey]) -> Result<Vec<u64>, StoreError>;

    /// Every bucket of the `window` kind that starts at `start_ms`, any scope, ordered by scope.
    /// For reports; adapters may serve it from an eventually consistent index.
    async fn buckets_of_window(
        &self,
        window: &str,
        start_ms: i64,
    ) -> Result<Vec<BucketUsage>, StoreError>;
}
