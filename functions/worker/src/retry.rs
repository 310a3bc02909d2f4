//! When a failed record comes back. SQS would hold it for the queue's whole visibility timeout
//! (30 minutes in the templates), stalling its conversation; instead the worker sets the
//! record's visibility to the same backoff as the local queue (`queue::retry_backoff` by
//! `ApproximateReceiveCount`) with `ChangeMessageVisibility` on its receipt, before reporting it
//! failed. FIFO order is kept: SQS holds the rest of the group back while the record is in
//! flight, so the group's later records in the batch (reported failed without running) are
//! made visible at once and wait behind it.

use crate::Worker;
use aws_lambda_events::sqs::SqsMessage;
use queue::{JobQueue, QueueSettings};
use queue_sqs::SqsQueue;
use std::time::Duration;

/// How many times SQS has handed out this record (1 on the first delivery).
pub(crate) fn receive_count(record: &SqsMessage) -> u32 {
    record
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// A uniform number in `0.0..=1.0` for the backoff's jitter.
fn jitter() -> f64 {
    let mut b = [0u8; 4];
    match getrandom::fill(&mut b) {
        Ok(()) => f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX),
        Err(_) => 0.5,
    }
}

impl Worker {
    /// How long the failed `record` should stay hidden: the backoff, or `at_least` if that is
    /// later (until the claim still held on its job lapses, since a delivery before then finds
    /// the job busy and spends a receive for nothing; or the wait a platform's rate limit asked
    /// for, since one sooner is refused again); nothing after its last attempt
    /// (the user was told; SQS moves it to the dead-letter queue on its next receive, and the
    /// conversation's later messages need not wait for that).
    pub(crate) fn retry_delay(&self, record: &SqsMessage, at_least: Option<Duration>) -> Duration {
        let receives = receive_count(record);
        if receives >= self.options.max_receives {
            Duration::ZERO
        } else {
            queue::retry_backoff(receives, queue::MAX_RETRY_BACKOFF, jitter())
                .max(at_least.unwrap_or_default())
        }
    }

    /// Make the failed `record` visible again after `delay`. Without an SQS client, or when
    /// SQS refuses, the queue's visibility timeout decides (logged, never fatal: the record is
    /// reported failed either way).
    pub(crate) async fn redeliver_after(&self, record: &SqsMessage, delay: Duration) {
        let Some(client) = &self.options.sqs else {
            return;
        };
        let id = record.message_id.as_deref().unwrap_or_default();
        let arn = record.event_source_arn.as_deref().unwrap_or_default();
        let (Some(url), Some(receipt)) = (
            queue_sqs::queue_url_from_arn(arn),
            record.receipt_handle.as_deref(),
        ) else {
            tracing::warn!(message_id = %id, source = %arn, "a failed record names no SQS queue or receipt; the visibility timeout decides when it comes back");
            return;
        };
        let queue = SqsQueue::new(client.clone(), url, QueueSettings::default());
        match queue.release_after(receipt, delay).await {
            Ok(()) => {
                tracing::info!(message_id = %id, ?delay, "the failed record comes back after its backoff")
            }
            Err(e) => {
                tracing::warn!(message_id = %id, error = %e, "could not set the failed record's backoff; the visibility timeout decides when it comes back")
            }
        }
    }
}
