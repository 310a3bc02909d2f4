//! End to end per platform, through the local server: a webhook signed exactly as the platform
//! signs it → `POST /webhooks/{channel}` (the webhook Lambda's handler) → the embedded queue →
//! the local worker (the worker Lambda's channel-job code) → a scripted turn → a local fake
//! platform API that records every call.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use bridle::channel_setup::ChannelSetup;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tests::platform_api::{ApiCall, PlatformApi};
use tests::server::TestServer;

const PUBLIC_BASE_URL: &str = "https://bridle.example";
const WA_SECRET: &str = "wa-app-secret";
const TG_SECRET: &str = "tg-secret-token-0123456789abcdef";
const SLACK_SECRET: &str = "slack-signing-secret";
const TWILIO_TOKEN: &str = "twilio-auth-token";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Platform {
    WhatsApp,
    Telegram,
    Slack,
    Twilio,
}

/// A signed delivery: headers and raw body.
struct Delivery {
    headers: Vec<(&'static str, String)>,
    body: String,
}

static SEQ: AtomicU64 = AtomicU64::new(1);

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

impl Platform {
    fn name(self) -> &'static str {
        match self {
            Platform::WhatsApp => "whatsapp",
            Platform::Telegram => "telegram",
            Platform::Slack => "slack",
            Platform::Twilio => "twilio",
        }
    }

    /// The sender's id on the platform and the chat's conversation key.
    fn sender(self) -> (&'static str, &'static str) {
        match self {
            Platform::WhatsApp => ("16315551181", "16315551181"),
            Platform::Telegram => ("111222333", "111222333"),
            Platform::Slack => ("U0G9QF9C6", "D0PNCRP9N"),
            Platform::Twilio => ("+15558675310", "+15558675310:+15557654321"),
        }
    }

    /// A user's text message, signed as the platform signs it.
    fn message(self, text: &str) -> Delivery {
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        let (from, _) = self.sender();
        match self {
            Platform::WhatsApp => {
                let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398",
                    "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
                    "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
                    "contacts": [{"profile": {"name": "Kerry"}, "wa_id": from}],
                    "messages": [{"from": from, "id": format!("wamid.in{n}"), "timestamp": now_s().to_string(),
                                  "type": "text", "text": {"body": text}}]}}]}]})
                .to_string();
                let sig = channels::whatsapp::sign(WA_SECRET.as_bytes(), body.as_bytes());
                Delivery {
                    headers: vec![
                        ("x-hub-signature-256", sig),
                        ("content-type", "application/json".into()),
                    ],
                    body,
                }
            }
            Platform::Telegram => {
                let body = json!({"update_id": 845_120_000 + n, "message": {"message_id": 4000 + n,
                    "from": {"id": 111_222_333, "is_bot": false, "first_name": "Alice"},
                    "chat": {"id": 111_222_333, "type": "private", "first_name": "Alice"},
                    "date": now_s(), "text": text}})
                .to_string();
                Delivery {
                    headers: vec![
                        ("x-telegram-bot-api-secret-token", TG_SECRET.into()),
                        ("content-type", "application/json".into()),
                    ],
                    body,
                }
            }
            Platform::Slack => {
                let ts = format!("1700000{n:03}.000100");
                let body = json!({"token": "x", "team_id": "T061EG9R6", "api_app_id": "A0PNCHHK2",
                    "type": "event_callback", "event_id": format!("Ev{n:08}"), "event_time": now_s(),
                    "event": {"type": "message", "channel_type": "im", "channel": "D0PNCRP9N",
                              "user": from, "text": text, "ts": ts, "event_ts": ts},
                    "authorizations": [{"team_id": "T061EG9R6", "user_id": "U0LAN0Z89", "is_bot": true}]})
                .to_string();
                let stamp = now_s().to_string();
                let sig = channels::slack::sign(SLACK_SECRET.as_bytes(), &stamp, body.as_bytes());
                Delivery {
                    headers: vec![
                        ("x-slack-request-timestamp", stamp),
                        ("x-slack-signature", sig),
                        ("content-type", "application/json".into()),
                    ],
                    body,
                }
            }
            Platform::Twilio => {
                let url = format!("{PUBLIC_BASE_URL}/webhooks/twilio");
                let (sig, body) = tests::twilio::signed_message(TWILIO_TOKEN, &url, from, n, text);
                Delivery {
                    headers: vec![
                        ("x-twilio-signature", sig),
                        ("content-type", "application/x-www-form-urlencoded".into()),
                    ],
                    body,
                }
            }
        }
    }

    /// The calls that carry reply text (not reactions, not callback answers).
    fn texts(self, calls: &[ApiCall]) -> Vec<ApiCall> {
        calls
            .iter()
            .filter(|c| match self {
                Platform::WhatsApp => !c.body.contains("\"type\":\"reaction\""),
                Platform::Telegram => c.path.ends_with("/sendMessage"),
                Platform::Slack => c.path.ends_with("/chat.postMessage"),
                Platform::Twilio => c.path.ends_with("/Messages.json"),
            })
            .cloned()
            .collect()
    }

    /// What a call says, readable: a form's `Body` decoded, JSON without escaping backslashes
    /// (Telegram's MarkdownV2 escapes `.` and `-`).
    fn said(self, call: &ApiCall) -> String {
        if self == Platform::Twilio {
            return tests::twilio::body_of(&call.body);
        }
        call.body.replace('\\', "")
    }

    fn is_reaction(self, call: &ApiCall) -> bool {
        match self {
            Platform::WhatsApp => call.body.contains("\"type\":\"reaction\""),
            Platform::Telegram => call.path.ends_with("/setMessageReaction"),
            Platform::Slack => call.path.ends_with("/reactions.add"),
            Platform::Twilio => false,
        }
    }
}

struct Setup {
    server: TestServer,
    api: PlatformApi,
    model: Arc<ScriptedModel>,
}

async fn setup(replies: Vec<Reply>) -> Setup {
    let api = PlatformApi::start().await;
    let vars: HashMap<&str, String> = [
        ("PUBLIC_BASE_URL", PUBLIC_BASE_URL.to_owned()),
        ("WHATSAPP_APP_SECRET", WA_SECRET.into()),
        ("WHATSAPP_VERIFY_TOKEN", "wa-verify".into()),
        ("WHATSAPP_ACCESS_TOKEN", "wa-access-token".into()),
        ("WHATSAPP_PHONE_NUMBER_ID", "106540352242922".into()),
        ("WHATSAPP_API_BASE", api.base.clone()),
        ("TELEGRAM_SECRET_TOKEN", TG_SECRET.into()),
        ("TELEGRAM_BOT_TOKEN", "123456:ABC-def".into()),
        ("TELEGRAM_API_BASE", api.base.clone()),
        ("SLACK_SIGNING_SECRET", SLACK_SECRET.into()),
        ("SLACK_BOT_TOKEN", "xoxb-test".into()),
        ("SLACK_API_BASE", api.base.clone()),
        ("TWILIO_AUTH_TOKEN", TWILIO_TOKEN.into()),
        (
            "TWILIO_ACCOUNT_SID",
            "AC3f1e2d4c5b6a79880a1b2c3d4e5f6a7b".into(),
        ),
        ("TWILIO_API_BASE", api.base.clone()),
    ]
    .into_iter()
    .collect();
    let channels = ChannelSetup::from_vars(&|k| vars.get(k).cloned(), &reqwest::Client::new())
        .expect("channels configure");
    let model = Arc::new(ScriptedModel::new(replies));
    let server = TestServer::start(
        model.clone(),
        AppOptions {
            channels,
            ..AppOptions::default()
        },
    )
    .await;
    Setup { server, api, model }
}

impl Setup {
    async fn post(&self, platform: Platform, d: &Delivery) -> u16 {
        let mut req = self
            .server
            .client
            .post(self.server.url(&format!("/webhooks/{}", platform.name())))
            .body(d.body.clone());
        for (k, v) in &d.headers {
            req = req.header(*k, v);
        }
        req.send().await.unwrap().status().as_u16()
    }

    async fn say(&self, platform: Platform, text: &str) -> u16 {
        self.post(platform, &platform.message(text)).await
    }
}

const FIRST: &str = "First paragraph.";

/// Two paragraphs that do not fit one message on any platform, then buttons.
fn long_reply() -> String {
    format!(
        "{FIRST} {}\n\nSecond paragraph. {}\n\nWhich one? <buttons>Spring Open | Summer Cup</buttons>",
        "a".repeat(2_500),
        "b".repeat(2_500)
    )
}

/// Unknown → onboarding (no model call) → link code → linked → a turn as the bound user with
/// split pieces in order and buttons on the last → the same delivery again → nothing more →
/// `<silent/>` → a reaction, or its text fallback where there is no reaction.
async fn full_journey(platform: Platform) {
    let s = setup(vec![Reply::text(&long_reply()), Reply::text("<silent/>")]).await;
    let (external, key) = platform.sender();

    // An unknown sender: the onboarding reply, and the model is never asked.
    assert_eq!(s.say(platform, "hello?").await, 200);
    let calls = s.api.wait_for(1).await;
    let onboarding = &platform.said(&calls[0]);
    assert!(
        onboarding.contains("bridle.example")
            && onboarding.contains("1.")
            && onboarding.contains("3."),
        "{platform:?}: {onboarding}"
    );
    assert_eq!(
        s.model.requests().len(),
        0,
        "no model call for an unknown sender"
    );

    // The web user's one-time code, sent from the app (in lower case, inside a sentence).
    let store = &s.server.app.store;
    let now = now_s() * 1000;
    store
        .create_link_code("K7PQ2345", &"local".into(), now, now + 30 * 60 * 1000)
        .await
        .unwrap();
    assert_eq!(s.say(platform, "my code: k7pq-2345").await, 200);
    let mut calls = s.api.wait_for(2).await;
    if platform == Platform::Twilio {
        // A text does not prove its sender: the number is texted a code of its own, and
        // `LINK <that code>` links it.
        let asked = platform.said(&calls[1]);
        let (_, after) = asked
            .split_once("LINK ")
            .expect("a code texted to the number");
        let code = after.split_whitespace().next().unwrap().to_owned();
        assert_eq!(
            store.identity(platform.name(), external).await.unwrap(),
            None,
            "not linked by the code alone"
        );
        assert_eq!(s.say(platform, &format!("LINK {code}")).await, 200);
        calls = s.api.wait_for(3).await;
    }
    let linked = calls.last().unwrap();
    assert!(
        platform.said(linked).contains("Linked"),
        "{platform:?}: {linked:?}"
    );
    assert_eq!(
        store.identity(platform.name(), external).await.unwrap(),
        Some("local".into()),
        "{platform:?}: the account is bound"
    );
    assert_eq!(s.model.requests().len(), 0);

    // A turn as the bound user: pieces in order, buttons on the last piece only.
    let message = platform.message("What's on?");
    assert_eq!(s.post(platform, &message).await, 200);
    let before = calls.len();
    let calls = s.api.wait_for(before + 2).await;
    // Let the rest of the pieces arrive (Twilio splits into more).
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let calls = if calls.len() < s.api.calls().len() {
        s.api.calls()
    } else {
        calls
    };
    let pieces = platform.texts(&calls[before..]);
    assert!(pieces.len() >= 2, "{platform:?}: {pieces:#?}");
    let pieces: Vec<String> = pieces.iter().map(|p| platform.said(p)).collect();
    assert!(pieces[0].contains("First paragraph"), "{platform:?}");
    if platform == Platform::Twilio {
        // Past three text messages an SMS reply is cut short, saying so; its last paragraph
        // (the question the buttons answer) still comes.
        assert_eq!(pieces.len(), channels::twilio::MAX_PIECES, "{pieces:#?}");
        assert!(
            pieces[2].contains(channels::twilio::CUT_SHORT) && pieces[2].contains("Which one?"),
            "{pieces:#?}"
        );
    } else {
        let second = pieces
            .iter()
            .position(|p| p.contains("Second paragraph"))
            .unwrap();
        assert!(second > 0, "{platform:?}: in order");
    }
    let last = pieces.last().unwrap();
    assert!(
        last.contains("Spring Open") && last.contains("Summer Cup"),
        "{platform:?}: {last}"
    );
    for p in &pieces[..pieces.len() - 1] {
        assert!(
            !p.contains("Spring Open"),
            "{platform:?}: buttons only on the last piece"
        );
    }
    assert_eq!(s.model.requests().len(), 1);
    let conversation = format!("{}:{key}@local", platform.name());
    let rows = store
        .messages(&conversation.as_str().into(), 0)
        .await
        .unwrap();
    let stored = rows[0].text();
    assert!(
        stored.ends_with("<user_message>\nWhat's on?\n</user_message>")
            && stored.contains(&format!(", on {}\n", platform.name())),
        "{platform:?}: the turn ran in the bound user's conversation, with its context: {stored}"
    );

    // The platform delivers the same message again: acknowledged, no second turn or reply.
    assert_eq!(s.post(platform, &message).await, 200);
    let after_turn = s.api.calls().len();

    // A silent reply: a reaction where the platform has them, else a short text.
    assert_eq!(s.say(platform, "thanks").await, 200);
    let calls = s.api.wait_for(after_turn + 1).await;
    let last = &calls[after_turn..];
    assert_eq!(
        last.len(),
        1,
        "{platform:?}: one call for the silent reply: {last:#?}"
    );
    if platform == Platform::Twilio {
        assert_eq!(platform.said(&last[0]), "👍");
    } else {
        assert!(platform.is_reaction(&last[0]), "{platform:?}: {last:#?}");
    }
    assert_eq!(
        s.model.requests().len(),
        2,
        "{platform:?}: the duplicate ran no turn"
    );
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatsapp_end_to_end() {
    full_journey(Platform::WhatsApp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_end_to_end() {
    full_journey(Platform::Telegram).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_end_to_end() {
    full_journey(Platform::Slack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twilio_end_to_end() {
    full_journey(Platform::Twilio).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reaction_falls_back_to_text() {
    let s = setup(vec![Reply::text("<silent/>")]).await;
    s.api.refuse(
        "setMessageReaction",
        400,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: REACTION_INVALID"}),
    );
    let now = now_s() * 1000;
    s.server
        .app
        .store
        .bind_identity("telegram", "111222333", &"local".into(), now)
        .await
        .unwrap();
    assert_eq!(s.say(Platform::Telegram, "ok thanks").await, 200);
    let calls = s.api.wait_for(2).await;
    assert!(calls[0].path.ends_with("/setMessageReaction"));
    assert!(calls[1].path.ends_with("/sendMessage"));
    let body: Value = serde_json::from_str(&calls[1].body).unwrap();
    assert_eq!(body["text"], "👍");
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_code_is_answered_with_how_to_get_a_new_one() {
    let s = setup(vec![]).await;
    let now = now_s() * 1000;
    let store = &s.server.app.store;
    store
        .create_link_code(
            "K7PQ2345",
            &"local".into(),
            now - 31 * 60 * 1000,
            now - 60_000,
        )
        .await
        .unwrap();
    assert_eq!(s.say(Platform::Telegram, "/start K7PQ2345").await, 200);
    let calls = s.api.wait_for(1).await;
    assert!(
        Platform::Telegram.said(&calls[0]).contains("expired"),
        "{:?}",
        calls[0]
    );
    assert_eq!(store.identity("telegram", "111222333").await.unwrap(), None);
    assert_eq!(s.model.requests().len(), 0);
    s.server.stop().await;
}

/// A job that redeemed the code and died before binding the account is delivered again: the
/// same account redeems the code again and is linked; another account still cannot use it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_link_after_a_crash_between_redeeming_and_binding_still_links() {
    let s = setup(vec![]).await;
    let now = now_s() * 1000;
    let store = &s.server.app.store;
    store
        .create_link_code("K7PQ2345", &"local".into(), now, now + 30 * 60 * 1000)
        .await
        .unwrap();
    // What the first attempt did before it died: the code is used up, the account not bound.
    assert_eq!(
        store
            .consume_link_code("K7PQ2345", "telegram#111222333", now)
            .await
            .unwrap(),
        Some("local".into())
    );
    assert_eq!(store.identity("telegram", "111222333").await.unwrap(), None);

    assert_eq!(s.say(Platform::Telegram, "/start K7PQ2345").await, 200);
    let calls = s.api.wait_for(1).await;
    assert!(
        Platform::Telegram.said(&calls[0]).contains("Linked"),
        "{:?}",
        calls[0]
    );
    assert_eq!(
        store.identity("telegram", "111222333").await.unwrap(),
        Some("local".into())
    );
    assert_eq!(
        store
            .consume_link_code("K7PQ2345", "whatsapp#+15550100", now + 1)
            .await
            .unwrap(),
        None,
        "the code is still used up for any other account"
    );
    assert_eq!(s.model.requests().len(), 0);
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_without_its_secret_is_not_there() {
    let server = TestServer::start(Arc::new(ScriptedModel::new([])), AppOptions::default()).await;
    let d = Platform::Telegram.message("hi");
    let mut req = server
        .client
        .post(server.url("/webhooks/telegram"))
        .body(d.body);
    for (k, v) in d.headers {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_signature_is_refused_and_nothing_runs() {
    let s = setup(vec![]).await;
    let mut d = Platform::WhatsApp.message("hi");
    d.body = d.body.replace("hi", "hI");
    assert_eq!(s.post(Platform::WhatsApp, &d).await, 401);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(s.api.calls().is_empty());
    s.server.stop().await;
}

/// A Meta app's every number posts to its one webhook: a message to another of its numbers is
/// acknowledged and never answered here (no turn, no reply from this number, nothing stored),
/// while the same sender's next message, to this deployment's number, is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_another_number_of_the_app_is_not_answered() {
    let s = setup(vec![Reply::text("Answered from the right number.")]).await;
    let now = now_s() * 1000;
    let store = &s.server.app.store;
    store
        .bind_identity("whatsapp", "16315551181", &"local".into(), now)
        .await
        .unwrap();
    let ours = Platform::WhatsApp.message("for this deployment");
    let mut theirs = Platform::WhatsApp.message("for the other number");
    theirs.body = theirs
        .body
        .replace("\"106540352242922\"", "\"555000999111222\"");
    theirs.headers[0].1 = channels::whatsapp::sign(WA_SECRET.as_bytes(), theirs.body.as_bytes());
    assert!(theirs.body.contains("555000999111222"));

    // Sent first: the same sender's messages are one conversation's, taken in order.
    assert_eq!(s.post(Platform::WhatsApp, &theirs).await, 200);
    assert_eq!(s.post(Platform::WhatsApp, &ours).await, 200);
    s.api.wait_for(1).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let calls = s.api.calls();
    assert_eq!(
        calls.len(),
        1,
        "one reply, to our number's message: {calls:#?}"
    );
    assert!(Platform::WhatsApp.said(&calls[0]).contains("right number"));
    assert_eq!(s.model.requests().len(), 1, "no turn for the other number");
    let rows = store
        .messages(&"whatsapp:16315551181@local".into(), 0)
        .await
        .unwrap();
    let said: Vec<String> = rows.iter().map(|r| r.text()).collect();
    assert!(
        said.iter().any(|t| t.contains("for this deployment"))
            && !said.iter().any(|t| t.contains("for the other number")),
        "{said:#?}"
    );
    s.server.stop().await;
}
