//! What the adapter's tests share: a client for the local SQS emulator, fresh queues, jobs.

#![allow(dead_code)]

use aws_sdk_sqs::Client;
use aws_sdk_sqs::config::{Credentials, Region};
use queue::conformance::Fidelity;
use queue::{Delivery, QueueSettings, TurnJob};
use queue_sqs::{SqsQueue, create_fifo_queue_with_dlq};
use std::ops::Deref;

/// What SQS, as moto emulates it, can show (see [`Fidelity`]).
pub const MOTO_SQS: Fidelity = Fidelity {
    // SQS itself: SendMessage succeeds whether or not it dropped a duplicate.
    reports_duplicates: false,
    // moto: a FIFO deduplication id counts only while its message is in the queue (SQS keeps
    // it for 5 minutes, acknowledged or not).
    remembers_acknowledged_keys: false,
    // moto: DeleteMessage / ChangeMessageVisibility accept any receipt a message ever had, and
    // a deleted message's receipts again (SQS FIFO answers "The receipt handle has expired",
    // which the adapter maps to StaleReceipt).
    rejects_old_receipts: false,
    // moto: a long poll computes the blocked groups once, when it starts, and wakes only for a
    // new message; a group freed by an ack or a release shows on the next poll.
    wakes_on_ack_and_release: false,
    // SQS cannot take a receive back: a put-back delivery counts, as a release does.
    takes_back_receives: false,
};

/// An SQS client for the emulator at `AWS_ENDPOINT_URL`, with static test credentials: nothing
/// beyond that endpoint is contacted.
pub fn client() -> Client {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        panic!(
            "AWS_ENDPOINT_URL is not set. These tests need a local SQS emulator:\n  \
             pip install 'moto[server]'\n  \
             moto_server -H 127.0.0.1 -p 5000 &\n  \
             export AWS_ENDPOINT_URL=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=test \
             AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1 \
             AWS_EC2_METADATA_DISABLED=true"
        )
    });
    let config = aws_sdk_sqs::Config::builder()
        .behavior_version_latest()
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("test", "test", None, None, "static"))
        .build();
    Client::from_conf(config)
}

/// A queue of its own for one test: a fresh FIFO queue and dead-letter queue, uniquely named.
#[derive(Debug)]
pub struct TestQueue {
    pub queue: SqsQueue,
    pub client: Client,
    pub queue_url: String,
    pub dlq_url: String,
}

impl TestQueue {
    pub async fn new(settings: QueueSettings) -> Self {
        let client = client();
        let name = format!("bridle-test-{}", uuid::Uuid::new_v4().simple());
        let (queue_url, dlq_url) = create_fifo_queue_with_dlq(&client, &name, &settings)
            .await
            .unwrap_or_else(|e| panic!("creating queue {name}: {e:?}"));
        Self {
            queue: SqsQueue::new(client.clone(), queue_url.clone(), settings),
            client,
            queue_url,
            dlq_url,
        }
    }
}

impl Deref for TestQueue {
    type Target = SqsQueue;
    fn deref(&self) -> &SqsQueue {
        &self.queue
    }
}

/// A web message `message_id` in conversation `group`.
pub fn job(group: &str, message_id: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "web".into(),
        message_id: message_id.into(),
        conversation_key: group.into(),
        external_user_id: "user-1".into(),
        text: format!("message {message_id}"),
        button_id: None,
        media: vec![],
        received_at_ms: 1_700_000_000_000,
    }
}

/// The message ids delivered, in order.
pub fn ids(deliveries: &[Delivery]) -> Vec<&str> {
    deliveries
        .iter()
        .map(|d| d.job.message_id.as_str())
        .collect()
}
