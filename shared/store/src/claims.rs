use crate::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// What [`JobClaims::claim_job`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Nobody ran this job before: run it.
    Fresh,
    /// An earlier attempt's claim expired (the worker died mid-turn): run it, resuming from the
    /// stored transcript. `attempt` counts from 2.
    TakenOver { attempt: u32 },
    /// Another worker holds a live claim until `until_ms`: leave the job alone for now.
    Busy { until_ms: i64 },
    /// The job finished earlier: skip it (a redelivery or a duplicate).
    Done,
}

/// What an attempt that ended without finishing had sent of its turn's reply on a messaging
/// channel: platforms take no idempotency key, so the retry sends only what is missing (all
/// of it went out: nothing, it only records the reply). Kept on the job's claim record by
/// [`JobClaims::release_job`], so a retry in another process (another Lambda environment, a
/// restarted server) finds it too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplySent {
    /// The turn whose reply it is.
    pub turn: u64,
    /// The reply's text as it was given to the sender.
    pub text: String,
    /// The pieces the platform took, in order.
    pub pieces: Vec<String>,
    /// Whether the platform took the reply's reaction.
    pub reacted: bool,
    /// Whether all of it went out.
    pub whole: bool,
}

/// How long a running claim nobody finished is kept past its expiry on DynamoDB, in
/// milliseconds: 30 days. A job that was dead-lettered or given up, or whose worker died for
/// good, leaves one; before, it stayed forever. Past it DynamoDB deletes the claim by its `ttl`
/// (a delivery then claims afresh, as attempt 1 on the lease path and the next attempt on the
/// other: none can come on SQS, which keeps a message 4 days, its dead-letter queue 14, and a
/// redriven one 4 more). SQLite keeps running claims (the local queue keeps a dead letter until
/// `bridle jobs retry`, whenever that is); its sweep deletes done claims past their keep.
pub const KEEP_ABANDONED_MS: i64 = 30 * 24 * 3_600_000;

/// Claim records for turn jobs: at most one worker runs a job at a time, and a finished job is
/// never run again. Adapters implement `claim_job` as one conditional write (no read-then-write
/// race): the claim succeeds only if no record exists or the existing one is in progress and
/// expired. A done record is kept until its job's `keep_until_ms`, then counts as absent; a
/// running one on DynamoDB goes [`KEEP_ABANDONED_MS`] past its expiry.
#[async_trait]
pub trait JobClaims: Send + Sync {
    /// Try to claim `job_key` for a run that must end before `expires_at_ms`.
    async fn claim_job(
        &self,
        job_key: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<Claim, StoreError>;

    /// The job is done. The record is kept at least until `keep_until_ms` (then it may expire),
    /// so redeliveries and duplicates arriving before then are skipped.
    async fn finish_job(&self, job_key: &str, keep_until_ms: i64) -> Result<(), StoreError>;

    /// Attempt `attempt` (1 for a [`Claim::Fresh`] claim, `n` for `TakenOver { attempt: n }`)
    /// ended without finishing: let the next delivery take the job over at once instead of
    /// waiting for the claim to expire. Only that attempt's own running claim is released (one
    /// conditional write); a later attempt's claim, or a done job, is left alone. `sent`, what
    /// the attempt sent of its reply, is kept with the claim in the same write (`None` keeps
    /// what an earlier attempt left) until the job is done or claimed afresh.
    async fn release_job(
        &self,
        job_key: &str,
        attempt: u32,
        now_ms: i64,
        sent: Option<&ReplySent>,
    ) -> Result<(), StoreError>;

    /// What the attempts of `job_key` that released it had sent of its reply, if any; `None`
    /// once the job is done.
    async fn reply_sent(&self, job_key: &str) -> Result<Option<ReplySent>, StoreError>;
}
