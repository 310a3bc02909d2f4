//! `JobQueue`: `SendMessage`, one-message `ReceiveMessage`s, `DeleteMessage` and
//! `ChangeMessageVisibility`.

use crate::deadline::within;
use crate::wire::{decode_job, encode_job, sqs_id};
use crate::{CALL_DEADLINE, SqsQueue, error, visibility_secs, whole_seconds_up};
use async_trait::async_trait;
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName};
use queue::{Delivery, Enqueued, JobQueue, QueueError, TurnJob};
use std::time::{Duration, Instant};

/// The longest single long poll SQS takes.
const MAX_POLL_SECS: u64 = 20;

/// How many undecodable messages one receive steps over before it returns what it has.
const MAX_SKIPPED: usize = 10;

#[async_trait]
impl JobQueue for SqsQueue {
    async fn enqueue(&self, job: &TurnJob) -> Result<Enqueued, QueueError> {
        let body = encode_job(job).map_err(|e| QueueError::Rejected {
            reason: format!("the job does not encode as JSON: {e}"),
        })?;
        let send = self
            .client
            .send_message()
            .queue_url(&self.queue_url)
            .message_group_id(sqs_id(&job.group()))
            .message_deduplication_id(sqs_id(&job.dedupe_key()))
            .message_body(body)
            .send();
        within(CALL_DEADLINE, "SendMessage", send)
            .await?
            .map_err(error::send)?;
        // A duplicate within SQS's window was dropped just the same, but SQS does not say so.
        Ok(Enqueued::Accepted)
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let mut deliveries = Vec::new();
        let deadline = Instant::now().checked_add(Duration::from_secs(whole_seconds_up(wait)));
        let left = || {
            deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            })
        };
        let mut skipped = 0;
        while deliveries.len() < max {
            // Long-poll only while there is nothing to return; then take what is ready now.
            let poll_secs = if deliveries.is_empty() {
                whole_seconds_up(left()).min(MAX_POLL_SECS)
            } else {
                0
            };
            let message = match self.receive_one(poll_secs).await {
                Ok(message) => message,
                Err(err) if !deliveries.is_empty() => {
                    // What was received is in flight: hand it over rather than strand it.
                    tracing::warn!(
                        error = &err as &(dyn std::error::Error + 'static),
                        "SQS receive stopped early"
                    );
                    break;
                }
                Err(err) => return Err(err),
            };
            match message {
                Some(message) => match delivery(&message) {
                    Some(delivery) => deliveries.push(delivery),
                    // Not a job this build can run: it stays in flight (see the crate docs).
                    None => {
                        skipped += 1;
                        if skipped == MAX_SKIPPED {
                            break;
                        }
                    }
                },
                // SQS cannot wait for less than a second: what is left of the wait is spent.
                None if poll_secs == 0 || left() < Duration::from_secs(1) => break,
                None => {}
            }
        }
        Ok(deliveries)
    }

    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        if receipt.is_empty() {
            return Err(QueueError::StaleReceipt);
        }
        let delete = self
            .client
            .delete_message()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            .send();
        within(CALL_DEADLINE, "DeleteMessage", delete)
            .await?
            .map_err(error::receipt)?;
        Ok(())
    }

    async fn release_after(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        if receipt.is_empty() {
            return Err(QueueError::StaleReceipt);
        }
        let change = self
            .client
            .change_message_visibility()
            .queue_url(&self.queue_url)
            .receipt_handle(receipt)
            // Whole seconds, rounded up; SQS allows at most 12 hours.
            .visibility_timeout(delay.as_secs_f64().ceil().min(43_200.0) as i32)
            .send();
        within(CALL_DEADLINE, "ChangeMessageVisibility", change)
            .await?
            .map_err(error::receipt)?;
        Ok(())
    }
}

impl SqsQueue {
    /// At most one message, waiting up to `poll_secs` (≤ 20) for it.
    async fn receive_one(&self, poll_secs: u64) -> Result<Option<Message>, QueueError> {
        let receive = self
            .client
            .receive_message()
            .queue_url(&self.queue_url)
            .max_number_of_messages(1)
            .wait_time_seconds(i32::try_from(poll_secs).unwrap_or(0))
            .visibility_timeout(visibility_secs(self.settings.visibility_timeout))
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send();
        let output = within(
            Duration::from_secs(poll_secs) + CALL_DEADLINE,
            "ReceiveMessage",
            receive,
        )
        .await?
        .map_err(error::unavailable)?;
        Ok(output
            .messages
            .and_then(|messages| messages.into_iter().next()))
    }
}

/// The delivery in `message`, or `None` (logged) when it holds no job this build can run.
fn delivery(message: &Message) -> Option<Delivery> {
    let message_id = message.message_id().unwrap_or("(none)");
    let Some(receipt) = message.receipt_handle() else {
        tracing::warn!(
            message_id,
            "SQS delivered a message without a receipt handle"
        );
        return None;
    };
    let job = match decode_job(message.body().unwrap_or_default()) {
        Ok(job) => job,
        Err(err) => {
            tracing::warn!(
                message_id,
                error = &err as &(dyn std::error::Error + 'static),
                "undecodable job message skipped; it stays in flight until the redrive policy \
                 moves it to the dead-letter queue"
            );
            return None;
        }
    };
    let receive_count = message
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| {
            tracing::warn!(message_id, "SQS sent no ApproximateReceiveCount; taking 1");
            1
        });
    Some(Delivery {
        receipt: receipt.to_owned(),
        job,
        receive_count,
    })
}
