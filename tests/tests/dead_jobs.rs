//! A message whose every attempt fails (here: the platform refuses the reply each time) goes to
//! the dead letters, and that is visible: the user gets one calm sentence, the visible
//! transcript ends the turn with it, an ERROR line names the job and the cause, and the queue
//! lists the job for `bridle jobs dead` / `retry` (tested on the binary in
//! `functions/bridle/tests/jobs_cli.rs`).

use backend::{Reply, ScriptedModel};
use bridle::channel_setup::ChannelSetup;
use bridle::{AppOptions, Db};
use engine::lines;
use queue::QueueSettings;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use store::VisibleRole;
use tests::platform_api::{PlatformApi, whatsapp_text};
use tests::server::TestServer;
use transcript::ConversationId;

const WA_SECRET: &str = "wa-app-secret";
const WA_FROM: &str = "491701234567";

fn whatsapp(n: u32, text: &str) -> (String, String) {
    whatsapp_text(WA_SECRET, WA_FROM, &format!("wamid.dead{n}"), text)
}

/// `bridle serve` in-process on a file database (kept in `dir`), WhatsApp replies going to
/// `api`, the queue giving a job `max_receives` deliveries; the sender linked to `kim`.
async fn whatsapp_server(
    api: &PlatformApi,
    model: Arc<ScriptedModel>,
    dir: &tempfile::TempDir,
    max_receives: u32,
) -> TestServer {
    let vars: HashMap<&str, String> = [
        ("WHATSAPP_APP_SECRET", WA_SECRET.into()),
        ("WHATSAPP_VERIFY_TOKEN", "wa-verify".into()),
        ("WHATSAPP_ACCESS_TOKEN", "wa-access-token".into()),
        ("WHATSAPP_PHONE_NUMBER_ID", "106540352242922".into()),
        ("WHATSAPP_API_BASE", api.base.clone()),
    ]
    .into_iter()
    .collect();
    let channels = ChannelSetup::from_vars(&|k| vars.get(k).cloned(), &reqwest::Client::new())
        .expect("channels configure");
    let server = TestServer::start(
        model,
        AppOptions {
            db: Db::File(dir.path().join("bridle.db")),
            channels,
            queue: QueueSettings {
                max_receives,
                ..QueueSettings::default()
            },
            ..AppOptions::default()
        },
    )
    .await;
    server
        .app
        .store
        .bind_identity("whatsapp", WA_FROM, &"kim".into(), 0)
        .await
        .unwrap();
    server
}

/// Post message `n` saying `text` to the WhatsApp webhook, signed; it is taken.
async fn post(server: &TestServer, n: u32, text: &str) {
    let (sig, body) = whatsapp(n, text);
    let status = server
        .client
        .post(server.url("/webhooks/whatsapp"))
        .header("x-hub-signature-256", sig)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_fails_every_attempt_is_given_up_visibly() {
    let api = PlatformApi::start().await;
    // The platform refuses every reply that carries the model's words.
    api.refuse("POISON", 500, json!({"error": {"message": "internal"}}));
    let model = Arc::new(ScriptedModel::new([Reply::text("POISON answer")]));
    let dir = tempfile::Builder::new()
        .prefix("bridle-dead-")
        .tempdir()
        .unwrap();
    let db = dir.path().join("bridle.db");
    let server = whatsapp_server(&api, model.clone(), &dir, 2).await;
    let store = server.app.store.clone();
    post(&server, 1, "Plan my week").await;

    // Two refused deliveries (the second after a backoff), then the sentence that goes through.
    let calls = api.wait_for(3).await;
    let said: Vec<&str> = calls.iter().map(|c| c.body.as_str()).collect();
    assert!(
        said[0].contains("POISON") && said[1].contains("POISON"),
        "{said:?}"
    );
    assert!(
        said[2].contains("couldn't process that message"),
        "{said:?}"
    );
    assert_eq!(
        model.requests().len(),
        1,
        "the retry resumed, no second model call"
    );

    let conv = ConversationId(format!("whatsapp:{WA_FROM}@kim"));
    // The sentence is recorded just after the platform took it.
    let visible = tests::eventually("the sentence recorded", || async {
        let visible = store.visible(&conv).await.unwrap();
        (visible.len() >= 2).then_some(visible)
    })
    .await;
    let entries: Vec<(VisibleRole, &str)> =
        visible.iter().map(|e| (e.role, e.text.as_str())).collect();
    assert_eq!(
        entries,
        [
            (VisibleRole::User, "Plan my week"),
            (VisibleRole::Assistant, lines::GAVE_UP)
        ],
        "the visible transcript shows what the user saw"
    );
    // The queue keeps the job for an operator.
    let queue = queue_sqlite::SqliteQueue::open(&db, QueueSettings::default()).unwrap();
    let mut dead = Vec::new();
    for _ in 0..60 {
        dead = queue.dead_letters().unwrap();
        if !dead.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].job.message_id, "wamid.dead1");
    assert_eq!(dead[0].receive_count, 2);
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_whose_job_another_attempt_holds_waits_for_that_claim_not_the_dead_letters() {
    // Another attempt claimed the job for 5 s and died without a trace in the queue (its
    // process is not this one, so no restart releases it). Back after the backoff (1 s, then
    // 2 s), the job would find the claim busy on each of its three deliveries and be given up.
    let api = PlatformApi::start().await;
    let model = Arc::new(ScriptedModel::new([Reply::text("Monday: gym.")]));
    let dir = tempfile::Builder::new()
        .prefix("bridle-busy-")
        .tempdir()
        .unwrap();
    let server = whatsapp_server(&api, model.clone(), &dir, 3).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let claimed = server
        .app
        .store
        .claim_job("whatsapp#wamid.dead7", now, now + 5_000)
        .await
        .unwrap();
    assert_eq!(claimed, store::Claim::Fresh);
    let lapses = tokio::time::Instant::now() + Duration::from_secs(5);
    post(&server, 7, "Plan my week").await;

    let calls = api.wait_for(1).await;
    let answered_at = tokio::time::Instant::now();
    assert!(calls[0].body.contains("Monday: gym."), "{calls:?}");
    assert!(
        answered_at >= lapses,
        "answered {:?} before the claim lapsed",
        lapses - answered_at
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.calls().len(), 1, "one reply, no apology");
    assert_eq!(model.requests().len(), 1);
    let queue =
        queue_sqlite::SqliteQueue::open(dir.path().join("bridle.db"), QueueSettings::default())
            .unwrap();
    assert!(queue.dead_letters().unwrap().is_empty());
    server.stop().await;
}
