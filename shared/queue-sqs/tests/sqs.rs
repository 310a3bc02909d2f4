//! What the SQS adapter does on the wire, read back through the SDK: group ordering, the
//! redrive to the dead-letter queue, SQS's dedupe, the message body, stale receipts, poison
//! messages. Against moto_server (`AWS_ENDPOINT_URL`), each test on a queue of its own.

mod common;

use aws_sdk_sqs::types::{Message, MessageSystemAttributeName, QueueAttributeName};
use common::{TestQueue, ids, job};
use queue::{Enqueued, JobQueue, QueueError, QueueSettings, TurnJob};
use queue_sqs::{decode_job, sqs_id};
use serde_json::json;
use std::time::Duration;

/// A WhatsApp message whose group (a phone number with spaces) and dedupe key (a non-ASCII
/// message id) SQS does not take as ids, so the adapter sends their hashes.
fn whatsapp_job() -> TurnJob {
    TurnJob {
        trace_context: Default::default(),
        channel: "whatsapp".into(),
        message_id: "wamid.HBgLMzQ2\u{e9}==".into(),
        conversation_key: "+34 600 00 00 00".into(),
        ..job("unused", "unused")
    }
}

/// Every message in `queue_url` that is visible now, read raw with all its system attributes.
async fn read_raw(q: &TestQueue, queue_url: &str, wait_secs: i32) -> Vec<Message> {
    q.client
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(wait_secs)
        .message_system_attribute_names(MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap()
        .messages
        .unwrap_or_default()
}

fn attribute(message: &Message, name: MessageSystemAttributeName) -> Option<&str> {
    message.attributes()?.get(&name).map(String::as_str)
}

fn assert_stale(result: Result<(), QueueError>, what: &str) {
    assert!(
        matches!(result, Err(QueueError::StaleReceipt)),
        "{what} must be StaleReceipt, got {result:?}"
    );
}

#[tokio::test]
async fn three_groups_each_deliver_in_order_one_job_at_a_time() {
    let q = TestQueue::new(QueueSettings::default()).await;
    for n in 1..=3 {
        for group in ["A", "B", "C"] {
            q.enqueue(&job(group, &format!("{group}{n}")))
                .await
                .unwrap();
        }
    }

    for n in 1..=3 {
        let got = q.receive(10, Duration::ZERO).await.unwrap();
        let mut delivered = ids(&got);
        delivered.sort_unstable();
        let expected = ["A", "B", "C"].map(|group| format!("{group}{n}"));
        assert_eq!(
            delivered, expected,
            "receive {n} must deliver each group's next job, one per group"
        );
        let more = q.receive(10, Duration::ZERO).await.unwrap();
        assert!(
            more.is_empty(),
            "nothing may come while every group's head is in flight, got {:?}",
            ids(&more)
        );
        for delivery in &got {
            assert_eq!(delivery.receive_count, 1);
            q.ack(&delivery.receipt).await.unwrap();
        }
    }
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_job_received_max_receives_times_moves_to_the_dead_letter_queue() {
    let settings = QueueSettings {
        max_receives: 2,
        ..QueueSettings::default()
    };
    let q = TestQueue::new(settings).await;
    let doomed = job("A", "a1");
    q.enqueue(&doomed).await.unwrap();
    q.enqueue(&job("A", "a2")).await.unwrap();

    let mut last_receipt = String::new();
    for round in 1..=2 {
        let got = q.receive(10, Duration::ZERO).await.unwrap();
        assert_eq!(ids(&got), ["a1"], "receive {round}");
        assert_eq!(got[0].receive_count, round);
        last_receipt = got[0].receipt.clone();
        q.release(&last_receipt).await.unwrap();
    }
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(
        ids(&got),
        ["a2"],
        "after 2 receives a1 must be gone and its group go on"
    );

    let dead = read_raw(&q, &q.dlq_url, 0).await;
    assert_eq!(
        dead.len(),
        1,
        "the dead-letter queue must hold a1: {dead:?}"
    );
    assert_eq!(decode_job(dead[0].body().unwrap()).unwrap(), doomed);
    assert_eq!(
        attribute(&dead[0], MessageSystemAttributeName::MessageGroupId),
        Some("web#A#user-1")
    );
    assert_stale(q.ack(&last_receipt).await, "acking a dead job's receipt");
}

#[tokio::test]
async fn the_same_dedupe_key_within_the_window_is_one_message() {
    let q = TestQueue::new(QueueSettings::default()).await;
    let original = job("A", "m1");
    let retry = TurnJob {
        trace_context: Default::default(),
        text: "a webhook retry with a different body".into(),
        ..original.clone()
    };
    let hashed = whatsapp_job();

    for job in [&original, &retry, &hashed, &hashed] {
        assert_eq!(
            q.enqueue(job).await.unwrap(),
            Enqueued::Accepted,
            "SQS does not tell a sender it dropped a duplicate"
        );
    }
    let attributes = q
        .client
        .get_queue_attributes()
        .queue_url(&q.queue_url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .unwrap();
    assert_eq!(
        attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::ApproximateNumberOfMessages))
            .map(String::as_str),
        Some("2"),
        "two keys, each sent twice, must be two messages"
    );

    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["m1", hashed.message_id.as_str()]);
    assert_eq!(
        got[0].job, original,
        "the first enqueue's job is the one kept"
    );
    for delivery in &got {
        q.ack(&delivery.receipt).await.unwrap();
    }
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_message_is_the_versioned_job_with_its_group_and_dedupe_ids() {
    let q = TestQueue::new(QueueSettings::default()).await;
    let plain = job("A", "m1");
    let hashed = whatsapp_job();
    q.enqueue(&plain).await.unwrap();
    q.enqueue(&hashed).await.unwrap();

    let messages = read_raw(&q, &q.queue_url, 0).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    for (sent, group_id, dedupe_id) in [
        (&plain, "web#A#user-1".to_owned(), "web#m1".to_owned()),
        (
            &hashed,
            sqs_id(&hashed.group()),
            sqs_id(&hashed.dedupe_key()),
        ),
    ] {
        let message = messages
            .iter()
            .find(|m| decode_job(m.body().unwrap()).unwrap().message_id == sent.message_id)
            .unwrap_or_else(|| panic!("{} was not sent: {messages:?}", sent.message_id));
        let body: serde_json::Value = serde_json::from_str(message.body().unwrap()).unwrap();
        assert_eq!(
            body,
            json!({ "v": 1, "job": serde_json::to_value(sent).unwrap() })
        );
        assert_eq!(
            attribute(message, MessageSystemAttributeName::MessageGroupId),
            Some(group_id.as_str())
        );
        assert_eq!(
            attribute(message, MessageSystemAttributeName::MessageDeduplicationId),
            Some(dedupe_id.as_str())
        );
    }
    assert_eq!(
        sqs_id(&hashed.group()).len(),
        64,
        "a group with spaces goes as its SHA-256"
    );
}

#[tokio::test]
async fn a_receipt_is_stale_once_its_message_is_deleted() {
    let q = TestQueue::new(QueueSettings::default()).await;
    q.enqueue(&job("A", "a1")).await.unwrap();
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a1"]);

    q.ack(&got[0].receipt).await.unwrap();
    assert_stale(
        q.release(&got[0].receipt).await,
        "releasing a deleted message's receipt",
    );
    // A second DeleteMessage with the same receipt: moto accepts it, so it is not asserted.
    assert_stale(q.ack("no-such-receipt").await, "acking an unknown receipt");
    assert_stale(
        q.release("no-such-receipt").await,
        "releasing an unknown receipt",
    );
    assert_stale(q.ack("").await, "acking an empty receipt");
}

#[tokio::test]
async fn an_undecodable_message_is_skipped_and_left_for_the_dead_letter_queue() {
    let settings = QueueSettings {
        visibility_timeout: Duration::from_secs(1),
        max_receives: 2,
        ..QueueSettings::default()
    };
    let q = TestQueue::new(settings).await;
    let poison = json!({ "v": 2, "job": { "from": "a newer webhook" } }).to_string();
    q.client
        .send_message()
        .queue_url(&q.queue_url)
        .message_group_id("web#P")
        .message_deduplication_id("web#p1")
        .message_body(&poison)
        .send()
        .await
        .unwrap();
    q.enqueue(&job("B", "b1")).await.unwrap();

    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(
        ids(&got),
        ["b1"],
        "an unknown version is not delivered, and does not stop the rest"
    );
    q.ack(&got[0].receipt).await.unwrap();

    // Not deleted: it comes back after its visibility timeout, is skipped again, and once its
    // 2 receives are spent the redrive policy moves it (moto does so on the next receive).
    let got = q.receive(10, Duration::from_secs(4)).await.unwrap();
    assert!(
        got.is_empty(),
        "the poison message must never be delivered: {:?}",
        ids(&got)
    );
    let dead = read_raw(&q, &q.dlq_url, 2).await;
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(dead[0].body(), Some(poison.as_str()));
}
