//! The dead-letter queue, for an operator: what is in it, and moving jobs back to the queue
//! (`bridle jobs dead` / `bridle jobs retry` on AWS).
//!
//! SQS FIFO hands out a conversation's messages only in order, and none of a conversation
//! while one of its messages is in flight, so a look at the dead letters sees each
//! conversation's oldest ones (up to ten at a time); [`DeadLetterView::more`] says how many wait
//! behind them. Looking hides what it sees for a moment and then shows it again at once
//! (`ChangeMessageVisibility` 0). A redrive sends each job to the queue in the order received,
//! in its own group, with a fresh deduplication id (SQS would drop a resend of the original
//! within its 5-minute window), then deletes it from the dead letters. Crash story: a crash
//! between the send and the delete leaves the job in both; the worker's claim record runs it
//! once, and the next redrive sends it again harmlessly.

use crate::CALL_DEADLINE;
use crate::deadline::within;
use crate::error::{receipt, send, unavailable};
use crate::wire::{decode_job, sqs_id};
use aws_sdk_sqs::Client;
use aws_sdk_sqs::types::{Message, MessageSystemAttributeName, QueueAttributeName};
use queue::{QueueError, TurnJob};

/// How long a look keeps the dead letters it saw hidden (they are shown again at its end).
const LOOK_SECS: i32 = 30;

/// One message in the dead-letter queue.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadMessage {
    /// SQS's message id: what `bridle jobs retry` takes on AWS.
    pub message_id: String,
    /// The job, or `None` when the body is not one this build reads.
    pub job: Option<TurnJob>,
    /// How many times it was received (before and in the dead-letter queue).
    pub receive_count: u32,
    /// When it was first sent, in Unix milliseconds.
    pub sent_at_ms: i64,
}

/// What a look at the dead letters saw.
#[derive(Debug, Clone, PartialEq)]
pub struct DeadLetterView {
    pub messages: Vec<DeadMessage>,
    /// About how many more wait behind those seen (SQS's approximate count).
    pub more: usize,
}

/// The dead letters at `dlq_url` that SQS hands out now (see the module docs).
pub async fn dead_letters(client: &Client, dlq_url: &str) -> Result<DeadLetterView, QueueError> {
    let seen = look(client, dlq_url).await?;
    let total = approximate_count(client, dlq_url).await?;
    let mut messages = Vec::new();
    for message in &seen {
        messages.push(dead_message(message));
        show_again(client, dlq_url, message).await?;
    }
    Ok(DeadLetterView {
        more: total.saturating_sub(messages.len()),
        messages,
    })
}

/// Move the dead letter `message_id` (or every one, with `None`) from `dlq_url` back to
/// `queue_url`; returns how many moved. With `None`, moving unblocks each conversation's next
/// dead letters, so it goes on until the dead-letter queue hands out nothing.
pub async fn redrive(
    client: &Client,
    dlq_url: &str,
    queue_url: &str,
    message_id: Option<&str>,
) -> Result<usize, QueueError> {
    let mut moved = 0;
    loop {
        let seen = look(client, dlq_url).await?;
        if seen.is_empty() {
            return Ok(moved);
        }
        let mut moved_now = 0;
        for message in &seen {
            if message_id.is_none_or(|id| message.message_id() == Some(id)) {
                move_back(client, queue_url, dlq_url, message).await?;
                moved_now += 1;
            } else {
                show_again(client, dlq_url, message).await?;
            }
        }
        moved += moved_now;
        if message_id.is_some() || moved_now == 0 {
            return Ok(moved);
        }
    }
}

/// Every message SQS hands out now, hidden for [`LOOK_SECS`].
async fn look(client: &Client, dlq_url: &str) -> Result<Vec<Message>, QueueError> {
    let mut seen: Vec<Message> = Vec::new();
    loop {
        let receive = client
            .receive_message()
            .queue_url(dlq_url)
            .max_number_of_messages(10)
            .visibility_timeout(LOOK_SECS)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .send();
        let got = within(CALL_DEADLINE, "ReceiveMessage", receive)
            .await?
            .map_err(unavailable)?
            .messages
            .unwrap_or_default();
        if got.is_empty() {
            return Ok(seen);
        }
        seen.extend(got);
    }
}

async fn approximate_count(client: &Client, dlq_url: &str) -> Result<usize, QueueError> {
    let get = client
        .get_queue_attributes()
        .queue_url(dlq_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send();
    let attributes = within(CALL_DEADLINE, "GetQueueAttributes", get)
        .await?
        .map_err(unavailable)?
        .attributes
        .unwrap_or_default();
    Ok([
        QueueAttributeName::ApproximateNumberOfMessages,
        QueueAttributeName::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .filter_map(|name| attributes.get(name)?.parse::<usize>().ok())
    .sum())
}

fn dead_message(message: &Message) -> DeadMessage {
    let attribute = |name: MessageSystemAttributeName| {
        message
            .attributes()
            .and_then(|a| a.get(&name))
            .and_then(|v| v.parse::<i64>().ok())
    };
    DeadMessage {
        message_id: message.message_id().unwrap_or_default().to_owned(),
        job: decode_job(message.body().unwrap_or_default()).ok(),
        receive_count: attribute(MessageSystemAttributeName::ApproximateReceiveCount)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0),
        sent_at_ms: attribute(MessageSystemAttributeName::SentTimestamp).unwrap_or(0),
    }
}

async fn show_again(client: &Client, dlq_url: &str, message: &Message) -> Result<(), QueueError> {
    let change = client
        .change_message_visibility()
        .queue_url(dlq_url)
        .receipt_handle(message.receipt_handle().unwrap_or_default())
        .visibility_timeout(0)
        .send();
    within(CALL_DEADLINE, "ChangeMessageVisibility", change)
        .await?
        .map_err(receipt)?;
    Ok(())
}

/// Send `message` to `queue_url` in its own group, then delete it from the dead letters.
async fn move_back(
    client: &Client,
    queue_url: &str,
    dlq_url: &str,
    message: &Message,
) -> Result<(), QueueError> {
    let id = message.message_id().unwrap_or_default();
    let group = message
        .attributes()
        .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
        .cloned()
        .unwrap_or_else(|| sqs_id(id));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let resend = client
        .send_message()
        .queue_url(queue_url)
        .message_group_id(group)
        .message_deduplication_id(sqs_id(&format!("redrive#{id}#{now_ms}")))
        .message_body(message.body().unwrap_or_default())
        .send();
    within(CALL_DEADLINE, "SendMessage", resend)
        .await?
        .map_err(send)?;
    let delete = client
        .delete_message()
        .queue_url(dlq_url)
        .receipt_handle(message.receipt_handle().unwrap_or_default())
        .send();
    within(CALL_DEADLINE, "DeleteMessage", delete)
        .await?
        .map_err(receipt)?;
    Ok(())
}
