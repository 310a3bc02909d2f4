//! An old signed delivery replayed to the local server: `POST /webhooks/whatsapp` (and
//! telegram) answers 200 so the platform stops, logs a WARN naming the platform and the age,
//! and no turn runs — nothing reaches the platform's API. A fresh delivery is answered.

use backend::ScriptedModel;
use bridle::AppOptions;
use bridle::channel_setup::ChannelSetup;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tests::Logs;
use tests::platform_api::{PlatformApi, whatsapp_text};
use tests::server::TestServer;

const WA_SECRET: &str = "wa-app-secret";
const TG_SECRET: &str = "tg-secret-token-0123456789abcdef";
const DAY: u64 = 24 * 3600;

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn server(api: &PlatformApi) -> TestServer {
    let vars: HashMap<&str, String> = [
        ("PUBLIC_BASE_URL", "https://bridle.example".to_owned()),
        ("WHATSAPP_APP_SECRET", WA_SECRET.into()),
        ("WHATSAPP_VERIFY_TOKEN", "wa-verify".into()),
        ("WHATSAPP_ACCESS_TOKEN", "wa-access-token".into()),
        ("WHATSAPP_PHONE_NUMBER_ID", "106540352242922".into()),
        ("WHATSAPP_API_BASE", api.base.clone()),
        ("TELEGRAM_SECRET_TOKEN", TG_SECRET.into()),
        ("TELEGRAM_BOT_TOKEN", "123456:ABC-def".into()),
        ("TELEGRAM_API_BASE", api.base.clone()),
    ]
    .into_iter()
    .collect();
    let channels = ChannelSetup::from_vars(&|k| vars.get(k).cloned(), &reqwest::Client::new())
        .expect("channels configure");
    TestServer::start(
        Arc::new(ScriptedModel::new(vec![])),
        AppOptions {
            channels,
            ..AppOptions::default()
        },
    )
    .await
}

/// The WhatsApp delivery `whatsapp_text` makes, with its message sent `age_s` ago, signed.
fn whatsapp_sent_ago(from: &str, id: &str, age_s: u64) -> (String, String) {
    let (_, body) = whatsapp_text(WA_SECRET, from, id, "cancel everything");
    let mut body: serde_json::Value = serde_json::from_str(&body).unwrap();
    body["entry"][0]["changes"][0]["value"]["messages"][0]["timestamp"] =
        json!((now_s() - age_s).to_string());
    let body = body.to_string();
    let sig = channels::whatsapp::sign(WA_SECRET.as_bytes(), body.as_bytes());
    (sig, body)
}

async fn post(
    s: &TestServer,
    channel: &str,
    headers: &[(&str, String)],
    body: String,
) -> (u16, String) {
    let mut req = s
        .client
        .post(s.url(&format!("/webhooks/{channel}")))
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

#[tokio::test]
async fn an_old_whatsapp_delivery_is_dropped_with_200_and_a_warning() {
    let logs = Logs::default();
    let _capturing = logs.install();
    let api = PlatformApi::start().await;
    let s = server(&api).await;

    let (sig, body) = whatsapp_sent_ago("16315550001", "wamid.replayed", 9 * DAY);
    let (status, answer) = post(&s, "whatsapp", &[("x-hub-signature-256", sig)], body).await;
    assert_eq!(status, 200, "{answer}");
    let log = logs.text();
    let line = log
        .lines()
        .find(|l| l.contains("delivery dropped"))
        .unwrap_or_else(|| panic!("a warning is logged: {log}"));
    assert!(line.contains("WARN") && line.contains("whatsapp"), "{line}");
    let age: u64 = line
        .split("age_s=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the age is named: {line}"));
    assert!((9 * DAY..9 * DAY + 60).contains(&age), "{line}");

    // A fresh message from another sender is answered (the onboarding reply): the worker runs.
    let (sig, body) = whatsapp_sent_ago("16315550002", "wamid.fresh", 0);
    assert_eq!(
        post(&s, "whatsapp", &[("x-hub-signature-256", sig)], body)
            .await
            .0,
        200
    );
    let calls = api.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls_after = api.calls();
    assert_eq!(calls_after.len(), calls.len(), "nothing more was sent");
    assert!(
        calls_after.iter().all(|c| c.body.contains("16315550002")),
        "only the fresh sender was answered: {calls_after:#?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn an_old_telegram_message_is_dropped_with_200() {
    let api = PlatformApi::start().await;
    let s = server(&api).await;
    let old = json!({"update_id": 845_000_001, "message": {"message_id": 31,
        "from": {"id": 222, "is_bot": false, "first_name": "M"},
        "chat": {"id": 222, "type": "private"}, "date": now_s() - 8 * DAY, "text": "hello"}});
    let headers = [("x-telegram-bot-api-secret-token", TG_SECRET.to_owned())];
    assert_eq!(post(&s, "telegram", &headers, old.to_string()).await.0, 200);
    let fresh = json!({"update_id": 845_000_002, "message": {"message_id": 32,
        "from": {"id": 333, "is_bot": false, "first_name": "F"},
        "chat": {"id": 333, "type": "private"}, "date": now_s(), "text": "hello"}});
    assert_eq!(
        post(&s, "telegram", &headers, fresh.to_string()).await.0,
        200
    );
    api.wait_for(1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = api.calls();
    assert!(
        calls
            .iter()
            .all(|c| c.body.contains("333") && !c.body.contains("\"chat_id\":222")),
        "only the fresh sender was answered: {calls:#?}"
    );
    s.stop().await;
}
