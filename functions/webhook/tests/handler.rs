//! The webhook handler on the sample API Gateway events in `events/`.

use async_trait::async_trait;
use channels::generic::{GenericChannel, sign};
use lambda_http::Body;
use queue::{Delivery, Enqueued, JobQueue, QueueError, QueueSettings, TurnJob};
use queue_sqlite::SqliteQueue;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use webhook::Webhook;

const NOW: i64 = 1_800_000_000;
const SECRET: &str = "test-secret-0123456789abcdef-0123";

fn event(name: &str) -> String {
    let path = format!("{}/../../events/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(path).unwrap()
}

fn webhook(queue: Arc<dyn JobQueue>, max_body: usize) -> Webhook {
    Webhook::new(vec![Arc::new(GenericChannel::new(SECRET))], queue, max_body)
}

async fn call(webhook: &Webhook, event_json: &str, now_s: i64) -> (u16, Value) {
    let req = lambda_http::request::from_str(event_json).expect("a valid API Gateway event");
    let res = webhook::lambda::handle(webhook, req, now_s * 1000).await;
    let status = res.status().as_u16();
    let body = match res.body() {
        Body::Text(t) => serde_json::from_str(t).unwrap(),
        other => panic!("unexpected body {other:?}"),
    };
    (status, body)
}

/// An event with its body replaced and re-signed.
fn with_body(event_json: &str, body: &str) -> String {
    let mut e: Value = serde_json::from_str(event_json).unwrap();
    e["body"] = json!(body);
    e["headers"]["x-bridle-signature"] = json!(sign(SECRET.as_bytes(), NOW, body.as_bytes()));
    e.to_string()
}

async fn queued(queue: &SqliteQueue) -> Vec<TurnJob> {
    let got = queue.receive(10, Duration::ZERO).await.unwrap();
    got.into_iter().map(|d| d.job).collect()
}

#[tokio::test]
async fn a_signed_message_is_enqueued_once() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = webhook(queue.clone(), 4096);
    let message = event("apigw-generic-message");
    assert_eq!(
        call(&hook, &message, NOW).await,
        (200, json!({"status": "queued", "count": 1}))
    );
    // The platform retries the same delivery: acknowledged, not queued again.
    assert_eq!(
        call(&hook, &message, NOW + 10).await,
        (200, json!({"status": "queued", "count": 0}))
    );
    let jobs = queued(&queue).await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(
        (
            job.channel.as_str(),
            job.message_id.as_str(),
            job.conversation_key.as_str()
        ),
        ("generic", "m-1001", "c-7")
    );
    assert_eq!(job.external_user_id, "u-42");
    assert_eq!(job.text, "What's on my list? été");
    assert_eq!(job.received_at_ms, NOW * 1000);
}

#[tokio::test]
async fn refusals_map_to_statuses_without_internals() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = webhook(queue.clone(), 4096);
    let message = event("apigw-generic-message");

    let (status, body) = call(&hook, &event("apigw-generic-bad-signature"), NOW).await;
    assert_eq!(
        (status, body),
        (401, json!({"error": "signature check failed"}))
    );

    // A captured delivery replayed an hour later.
    assert_eq!(call(&hook, &message, NOW + 3600).await.0, 401);

    let (status, body) = call(&hook, &event("apigw-generic-status"), NOW).await;
    assert_eq!((status, body), (200, json!({"status": "ignored"})));

    let (status, body) = call(&hook, &with_body(&message, "{not json"), NOW).await;
    assert_eq!(
        (status, body),
        (400, json!({"error": "malformed delivery"}))
    );

    // Ids that would not fit the store's keys: refused at the door, whichever it is, and one
    // byte under the limit is queued (checked at the end: only it reaches the queue).
    for field in ["id", "user", "conversation"] {
        let mut payload = json!({"type": "message", "id": "m-1", "user": "u-1",
            "conversation": "c-1", "text": "hi"});
        payload[field] = json!("é".repeat(128) + "x");
        let (status, body) = call(&hook, &with_body(&message, &payload.to_string()), NOW).await;
        assert_eq!(
            (status, body),
            (400, json!({"error": "malformed delivery"})),
            "a 257-byte {field}"
        );
    }
    let longest = json!({"type": "message", "id": "é".repeat(128), "user": "u".repeat(256),
        "conversation": "c".repeat(256), "text": "hi"});
    let (status, _) = call(&hook, &with_body(&message, &longest.to_string()), NOW).await;
    assert_eq!(status, 200);

    let big = format!("{{\"type\":\"message\",\"text\":\"{}\"}}", "x".repeat(5000));
    let (status, body) = call(&hook, &with_body(&message, &big), NOW).await;
    assert_eq!(
        (status, body),
        (413, json!({"error": "body over the 4096-byte limit"}))
    );

    let elsewhere = message.replace("/webhooks/generic", "/webhooks/myspace");
    assert_eq!(call(&hook, &elsewhere, NOW).await.0, 404);

    let get = message.replace("\"method\": \"POST\"", "\"method\": \"GET\"");
    assert_eq!(call(&hook, &get, NOW).await.0, 405);

    // A content type the platform never sends (a form post from a web page, say).
    let form = message.replace(
        "\"content-type\": \"application/json\"",
        "\"content-type\": \"text/plain; charset=utf-8\"",
    );
    assert_ne!(form, message);
    let (status, body) = call(&hook, &form, NOW).await;
    assert_eq!(
        (status, body),
        (
            415,
            json!({"error": "this webhook takes the content type its platform sends"})
        )
    );

    let queued: Vec<_> = queued(&queue)
        .await
        .into_iter()
        .map(|job| job.message_id)
        .collect();
    assert_eq!(queued, ["é".repeat(128)], "nothing refused was queued");
}

/// A queue that is down.
struct DownQueue;

#[async_trait]
impl JobQueue for DownQueue {
    async fn enqueue(&self, _: &TurnJob) -> Result<Enqueued, QueueError> {
        Err(QueueError::Unavailable(
            "AWS.SimpleQueueService.NonExistentQueue arn:aws:sqs:eu-west-1:123:q".into(),
        ))
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

#[tokio::test]
async fn a_queue_outage_is_a_500_that_names_nothing_internal() {
    let hook = webhook(Arc::new(DownQueue), 4096);
    let (status, body) = call(&hook, &event("apigw-generic-message"), NOW).await;
    assert_eq!(status, 500);
    assert!(!body.to_string().contains("arn:aws"), "{body}");
    assert_eq!(
        body,
        json!({"error": "internal error; the platform will retry"})
    );
}

/// Twilio signs the URL it called. On AWS that is the API's own address, which the stack knows
/// only once it is made: the webhook checks against the domain API Gateway says the request
/// was made to (never the Host header), with no `PUBLIC_BASE_URL` to set (it was the one
/// setting the onboarding link needed too, pointing at the web app). Another domain in the
/// request context, or a forged Host header, does not verify.
#[tokio::test]
async fn a_twilio_message_verifies_against_the_domain_api_gateway_names() {
    const TOKEN: &str = "twilio-test-auth-token-0123456789";
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let twilio = channels::config::inbound(&|name: &str| {
        (name == "TWILIO_AUTH_TOKEN").then(|| TOKEN.to_owned())
    })
    .expect("Twilio needs no PUBLIC_BASE_URL on the Lambda");
    let hook = Webhook::new(twilio, queue.clone(), 64 * 1024);
    let status = |event_json: String| {
        let hook = &hook;
        async move {
            let req = lambda_http::request::from_str(&event_json).unwrap();
            webhook::lambda::handle(hook, req, NOW * 1000)
                .await
                .status()
                .as_u16()
        }
    };
    let message = event("apigw-twilio-message");
    let mut elsewhere: Value = serde_json::from_str(&message).unwrap();
    elsewhere["requestContext"]["domainName"] = json!("attacker.example");
    assert_eq!(status(elsewhere.to_string()).await, 401);
    let mut host_forged: Value = serde_json::from_str(&message).unwrap();
    host_forged["requestContext"]["domainName"] =
        json!("other.execute-api.eu-west-1.amazonaws.com");
    host_forged["headers"]["host"] = json!("abc123.execute-api.eu-west-1.amazonaws.com");
    assert_eq!(status(host_forged.to_string()).await, 401);
    assert!(queued(&queue).await.is_empty());

    assert_eq!(status(message).await, 200);
    let jobs = queued(&queue).await;
    assert_eq!(jobs.len(), 1);
    assert_eq!(
        (jobs[0].channel.as_str(), jobs[0].text.as_str()),
        ("twilio", "What's on my list?")
    );
    assert_eq!(jobs[0].external_user_id, "+15550100");
}
