//! Making a FIFO queue and its dead-letter queue, for tests and local set-up (on AWS the
//! infrastructure template does it).

use crate::deadline::within;
use crate::error::unavailable;
use crate::{CALL_DEADLINE, visibility_secs};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::QueueAttributeName;
use queue::{QueueError, QueueSettings};

/// SQS's bounds on a redrive policy's `maxReceiveCount`.
const MAX_RECEIVE_COUNT: u32 = 1000;

/// The longest retention SQS offers, for the dead letters: 14 days.
const DLQ_RETENTION_SECS: u32 = 14 * 24 * 60 * 60;

/// Create (or find, if it exists with the same attributes) the FIFO queue `{name}.fifo` and its
/// dead-letter queue `{name}-dlq.fifo`; `name` may end in `.fifo` already. The queue takes
/// `settings.visibility_timeout` as its default and a redrive policy that moves a message to the
/// dead-letter queue once it was received `settings.max_receives` times (1 to 1000). Both have
/// content-based deduplication off: [`SqsQueue`](crate::SqsQueue) sends the dedupe id itself.
///
/// Returns `(queue_url, dlq_url)`.
pub async fn create_fifo_queue_with_dlq(
    client: &Client,
    name: &str,
    settings: &QueueSettings,
) -> Result<(String, String), QueueError> {
    let stem = name.strip_suffix(".fifo").unwrap_or(name);

    let create_dlq = create_fifo(client, &format!("{stem}-dlq.fifo"))
        .attributes(
            QueueAttributeName::MessageRetentionPeriod,
            DLQ_RETENTION_SECS.to_string(),
        )
        .send();
    let dlq_url = within(CALL_DEADLINE, "CreateQueue", create_dlq)
        .await?
        .map_err(unavailable)?
        .queue_url
        .ok_or_else(|| missing("the dead-letter queue's URL"))?;

    let get_arn = client
        .get_queue_attributes()
        .queue_url(&dlq_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send();
    let dlq_arn = within(CALL_DEADLINE, "GetQueueAttributes", get_arn)
        .await?
        .map_err(unavailable)?
        .attributes
        .and_then(|mut attributes| attributes.remove(&QueueAttributeName::QueueArn))
        .ok_or_else(|| missing("the dead-letter queue's ARN"))?;

    let redrive = serde_json::json!({
        "deadLetterTargetArn": dlq_arn,
        "maxReceiveCount": settings.max_receives.clamp(1, MAX_RECEIVE_COUNT),
    });
    let create_queue = create_fifo(client, &format!("{stem}.fifo"))
        .attributes(
            QueueAttributeName::VisibilityTimeout,
            visibility_secs(settings.visibility_timeout).to_string(),
        )
        .attributes(QueueAttributeName::RedrivePolicy, redrive.to_string())
        .send();
    let queue_url = within(CALL_DEADLINE, "CreateQueue", create_queue)
        .await?
        .map_err(unavailable)?
        .queue_url
        .ok_or_else(|| missing("the queue's URL"))?;

    Ok((queue_url, dlq_url))
}

fn create_fifo(
    client: &Client,
    name: &str,
) -> aws_sdk_sqs::operation::create_queue::builders::CreateQueueFluentBuilder {
    client
        .create_queue()
        .queue_name(name)
        .attributes(QueueAttributeName::FifoQueue, "true")
        .attributes(QueueAttributeName::ContentBasedDeduplication, "false")
}

/// SQS answered without something it always sends.
fn missing(what: &str) -> QueueError {
    QueueError::Unavailable(format!("SQS answered without {what}").into())
}
