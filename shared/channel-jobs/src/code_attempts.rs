//! How many link codes one platform sender may try: [`MAX_CODE_TRIES_PER_HOUR`] per clock hour,
//! counted in the store's budget ledger (one counter per sender and hour, window
//! [`WINDOW`]), so both stores hold it and concurrent jobs of one sender cannot exceed it. A
//! code that links is given back: what is limited is failed redemptions. Once the hour's tries
//! are spent, no code is looked up at all until the next hour: a sender stuffing messages with
//! guesses costs one refused ledger write per message.

use queue::TurnJob;
use store::{Adjustment, BucketKey, Charge, Reserve, Store, StoreError};

/// Link codes one sender may try in a clock hour (a code that links is not counted).
pub const MAX_CODE_TRIES_PER_HOUR: u64 = 5;
/// The ledger's window kind for these counters (never one of the budget's, so no budget report
/// lists them).
pub const WINDOW: &str = "link_code_tries_1h";
const HOUR_MS: i64 = 3_600_000;

/// Whether a code may be tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Try {
    /// Counted: try it.
    Allowed,
    /// This hour's tries are spent: do not look the code up.
    Spent,
}

/// The counter of `job`'s sender for the hour of `now_ms`.
fn bucket(job: &TurnJob, now_ms: i64) -> BucketKey {
    BucketKey {
        // Channel names never hold `#`, so this names one account.
        scope: format!("link_code:{}#{}", job.channel, job.external_user_id),
        window: WINDOW.to_owned(),
        start_ms: now_ms - now_ms.rem_euclid(HOUR_MS),
    }
}

/// Count one code try of `job`'s sender, unless the hour's tries are spent (one conditional
/// write; nothing is written when they are).
pub async fn take(store: &dyn Store, job: &TurnJob, now_ms: i64) -> Result<Try, StoreError> {
    let bucket = bucket(job, now_ms);
    let charge = Charge {
        expires_at_ms: bucket.start_ms + HOUR_MS,
        bucket,
        amount: 1,
        limit: Some(MAX_CODE_TRIES_PER_HOUR),
    };
    Ok(match store.reserve(&[charge]).await? {
        Reserve::Reserved => Try::Allowed,
        Reserve::Tripped { .. } => Try::Spent,
    })
}

/// Give back the try of a code that linked. Crash story: a failure here leaves one try counted
/// for a code that worked, which costs the sender one of this hour's tries and nothing else, so
/// it is logged and not retried.
pub async fn give_back(store: &dyn Store, job: &TurnJob, now_ms: i64) {
    let bucket = bucket(job, now_ms);
    let adjustment = Adjustment {
        expires_at_ms: bucket.start_ms + HOUR_MS,
        bucket,
        delta: -1,
    };
    if let Err(e) = store.adjust(&[adjustment]).await {
        tracing::warn!(channel = %job.channel, error = %e, "could not give back a linking code's try");
    }
}
