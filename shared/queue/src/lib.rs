//! The queue between the webhook and the worker.
//!
//! [`TurnJob`] is the one contract between them: everything the worker needs to run a turn,
//! and nothing the webhook cannot know from a verified request. [`JobQueue`] is the port both
//! adapters implement (the embedded SQLite queue for `bridle serve`, SQS FIFO on AWS) with the
//! same semantics:
//!
//! - FIFO per group (the conversation): a group's next job is not delivered while one of its
//!   jobs is in flight; different groups are delivered in parallel.
//! - A duplicate delivery (same [`TurnJob::dedupe_key`]) within the dedupe window is accepted
//!   and dropped: it never starts a second turn.
//! - A delivered job that is neither acknowledged nor released becomes visible again after the
//!   visibility timeout; a job received `max_receives` times without success goes to the
//!   dead-letter store instead of being delivered again.
//!
//! Depends on serde only; no AWS, no engine.

#[cfg(feature = "test-support")]
pub mod conformance;
mod error;
mod job;

pub use error::QueueError;
pub use job::{JobMedia, TurnJob};

use async_trait::async_trait;
use std::time::Duration;

/// Whether an enqueue started a new job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enqueued {
    Accepted,
    /// The same dedupe key was seen within the window; nothing was queued.
    Duplicate,
}

/// A job handed to a worker. Acknowledge it when done, or release it to retry.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    /// Opaque handle for [`JobQueue::ack`] / [`JobQueue::release`]; valid for this delivery only.
    pub receipt: String,
    pub job: TurnJob,
    /// 1 on the first delivery.
    pub receive_count: u32,
}

/// A job that failed too often, kept for an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetter {
    /// The job's number in its queue (what `bridle jobs retry` takes).
    pub seq: i64,
    pub job: TurnJob,
    pub receive_count: u32,
    pub dead_at_ms: i64,
}

/// The timing knobs every adapter honours. Adapters take them at construction; the
/// conformance suite builds each queue from the settings its check needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSettings {
    /// How long a delivery stays invisible to other receivers before it is delivered again.
    pub visibility_timeout: Duration,
    /// Deliveries without an ack after which a job goes to the dead letters instead.
    pub max_receives: u32,
    /// How long a dedupe key is remembered from its first enqueue.
    pub dedupe_window: Duration,
}

impl Default for QueueSettings {
    /// 15 minutes, 5 receives, 24 hours.
    fn default() -> Self {
        Self {
            visibility_timeout: Duration::from_secs(15 * 60),
            max_receives: 5,
            dedupe_window: Duration::from_secs(24 * 60 * 60),
        }
    }
}

/// The queue port.
#[async_trait]
pub trait JobQueue: Send + Sync {
    /// Queue a job in its group, unless its dedupe key was seen within the dedupe window.
    async fn enqueue(&self, job: &TurnJob) -> Result<Enqueued, QueueError>;

    /// Up to `max` deliveries, at most one per group, oldest first. Waits up to `wait` for work
    /// when none is ready (a long poll), then returns what it has, possibly nothing.
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError>;

    /// The job is done: remove it. A stale receipt (the delivery timed out and was redelivered)
    /// is [`QueueError::StaleReceipt`].
    async fn ack(&self, receipt: &str) -> Result<(), QueueError>;

    /// The job failed: make it visible again now (it keeps its place at the head of its group).
    async fn release(&self, receipt: &str) -> Result<(), QueueError> {
        self.release_after(receipt, Duration::ZERO).await
    }

    /// The job failed: make it visible again after `delay` (a backoff; SQS rounds it up to whole
    /// seconds, at most 12 hours). It keeps its place at the head of its group, so the group's
    /// later jobs wait too: order is kept.
    async fn release_after(&self, receipt: &str, delay: Duration) -> Result<(), QueueError>;

    /// The job was cut short, not failed (its worker is stopping): make it visible again now
    /// and, where the queue can, do not count this delivery against `max_receives`. SQS cannot
    /// take a receive back; there (and by default) this is [`JobQueue::release`].
    async fn put_back(&self, receipt: &str) -> Result<(), QueueError> {
        self.release(receipt).await
    }
}

/// The longest wait between two attempts at a failed job, on either queue: the backoff
/// doubles up to this.
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_secs(60);

/// How long to wait before a failed job's next attempt: exponential in the attempts so far
/// (1 s, 2 s, 4 s, … from `receive_count` 1), capped at `cap`, with "equal jitter": half of it
/// always, plus a random share of the other half (`jitter` in `0.0..=1.0`), so workers that
/// failed together do not retry together and no retry comes at once.
pub fn retry_backoff(receive_count: u32, cap: Duration, jitter: f64) -> Duration {
    let exp = receive_count.saturating_sub(1).min(20);
    let full = Duration::from_secs(1u64 << exp).min(cap);
    full / 2 + (full / 2).mul_f64(jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
mod backoff_tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_half_of_it_jittered() {
        let cap = Duration::from_secs(60);
        assert_eq!(retry_backoff(1, cap, 0.0), Duration::from_millis(500));
        assert_eq!(retry_backoff(1, cap, 1.0), Duration::from_secs(1));
        assert_eq!(retry_backoff(3, cap, 0.0), Duration::from_secs(2));
        assert_eq!(retry_backoff(3, cap, 0.5), Duration::from_secs(3));
        assert_eq!(retry_backoff(30, cap, 1.0), cap);
        assert_eq!(retry_backoff(0, cap, 1.0), Duration::from_secs(1));
    }
}
