//! The webhook's EMF metrics: accepted deliveries by channel, rejects by reason.

use channels::generic::GenericChannel;
use queue::QueueSettings;
use queue_sqlite::SqliteQueue;
use serde_json::Value;
use std::sync::Arc;
use webhook::Webhook;

const NOW: i64 = 1_800_000_000;

fn event(name: &str) -> String {
    let path = format!("{}/../../events/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

#[tokio::test]
async fn accepted_and_rejected_deliveries_are_counted() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let (metrics, lines) = metrics::Metrics::capture("Bridle");
    let hook = Webhook::new(
        vec![Arc::new(GenericChannel::new(
            "test-secret-0123456789abcdef-0123",
        ))],
        queue,
        4096,
    )
    .with_metrics(metrics);
    let message = event("apigw-generic-message");
    let req = lambda_http::request::from_str(&message).unwrap();
    assert_eq!(
        webhook::lambda::handle(&hook, req, NOW * 1000)
            .await
            .status(),
        200
    );
    let mut tampered: Value = serde_json::from_str(&message).unwrap();
    tampered["body"] = Value::String("{\"tampered\":true}".into());
    let req = lambda_http::request::from_str(&tampered.to_string()).unwrap();
    assert_eq!(
        webhook::lambda::handle(&hook, req, NOW * 1000)
            .await
            .status(),
        401
    );

    let lines: Vec<Value> = lines
        .lock()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["WebhookAccepted"], 1.0);
    assert_eq!(lines[0]["Channel"], "generic");
    assert_eq!(lines[1]["WebhookRejects"], 1.0);
    assert_eq!(lines[1]["Reason"], "bad_signature");
}
