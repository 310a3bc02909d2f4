//! The SQS FIFO queue adapter: the [`JobQueue`](queue::JobQueue) port on `aws-sdk-sqs`, for
//! the webhook and worker on AWS.
//!
//! A job is one message: `MessageGroupId` is the job's group (its conversation), so SQS itself
//! keeps a group's next job back while one is in flight; `MessageDeduplicationId` is its dedupe
//! key; the body is the versioned JSON envelope of [`wire`]. Both ids are passed through
//! [`sqs_id`], which keeps a key SQS accepts and hashes any other.
//!
//! Where SQS decides, the port's settings are honoured as closely as SQS allows:
//! - Dedupe is SQS's, for its fixed 5-minute window: `dedupe_window` is not used, and a dropped
//!   duplicate is not visible to the sender (`SendMessage` succeeds either way), so `enqueue`
//!   always answers [`Enqueued::Accepted`](queue::Enqueued::Accepted). Suppressing duplicates
//!   beyond 5 minutes is the worker's job-claim record (a conditional write in the store).
//! - Dead-lettering is the queue's redrive policy (`maxReceiveCount`), set where the queue is
//!   made ([`create_fifo_queue_with_dlq`] for tests and local set-up; the infrastructure
//!   template on AWS); `max_receives` is read only there.
//! - SQS counts time in whole seconds: the visibility timeout and a long poll's wait are rounded
//!   up (at least 1 s of visibility; a wait of more than 20 s is several long polls).
//! - A receive asks SQS for one message at a time, up to `max` times (long-polling only while
//!   it has nothing): SQS FIFO hands out several messages of one group in one batch, and the
//!   port delivers at most one per group. Releasing the extras instead would count a receive
//!   against jobs that never ran, and send them to the dead letters early.
//! - A body this build cannot decode (malformed, or an unknown envelope version) is left in
//!   flight, logged with its message id and not delivered: it comes back after the visibility
//!   timeout and, once the redrive policy's count is spent, moves to the dead-letter queue. (It
//!   holds its group back meanwhile, as any in-flight message does.)
//! - Receipts are SQS receipt handles. SQS FIFO calls one expired as soon as its visibility
//!   timeout passes (the embedded queue keeps it valid until the job is delivered again), and
//!   `ack`/`release` map that, and an unknown or foreign handle, to
//!   [`StaleReceipt`](queue::QueueError::StaleReceipt). Whether a second `ack` of the same
//!   receipt is refused is SQS's call; moto accepts it.
//!
//! Every call has a deadline of its own (see [`CALL_DEADLINE`]), whatever the client's timeout
//! configuration.
//!
//! Depends on the `queue` port, `aws-sdk-sqs` and small utility crates (serde, sonic-rs, sha2,
//! tokio's timer, tracing). Never on the store or the engine.

mod arn;
mod dead_letters;
mod deadline;
mod error;
mod port;
mod setup;
pub mod wire;

pub use arn::queue_url_from_arn;
pub use dead_letters::{DeadLetterView, DeadMessage, dead_letters, redrive};
pub use setup::create_fifo_queue_with_dlq;
pub use wire::{DecodeError, decode_job, encode_job, sqs_id};

use queue::QueueSettings;
use std::time::Duration;

/// How long any SQS call may take beyond its long poll before it is abandoned as
/// [`QueueError::Unavailable`](queue::QueueError::Unavailable).
pub const CALL_DEADLINE: Duration = Duration::from_secs(10);

/// The longest visibility timeout SQS takes: 12 hours.
const MAX_VISIBILITY_SECS: u64 = 12 * 60 * 60;

/// The job queue on an SQS FIFO queue. Cheap to share behind an `Arc`.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: aws_sdk_sqs::Client,
    queue_url: String,
    settings: QueueSettings,
}

impl SqsQueue {
    /// The queue at `queue_url` (a FIFO queue, `ContentBasedDeduplication` off), reached with
    /// `client`. Only `settings.visibility_timeout` is used here (see the crate docs).
    pub fn new(client: aws_sdk_sqs::Client, queue_url: String, settings: QueueSettings) -> Self {
        Self {
            client,
            queue_url,
            settings,
        }
    }

    /// The URL of the queue.
    pub fn queue_url(&self) -> &str {
        &self.queue_url
    }

    /// The settings in force.
    pub fn settings(&self) -> &QueueSettings {
        &self.settings
    }
}

/// A visibility timeout as SQS takes it: whole seconds, rounded up, 1 s to 12 h.
fn visibility_secs(timeout: Duration) -> i32 {
    let secs = whole_seconds_up(timeout).clamp(1, MAX_VISIBILITY_SECS);
    i32::try_from(secs).unwrap_or(i32::MAX)
}

/// `d` in whole seconds, rounded up.
fn whole_seconds_up(d: Duration) -> u64 {
    d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_visibility_timeout_is_whole_seconds_rounded_up_within_sqs_limits() {
        for (timeout, secs) in [
            (Duration::ZERO, 1),
            (Duration::from_millis(200), 1),
            (Duration::from_secs(1), 1),
            (Duration::from_millis(1001), 2),
            (Duration::from_secs(15 * 60), 900),
            (Duration::from_secs(13 * 60 * 60), 43_200),
            (Duration::MAX, 43_200),
        ] {
            assert_eq!(visibility_secs(timeout), secs, "{timeout:?}");
        }
    }
}
