//! The webhook bootstrap itself (`src/main.rs`), started as Lambda starts it: the built binary,
//! the environment Lambda gives a function, a local Lambda Runtime API that hands it API Gateway
//! events, and the SQS queue in moto (`AWS_ENDPOINT_URL`; `scripts/test` starts it). This is the
//! wiring the handler tests do not reach: configuration from the environment, the SDK clients,
//! the runtime the bootstrap runs on, and what it logs. One test takes its environment from
//! `infra/template.yaml` itself, with the signing secret in Secrets Manager as deployed; a
//! failed init is checked where Lambda sees it, on the Runtime API's `/runtime/init/error`.

use channels::generic::sign;
use fake_lambda::{
    Bootstrap, PostedKind, RuntimeApi, moto_endpoint as moto, moto_secret, moto_secret_rotate,
    template_env,
};
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECRET: &str = "bootstrap-test-secret-0123456789abc";

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// An API Gateway v2 delivery of `body` to the generic channel, signed with `secret` now.
fn delivery(body: &str, secret: &str) -> Value {
    let ts = now_s();
    let mut event: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../../events/apigw-generic-message.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    event["body"] = json!(body);
    event["headers"]["x-bridle-timestamp"] = json!(ts.to_string());
    event["headers"]["x-bridle-signature"] = json!(sign(secret.as_bytes(), ts, body.as_bytes()));
    event
}

/// The secret as the template creates it, holding `GENERIC_WEBHOOK_SECRET` = `secret`, named
/// after `what`; and the bootstrap with the template's environment for it and `queue_url`.
async fn template_bootstrap(
    api: &RuntimeApi,
    queue_url: &str,
    what: &str,
    secret: &str,
) -> (String, Command) {
    let name = format!("webhook-{what}-{}-{}", std::process::id(), now_s());
    let arn = moto_secret(&name, &json!({"GENERIC_WEBHOOK_SECRET": secret})).await;
    let env = template_env(
        "WebhookFunction",
        &[("TurnQueue", queue_url), ("WebhookSecrets", &arn)],
    );
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_webhook"));
    cmd.env_clear()
        .envs(api.lambda_env("webhook"))
        .env("AWS_ENDPOINT_URL", moto())
        .envs(env);
    (arn, cmd)
}

/// The webhook bootstrap with the environment Lambda and the template give it.
fn bootstrap(api: &RuntimeApi, queue_url: &str, secret: Option<&str>) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_webhook"));
    cmd.env_clear()
        .envs(api.lambda_env("webhook"))
        .env("AWS_ENDPOINT_URL", moto())
        .env("QUEUE_URL", queue_url)
        .env("RUST_LOG", "info");
    if let Some(secret) = secret {
        cmd.env("GENERIC_WEBHOOK_SECRET", secret);
    }
    cmd
}

async fn fifo_queue(sqs: &aws_sdk_sqs::Client) -> String {
    let name = format!(
        "bootstrap-{}-{}.fifo",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let (url, _dlq) = queue_sqs::create_fifo_queue_with_dlq(sqs, &name, &Default::default())
        .await
        .unwrap();
    url
}

async fn sqs_client() -> aws_sdk_sqs::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_sqs::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&config)
}

#[tokio::test]
async fn the_bootstrap_serves_deliveries_through_the_runtime_api_onto_the_queue() {
    let sqs = sqs_client().await;
    let queue_url = fifo_queue(&sqs).await;
    let message = r#"{"type": "message", "id": "m-boot-1", "user": "u-9", "conversation": "c-boot", "text": "from the bootstrap"}"#;
    let mut api = RuntimeApi::start([
        ("req-1".into(), delivery(message, SECRET)),
        ("req-2".into(), delivery(message, "not-the-secret")),
        ("req-3".into(), json!({"version": "2.0", "rawPath": 17})),
    ])
    .await
    .unwrap();
    let running = Bootstrap::spawn(bootstrap(&api, &queue_url, Some(SECRET))).unwrap();

    let mut replies = Vec::new();
    for _ in 0..3 {
        replies.push(api.next_posted(Duration::from_secs(60)).await);
    }
    let logs = running.stop().logs;

    let ids: Vec<_> = replies
        .iter()
        .map(|p| (p.kind, p.request_id.as_str()))
        .collect();
    // An event that is not an API Gateway request is that invocation's error, not a crash: the
    // bootstrap stays up for the next one.
    assert_eq!(
        ids,
        [
            (PostedKind::Response, "req-1"),
            (PostedKind::Response, "req-2"),
            (PostedKind::Error, "req-3")
        ]
    );
    let (accepted, refused) = (&replies[0].body, &replies[1].body);
    assert_eq!(accepted["statusCode"], 200, "{accepted}");
    assert_eq!(
        serde_json::from_str::<Value>(accepted["body"].as_str().unwrap()).unwrap(),
        json!({"status": "queued", "count": 1})
    );
    assert_eq!(refused["statusCode"], 401, "{refused}");

    let got = sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
        .send()
        .await
        .unwrap();
    let messages = got.messages();
    assert_eq!(messages.len(), 1, "exactly the signed delivery is queued");
    let job = queue_sqs::decode_job(messages[0].body().unwrap()).unwrap();
    assert_eq!(
        (
            job.channel.as_str(),
            job.message_id.as_str(),
            job.text.as_str()
        ),
        ("generic", "m-boot-1", "from the bootstrap")
    );
    let group = messages[0]
        .attributes()
        .and_then(|a| a.get(&aws_sdk_sqs::types::MessageSystemAttributeName::MessageGroupId));
    assert_eq!(group, Some(&queue_sqs::sqs_id(&job.group())));

    assert!(logs.contains("webhook ready"), "{logs}");
    assert!(!logs.contains(SECRET), "a secret reached the log: {logs}");
}

/// A message the queue will never take (here longer than the queue's largest message) is
/// answered 200 and dropped with an error in the log: a 500 would have the platform send it
/// again for days. The next delivery is queued as usual.
#[tokio::test]
async fn a_message_the_queue_refuses_is_answered_200_and_logged() {
    let sqs = sqs_client().await;
    let name = format!("refusing-{}-{}.fifo", std::process::id(), now_s());
    let queue_url = sqs
        .create_queue()
        .queue_name(&name)
        .attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true")
        .attributes(
            aws_sdk_sqs::types::QueueAttributeName::MaximumMessageSize,
            "1024",
        )
        .send()
        .await
        .unwrap()
        .queue_url
        .unwrap();
    let long = json!({"type": "message", "id": "m-long", "user": "u-9", "conversation": "c-boot",
        "text": "x".repeat(2000)})
    .to_string();
    let short = r#"{"type": "message", "id": "m-short", "user": "u-9", "conversation": "c-boot", "text": "short"}"#;
    let mut api = RuntimeApi::start([
        ("req-1".into(), delivery(&long, SECRET)),
        ("req-2".into(), delivery(short, SECRET)),
    ])
    .await
    .unwrap();
    let running = Bootstrap::spawn(bootstrap(&api, &queue_url, Some(SECRET))).unwrap();
    let (refused, accepted) = (
        api.next_posted(Duration::from_secs(60)).await,
        api.next_posted(Duration::from_secs(60)).await,
    );
    let logs = running.stop().logs;

    let body = |posted: &fake_lambda::Posted| -> (Value, Value) {
        (
            posted.body["statusCode"].clone(),
            serde_json::from_str(posted.body["body"].as_str().unwrap()).unwrap(),
        )
    };
    assert_eq!(
        body(&refused),
        (
            json!(200),
            json!({"status": "refused", "count": 0, "refused": 1})
        )
    );
    assert_eq!(
        body(&accepted),
        (json!(200), json!({"status": "queued", "count": 1}))
    );
    assert!(
        logs.contains("message dropped: the queue refuses it") && logs.contains("generic#m-long"),
        "{logs}"
    );
    assert!(!logs.contains(&"x".repeat(100)), "the text reached the log");
    let got = sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let ids: Vec<_> = got
        .messages()
        .iter()
        .map(|m| queue_sqs::decode_job(m.body().unwrap()).unwrap().message_id)
        .collect();
    assert_eq!(ids, ["m-short"]);
}

#[tokio::test]
async fn the_template_environment_starts_the_webhook_and_it_queues_a_delivery() {
    let sqs = sqs_client().await;
    let queue_url = fifo_queue(&sqs).await;
    let message = r#"{"type": "message", "id": "m-tpl-1", "user": "u-9", "conversation": "c-tpl", "text": "from the template"}"#;
    let mut api = RuntimeApi::start([("req-1".into(), delivery(message, SECRET))])
        .await
        .unwrap();
    // The secret as the template creates it: a generated GENERIC_WEBHOOK_SECRET.
    let (_, cmd) = template_bootstrap(&api, &queue_url, "secrets", SECRET).await;
    let running = Bootstrap::spawn(cmd).unwrap();
    let posted = api.next_posted(Duration::from_secs(60)).await;
    let logs = running.stop().logs;

    assert_eq!(posted.kind, PostedKind::Response, "{logs}");
    assert_eq!(posted.body["statusCode"], 200, "{}\n{logs}", posted.body);
    let got = sqs
        .receive_message()
        .queue_url(&queue_url)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let job = queue_sqs::decode_job(got.messages()[0].body().unwrap()).unwrap();
    assert_eq!(job.text, "from the template");
    assert!(logs.contains("webhook ready"), "{logs}");
    assert!(!logs.contains(SECRET), "a secret reached the log: {logs}");
}

/// The operator rotates the signing secret in Secrets Manager while an instance is warm: the
/// first delivery signed with the new one makes the instance read the secret again and is
/// queued; one signed with the old secret is then refused. No restart, no secret in the log.
#[tokio::test]
async fn a_secret_rotated_in_secrets_manager_is_taken_up_by_a_warm_instance() {
    const ROTATED: &str = "bootstrap-rotated-secret-9876543210fed";
    let sqs = sqs_client().await;
    let queue_url = fifo_queue(&sqs).await;
    let message = |id: &str| {
        format!(
            r#"{{"type": "message", "id": "{id}", "user": "u-9", "conversation": "c-rot", "text": "{id}"}}"#
        )
    };
    let mut api = RuntimeApi::start([("req-1".into(), delivery(&message("m-rot-1"), SECRET))])
        .await
        .unwrap();
    let (arn, cmd) = template_bootstrap(&api, &queue_url, "rotated", SECRET).await;
    let running = Bootstrap::spawn(cmd).unwrap();
    let before = api.next_posted(Duration::from_secs(60)).await;

    moto_secret_rotate(&arn, &json!({"GENERIC_WEBHOOK_SECRET": ROTATED})).await;
    api.push("req-2", delivery(&message("m-rot-2"), ROTATED));
    let rotated = api.next_posted(Duration::from_secs(60)).await;
    api.push("req-3", delivery(&message("m-rot-3"), SECRET));
    let old = api.next_posted(Duration::from_secs(60)).await;
    let logs = running.stop().logs;

    assert_eq!(before.body["statusCode"], 200, "{}\n{logs}", before.body);
    assert_eq!(rotated.body["statusCode"], 200, "{}\n{logs}", rotated.body);
    assert_eq!(old.body["statusCode"], 401, "{}\n{logs}", old.body);
    let got = sqs
        .receive_message()
        .queue_url(&queue_url)
        .max_number_of_messages(10)
        .wait_time_seconds(1)
        .send()
        .await
        .unwrap();
    let mut texts: Vec<String> = got
        .messages()
        .iter()
        .map(|m| queue_sqs::decode_job(m.body().unwrap()).unwrap().text)
        .collect();
    texts.sort();
    assert_eq!(texts, ["m-rot-1", "m-rot-2"]);
    assert!(
        logs.contains("the signing secrets were read again"),
        "{logs}"
    );
    for secret in [SECRET, ROTATED] {
        assert!(!logs.contains(secret), "a secret reached the log: {logs}");
    }
}

#[tokio::test]
async fn a_bootstrap_without_a_channel_stops_at_init_and_says_why() {
    let mut api = RuntimeApi::start([]).await.unwrap();
    let cmd = bootstrap(&api, "http://127.0.0.1:9/123456789012/q.fifo", None);
    let ran =
        tokio::task::spawn_blocking(move || Bootstrap::run_to_exit(cmd, Duration::from_secs(60)))
            .await
            .unwrap();
    assert!(!ran.status.success());
    assert!(
        ran.logs.contains(
            "webhook misconfigured:\n  - no channel is configured: set at least one channel's \
             webhook secret"
        ),
        "{}",
        ran.logs
    );
    // Lambda is told too, on /runtime/init/error.
    let posted = api.next_posted(Duration::from_secs(5)).await;
    assert_eq!(posted.kind, PostedKind::InitError);
    assert_eq!(posted.error_type.as_deref(), Some("Bridle.Misconfigured"));
    assert_eq!(
        posted.body,
        json!({
            "errorType": "Bridle.Misconfigured",
            "errorMessage": "webhook misconfigured: no channel is configured: set at least one \
                             channel's webhook secret",
        })
    );
}
