//! Webhook compute per request, 4 KB body: the whole handler (route, size cap, signature check
//! on the raw bytes, typed parse, job, SQS request built exactly as `SqsQueue::enqueue` builds
//! it, minus the network) against the floor of any webhook — one HMAC-SHA256 over the same
//! bytes plus a serde parse of them.
//!
//! `cargo bench -p webhook --bench compute`; the ratio webhook / floor is the overhead.

use async_trait::async_trait;
use aws_sdk_sqs::operation::send_message::SendMessageInput;
use channels::generic::{GenericChannel, sign};
use criterion::{Criterion, criterion_group, criterion_main};
use hmac::{Hmac, Mac};
use queue::{Delivery, Enqueued, JobQueue, QueueError, TurnJob};
use queue_sqs::{encode_job, sqs_id};
use sha2::Sha256;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;
use webhook::{Incoming, Webhook};

const NOW: i64 = 1_800_000_000;
const SECRET: &[u8] = b"bench-secret";

/// Builds the SendMessage request `SqsQueue::enqueue` would send, and drops it.
struct BuildOnly;

#[async_trait]
impl JobQueue for BuildOnly {
    async fn enqueue(&self, job: &TurnJob) -> Result<Enqueued, QueueError> {
        let body = encode_job(job).map_err(|e| QueueError::Rejected {
            reason: e.to_string(),
        })?;
        let input = SendMessageInput::builder()
            .queue_url("https://sqs.eu-west-1.amazonaws.com/123456789012/bridle-turns.fifo")
            .message_group_id(sqs_id(&job.group()))
            .message_deduplication_id(sqs_id(&job.dedupe_key()))
            .message_body(body)
            .build()
            .map_err(|e| QueueError::Rejected {
                reason: e.to_string(),
            })?;
        black_box(input);
        Ok(Enqueued::Accepted)
    }
    async fn receive(&self, _: usize, _: Duration) -> Result<Vec<Delivery>, QueueError> {
        Ok(vec![])
    }
    async fn ack(&self, _: &str) -> Result<(), QueueError> {
        Ok(())
    }
    async fn release_after(&self, _: &str, _: std::time::Duration) -> Result<(), QueueError> {
        Ok(())
    }
}

fn body_4kb() -> Vec<u8> {
    let filler = "Could you move the Spring Open to the Saturday after, and tell everyone? ";
    let mut text = String::new();
    while text.len() < 3900 {
        text.push_str(filler);
    }
    serde_json::json!({
        "type": "message", "id": "m-1001", "user": "u-42", "conversation": "c-7", "text": text
    })
    .to_string()
    .into_bytes()
}

fn bench(c: &mut Criterion) {
    let body = body_4kb();
    assert!((4000..4200).contains(&body.len()), "{}", body.len());
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("x-bridle-timestamp".to_owned(), NOW.to_string()),
        ("x-bridle-signature".to_owned(), sign(SECRET, NOW, &body)),
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    // As deployed: one EMF metric line per accepted delivery, to stdout.
    let webhook = Webhook::new(
        vec![Arc::new(GenericChannel::new(SECRET))],
        Arc::new(BuildOnly),
        webhook::DEFAULT_MAX_BODY_BYTES,
    );
    // The same without the metric line, to show what the line costs.
    let quiet = Webhook::new(
        vec![Arc::new(GenericChannel::new(SECRET))],
        Arc::new(BuildOnly),
        webhook::DEFAULT_MAX_BODY_BYTES,
    )
    .with_metrics(metrics::Metrics::off());
    let mut group = c.benchmark_group("webhook_4kb");
    group.bench_function("floor_hmac_sha256_plus_serde_parse", |b| {
        b.iter(|| {
            let mut mac = Hmac::<Sha256>::new_from_slice(SECRET).unwrap();
            mac.update(black_box(&body));
            let tag = mac.finalize().into_bytes();
            let parsed: serde_json::Value = serde_json::from_slice(black_box(&body)).unwrap();
            black_box((tag, parsed))
        })
    });
    for (name, webhook) in [
        ("webhook_handle_verify_parse_build_sqs_request", &webhook),
        ("webhook_handle_without_the_metric_line", &quiet),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let response = rt.block_on(webhook.handle(Incoming {
                    method: "POST",
                    path: "/webhooks/generic",
                    query: None,
                    headers: &headers,
                    body: black_box(&body),
                    now_ms: NOW * 1000,
                    origin: None,
                }));
                assert_eq!(response.status, 200);
                black_box(response)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
