//! Old deliveries replayed: a signed WhatsApp or Telegram delivery whose message is older than
//! finished jobs' claims are kept is acknowledged (200, so the platform stops) and not queued;
//! a recent one, even a day old (a platform retrying), is queued as usual.

use channels::telegram::TelegramChannel;
use channels::whatsapp::WhatsAppChannel;
use queue::{JobQueue, QueueSettings};
use queue_sqlite::SqliteQueue;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use webhook::{Incoming, MAX_DELIVERY_AGE, Webhook};

const NOW: i64 = 1_800_000_000;
const DAY: i64 = 24 * 3600;
const WA_SECRET: &str = "wa-app-secret";
const TG_SECRET: &str = "tg-secret-token-0123456789abcdef";
const SLACK_SECRET: &str = "slack-signing-secret";

fn webhook(queue: Arc<SqliteQueue>) -> Webhook {
    Webhook::new(
        vec![
            Arc::new(WhatsAppChannel::new(WA_SECRET, "wa-verify")),
            Arc::new(TelegramChannel::new(TG_SECRET, None).unwrap()),
            Arc::new(channels::slack::SlackChannel::new(SLACK_SECRET)),
        ],
        queue,
        64 * 1024,
    )
    .with_metrics(metrics::Metrics::off())
}

/// A WhatsApp delivery with its signature.
fn signed_whatsapp(body: String) -> (Vec<(String, String)>, String) {
    let sig = channels::whatsapp::sign(WA_SECRET.as_bytes(), body.as_bytes());
    (
        vec![
            ("x-hub-signature-256".into(), sig),
            ("content-type".into(), "application/json".into()),
        ],
        body,
    )
}

/// A WhatsApp text message sent at `sent_s` and its signature.
fn whatsapp(id: &str, sent_s: i64) -> (Vec<(String, String)>, String) {
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "1",
        "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
        "messages": [{"from": "16315551181", "id": id, "timestamp": sent_s.to_string(),
                      "type": "text", "text": {"body": "cancel my booking"}}]}}]}]})
    .to_string();
    signed_whatsapp(body)
}

/// A Slack message event whose `ts` is `sent_s`, delivered (signed) at `NOW` with Slack's
/// retry header, as a retry after a failed first delivery is.
fn slack_retry(sent_s: i64) -> (Vec<(String, String)>, String) {
    let body = json!({"type": "event_callback", "team_id": "T1", "event_id": "Ev1",
        "event": {"type": "message", "channel": "D1", "user": "U1", "text": "yes",
                  "ts": format!("{sent_s}.000200"), "channel_type": "im"}})
    .to_string();
    let at = NOW.to_string();
    let sig = channels::slack::sign(SLACK_SECRET.as_bytes(), &at, body.as_bytes());
    (
        vec![
            ("x-slack-signature".into(), sig),
            ("x-slack-request-timestamp".into(), at),
            ("x-slack-retry-num".into(), "1".into()),
            ("content-type".into(), "application/json".into()),
        ],
        body,
    )
}

/// Two WhatsApp messages in one delivery, sent at `first_s` and `second_s`.
fn whatsapp_batch(first_s: i64, second_s: i64) -> (Vec<(String, String)>, String) {
    let message = |id: &str, sent_s: i64, text: &str| {
        json!({"from": "16315551181", "id": id, "timestamp": sent_s.to_string(),
               "type": "text", "text": {"body": text}})
    };
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "1",
        "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
        "messages": [message("wamid.first", first_s, "yes"),
                     message("wamid.second", second_s, "and one more thing")]}}]}]})
    .to_string();
    signed_whatsapp(body)
}

/// A Telegram update: a message dated `sent_s`.
fn telegram(message_id: i64, sent_s: i64) -> (Vec<(String, String)>, String) {
    let body = json!({"update_id": 900_000 + message_id, "message": {"message_id": message_id,
        "from": {"id": 111, "is_bot": false, "first_name": "A"},
        "chat": {"id": 111, "type": "private"}, "date": sent_s, "text": "cancel my booking"}})
    .to_string();
    (
        vec![
            ("x-telegram-bot-api-secret-token".into(), TG_SECRET.into()),
            ("content-type".into(), "application/json".into()),
        ],
        body,
    )
}

/// A Telegram button press on a bot message dated `message_sent_s`.
fn telegram_press(message_sent_s: i64) -> (Vec<(String, String)>, String) {
    let body = json!({"update_id": 990_001, "callback_query": {"id": "cb-1",
        "from": {"id": 111, "is_bot": false, "first_name": "A"}, "data": "yes",
        "message": {"message_id": 77, "chat": {"id": 111, "type": "private"},
                    "date": message_sent_s, "text": "Sure?"}}})
    .to_string();
    (
        vec![
            ("x-telegram-bot-api-secret-token".into(), TG_SECRET.into()),
            ("content-type".into(), "application/json".into()),
        ],
        body,
    )
}

async fn post(
    hook: &Webhook,
    channel: &str,
    delivery: &(Vec<(String, String)>, String),
) -> (u16, Value) {
    let path = format!("/webhooks/{channel}");
    let res = hook
        .handle(Incoming {
            method: "POST",
            path: &path,
            query: None,
            headers: &delivery.0,
            body: delivery.1.as_bytes(),
            now_ms: NOW * 1000,
            origin: None,
        })
        .await;
    (res.status, serde_json::from_str(&res.body).unwrap())
}

async fn queued(queue: &SqliteQueue) -> Vec<String> {
    let got = queue.receive(10, Duration::ZERO).await.unwrap();
    got.into_iter().map(|d| d.job.message_id).collect()
}

#[test]
fn the_age_limit_is_below_the_claims_week() {
    assert!(MAX_DELIVERY_AGE < Duration::from_secs(7 * 24 * 3600));
    assert!(MAX_DELIVERY_AGE > Duration::from_secs(6 * 24 * 3600));
}

#[tokio::test]
async fn an_old_whatsapp_delivery_replayed_is_acknowledged_and_not_queued() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = webhook(queue.clone());
    let old = whatsapp("wamid.old", NOW - 8 * DAY);
    assert_eq!(
        post(&hook, "whatsapp", &old).await,
        (200, json!({"status": "ignored"}))
    );
    assert!(queued(&queue).await.is_empty(), "nothing was queued");
    // A day late (Meta retries for up to a week) is still a message.
    let late = whatsapp("wamid.late", NOW - DAY);
    assert_eq!(
        post(&hook, "whatsapp", &late).await,
        (200, json!({"status": "queued", "count": 1}))
    );
    assert_eq!(queued(&queue).await, vec!["wamid.late".to_owned()]);
}

#[tokio::test]
async fn an_old_telegram_message_replayed_is_acknowledged_and_not_queued() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = webhook(queue.clone());
    assert_eq!(
        post(&hook, "telegram", &telegram(5, NOW - 30 * DAY)).await,
        (200, json!({"status": "ignored"}))
    );
    assert!(queued(&queue).await.is_empty(), "nothing was queued");
    assert_eq!(
        post(&hook, "telegram", &telegram(6, NOW - 60)).await,
        (200, json!({"status": "queued", "count": 1}))
    );
    assert_eq!(queued(&queue).await, vec!["111:6".to_owned()]);
}

#[tokio::test]
async fn a_button_press_on_an_old_message_is_not_taken_for_an_old_delivery() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = webhook(queue.clone());
    assert_eq!(
        post(&hook, "telegram", &telegram_press(NOW - 30 * DAY)).await,
        (200, json!({"status": "queued", "count": 1}))
    );
}

/// A batch whose one message has an id too long for the store's keys: that message is dropped
/// and the others queued (refused, the batch would come again for days, none of it queued).
#[tokio::test]
async fn a_message_with_an_over_long_id_costs_only_itself() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = webhook(queue.clone());
    let long = "w".repeat(channels::MAX_ID_BYTES + 1);
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "1",
        "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
        "messages": [
            {"from": "16315551181", "id": long, "timestamp": NOW.to_string(),
             "type": "text", "text": {"body": "one"}},
            {"from": "16315551181", "id": "wamid.OK", "timestamp": NOW.to_string(),
             "type": "text", "text": {"body": "two"}}]}}]}]})
    .to_string();
    let delivery = signed_whatsapp(body);
    let (status, _) = post(&hook, "whatsapp", &delivery).await;
    assert_eq!(status, 200);
    assert_eq!(queued(&queue).await, ["wamid.OK"]);
}

/// A job carries when its message was sent, as near as the platform says: a delivery sent
/// again an hour after a failure is dated by its message (to the second), so a "yes" typed
/// before the question it would answer is not taken for one typed after it; a platform clock
/// ahead of ours changes nothing.
#[tokio::test]
async fn a_job_is_dated_by_its_message_not_by_a_late_delivery() {
    let queue = Arc::new(SqliteQueue::open_in_memory(QueueSettings::default()).unwrap());
    let hook = webhook(queue.clone());
    assert_eq!(
        post(&hook, "telegram", &telegram(1, NOW - 3600)).await.0,
        200
    );
    assert_eq!(
        post(&hook, "whatsapp", &whatsapp("wamid.late", NOW - 3600))
            .await
            .0,
        200
    );
    assert_eq!(post(&hook, "telegram", &telegram(2, NOW + 30)).await.0, 200);
    // Slack signs its retry anew: the message's own `ts` dates it.
    assert_eq!(post(&hook, "slack", &slack_retry(NOW - 120)).await.0, 200);
    // A WhatsApp delivery of two messages sent an hour apart dates each by its own time.
    assert_eq!(
        post(&hook, "whatsapp", &whatsapp_batch(NOW - 3600, NOW - 5))
            .await
            .0,
        200
    );
    // (One chat's jobs come one at a time.)
    let mut dated: Vec<(String, i64)> = Vec::new();
    loop {
        let got = queue.receive(10, Duration::ZERO).await.unwrap();
        if got.is_empty() {
            break;
        }
        for d in got {
            queue.ack(&d.receipt).await.unwrap();
            dated.push((d.job.message_id, d.job.received_at_ms));
        }
    }
    dated.sort();
    assert_eq!(
        dated,
        [
            ("111:1".to_owned(), (NOW - 3600 + 1) * 1000),
            ("111:2".to_owned(), NOW * 1000),
            (format!("D1:{}.000200", NOW - 120), (NOW - 120 + 1) * 1000),
            ("wamid.first".to_owned(), (NOW - 3600 + 1) * 1000),
            ("wamid.late".to_owned(), (NOW - 3600 + 1) * 1000),
            ("wamid.second".to_owned(), (NOW - 5 + 1) * 1000),
        ]
    );
}
