use crate::StoreError;
use async_trait::async_trait;

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

/// Claim records for turn jobs: at most one worker runs a job at a time, and a finished job is
/// never run again. Adapters implement `claim_job` as one conditional write (no read-then-write
/// race): the claim succeeds only if no record exists or the existing one is in progress and
/// expired.
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
    /// conditional write); a later attempt's claim, or a done job, is left alone.
    async fn release_job(&self, job_key: &str, attempt: u32, now_ms: i64)
    -> Result<(), StoreError>;
}
