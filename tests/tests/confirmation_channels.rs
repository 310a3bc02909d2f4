//! The server's Yes / No buttons on every channel, through the local server: a held call's
//! reply goes out with the channel's own buttons (WhatsApp reply buttons, a Telegram inline
//! keyboard, Slack blocks; on SMS a line saying to reply YES with the question's code), and a
//! press arriving through that channel's signed webhook (WhatsApp `button_reply`, Telegram
//! `callback_query`, Slack `block_actions`, a typed "yes <code>" / "no" on SMS) reaches the
//! engine and decides: Yes runs the held call although the model never repeats it, No voids
//! it. The web chat's press is the POST body's `button_id`.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use bridle::channel_setup::ChannelSetup;
use planner::{Caller, NewEvent, Planner};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use store::Store;
use tests::platform_api::{ApiCall, PlatformApi};
use tests::server::TestServer;
use transcript::{ConversationId, UserId};

const PUBLIC_BASE_URL: &str = "https://bridle.example";
const WA_SECRET: &str = "wa-app-secret";
const TG_SECRET: &str = "tg-secret-token-0123456789abcdef";
const SLACK_SECRET: &str = "slack-signing-secret";
const TWILIO_TOKEN: &str = "twilio-auth-token";

static SEQ: AtomicU64 = AtomicU64::new(1);

fn now_s() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

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

    fn conversation(self) -> ConversationId {
        ConversationId(format!("{}:{}@local", self.name(), self.sender().1))
    }

    fn whatsapp(message: serde_json::Value) -> Delivery {
        let (from, _) = Platform::WhatsApp.sender();
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398",
            "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
            "contacts": [{"profile": {"name": "Kerry"}, "wa_id": from}],
            "messages": [message]}}]}]})
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

    fn telegram(update: serde_json::Value) -> Delivery {
        Delivery {
            headers: vec![
                ("x-telegram-bot-api-secret-token", TG_SECRET.into()),
                ("content-type", "application/json".into()),
            ],
            body: update.to_string(),
        }
    }

    fn slack(body: String, content_type: &str) -> Delivery {
        let stamp = now_s().to_string();
        let sig = channels::slack::sign(SLACK_SECRET.as_bytes(), &stamp, body.as_bytes());
        Delivery {
            headers: vec![
                ("x-slack-request-timestamp", stamp),
                ("x-slack-signature", sig),
                ("content-type", content_type.into()),
            ],
            body,
        }
    }

    fn twilio(text: &str, n: u64) -> Delivery {
        let (from, _) = Platform::Twilio.sender();
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

    /// A user's text message, signed as the platform signs it.
    fn message(self, text: &str) -> Delivery {
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        let (from, key) = self.sender();
        match self {
            Platform::WhatsApp => Platform::whatsapp(json!({"from": from,
                "id": format!("wamid.in{n}"), "timestamp": now_s().to_string(),
                "type": "text", "text": {"body": text}})),
            Platform::Telegram => Platform::telegram(json!({"update_id": 845_120_000 + n,
                "message": {"message_id": 4000 + n,
                "from": {"id": 111_222_333, "is_bot": false, "first_name": "Alice"},
                "chat": {"id": 111_222_333, "type": "private", "first_name": "Alice"},
                "date": now_s(), "text": text}})),
            Platform::Slack => {
                let ts = format!("1700000{n:03}.000100");
                let body = json!({"token": "x", "team_id": "T061EG9R6", "api_app_id": "A0PNCHHK2",
                    "type": "event_callback", "event_id": format!("Ev{n:08}"), "event_time": now_s(),
                    "event": {"type": "message", "channel_type": "im", "channel": key,
                              "user": from, "text": text, "ts": ts, "event_ts": ts},
                    "authorizations": [{"team_id": "T061EG9R6", "user_id": "U0LAN0Z89", "is_bot": true}]});
                Platform::slack(body.to_string(), "application/json")
            }
            Platform::Twilio => Platform::twilio(text, n),
        }
    }

    /// The press of button `id` titled `title`, as the platform delivers it (on SMS: the
    /// option's number typed back, or the word given).
    fn press(self, id: &str, title: &str, sms_reply: &str) -> Delivery {
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        let (from, key) = self.sender();
        match self {
            Platform::WhatsApp => Platform::whatsapp(json!({"from": from,
                "id": format!("wamid.in{n}"), "timestamp": now_s().to_string(),
                "context": {"from": "15550783881", "id": "wamid.out1"},
                "type": "interactive",
                "interactive": {"type": "button_reply", "button_reply": {"id": id, "title": title}}})),
            Platform::Telegram => Platform::telegram(json!({"update_id": 845_120_000 + n,
                "callback_query": {"id": format!("cq{n}"), "chat_instance": "-1",
                "from": {"id": 111_222_333, "is_bot": false, "first_name": "Alice"},
                "message": {"message_id": 4000 + n,
                    "from": {"id": 999, "is_bot": true, "first_name": "Bridle"},
                    "chat": {"id": 111_222_333, "type": "private", "first_name": "Alice"},
                    "date": now_s(), "text": "Withdraw Dana Lee?",
                    "reply_markup": {"inline_keyboard": [[{"text": title, "callback_data": id}]]}},
                "data": id}})),
            Platform::Slack => {
                let payload = json!({"type": "block_actions",
                    "user": {"id": from, "username": "ana", "team_id": "T061EG9R6"},
                    "api_app_id": "A0PNCHHK2", "token": "x",
                    "container": {"type": "message", "message_ts": format!("1700001{n:03}.000200"),
                                  "channel_id": key, "is_ephemeral": false},
                    "trigger_id": format!("trig{n}"), "team": {"id": "T061EG9R6"},
                    "channel": {"id": key, "name": "directmessage"},
                    "actions": [{"action_id": id, "block_id": "b1", "value": id,
                                 "text": {"type": "plain_text", "text": title},
                                 "type": "button", "action_ts": format!("1700001{n:03}.456789")}]});
                let body = form_urlencoded::Serializer::new(String::new())
                    .append_pair("payload", &payload.to_string())
                    .finish();
                Platform::slack(body, "application/x-www-form-urlencoded")
            }
            Platform::Twilio => Platform::twilio(sms_reply, n),
        }
    }

    /// The calls that carry reply text (not reactions, not callback answers).
    fn texts(self, calls: &[ApiCall]) -> Vec<String> {
        calls
            .iter()
            .filter(|c| match self {
                Platform::WhatsApp => !c.body.contains("\"type\":\"reaction\""),
                Platform::Telegram => c.path.ends_with("/sendMessage"),
                Platform::Slack => c.path.ends_with("/chat.postMessage"),
                Platform::Twilio => c.path.ends_with("/Messages.json"),
            })
            .map(|c| {
                if self == Platform::Twilio {
                    form_urlencoded::parse(c.body.as_bytes())
                        .find(|(k, _)| k == "Body")
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_default()
                } else {
                    c.body.replace('\\', "")
                }
            })
            .collect()
    }
}

struct Setup {
    server: TestServer,
    api: PlatformApi,
    model: Arc<ScriptedModel>,
    planner: Planner,
    event: String,
}

/// The local server with every channel configured against the fake platform API, the
/// platform's sender bound to the local user, and a published "Spring Open".
async fn setup(platform: Platform) -> Setup {
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
    let model = Arc::new(ScriptedModel::new([]));
    let server = TestServer::start(
        model.clone(),
        AppOptions {
            channels,
            ..AppOptions::default()
        },
    )
    .await;
    let store: Arc<dyn Store> = server.app.store.clone();
    let local = UserId::from("local");
    store
        .bind_identity(platform.name(), platform.sender().0, &local, 1)
        .await
        .unwrap();
    let planner = Planner::new(store);
    let owner = owner();
    let new_event = NewEvent {
        title: "Spring Open".into(),
        starts_at: "2025-04-12T10:00".into(),
        venue: "Court 1".into(),
        capacity: 10,
    };
    let event = planner.create_event(&owner, new_event).await.unwrap();
    planner.publish_event(&owner, &event.id).await.unwrap();
    Setup {
        server,
        api,
        model,
        planner,
        event: event.id,
    }
}

/// The code an SMS question carries for its Yes button `id`: keyed by the Twilio auth token,
/// as the server keys it ([`channel_jobs::confirm_code_key`]).
fn code_of(id: &str) -> Option<String> {
    let key = channel_jobs::confirm_code_key(|k| {
        (k == "TWILIO_AUTH_TOKEN").then(|| TWILIO_TOKEN.to_owned())
    });
    engine::confirm_code(id, key.as_ref())
}

/// The local user acting directly.
fn owner() -> Caller {
    Caller::from_ctx(&tools::Ctx {
        user_id: UserId::from("local"),
        actor: tools::Actor::User,
        action_id: tools::ActionId("setup".into()),
        conversation_id: ConversationId::from("setup"),
        call_key: None,
        grant: tools::Grant::default(),
    })
}

impl Setup {
    async fn post(&self, platform: Platform, d: &Delivery) {
        let mut req = self
            .server
            .client
            .post(self.server.url(&format!("/webhooks/{}", platform.name())))
            .body(d.body.clone());
        for (k, v) in &d.headers {
            req = req.header(*k, v);
        }
        let status = req.send().await.unwrap().status().as_u16();
        assert_eq!(status, 200, "{platform:?}: the webhook takes it");
    }

    async fn names(&self) -> Vec<String> {
        let people = self
            .planner
            .list_attendees(&owner(), &self.event)
            .await
            .unwrap();
        people.into_iter().map(|p| p.name).collect()
    }

    /// Register `name`, then a message in which the model asks to withdraw them: the held
    /// call's reply, as sent, and the buttons recorded with it.
    async fn hold_withdrawal(
        &self,
        platform: Platform,
        name: &str,
    ) -> (String, Vec<store::Button>) {
        let person = self
            .planner
            .register_attendee(&owner(), &self.event, name, "x@example.com")
            .await
            .unwrap();
        self.model.push(Reply::tool_call(
            "c1",
            "withdraw_attendee",
            json!({"attendee_id": person.id}),
        ));
        self.model
            .push(Reply::text(&format!("Withdraw {name} from Spring Open?")));
        let before = self.api.calls().len();
        self.post(platform, &platform.message(&format!("withdraw {name}")))
            .await;
        let calls = self.api.wait_for(before + 1).await;
        let sent = platform.texts(&calls[before..]).join("\n");
        // The reply is recorded right after it went out.
        let question = format!("Withdraw {name}");
        let buttons = tests::browser::eventually("the reply recorded", || async {
            let visible = self
                .server
                .app
                .store
                .visible(&platform.conversation())
                .await
                .ok()?;
            let last = visible.last()?;
            last.text.contains(&question).then(|| last.buttons.clone())
        })
        .await;
        assert!(self.names().await.contains(&name.to_owned()), "held");
        (sent, buttons)
    }

    /// Deliver a press and wait for the reply it gets.
    async fn press(&self, platform: Platform, d: Delivery) -> String {
        let before = self.api.calls().len();
        self.post(platform, &d).await;
        loop {
            let calls = self.api.wait_for(before + 1).await;
            let texts = platform.texts(&calls[before..]);
            if !texts.is_empty() {
                return texts.join("\n");
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// The words of the last message `request` sent the model (the user's, with any harness note).
fn last_words(request: &backend::ChatRequest) -> String {
    request
        .messages
        .last()
        .unwrap()
        .parts
        .iter()
        .filter_map(transcript::Part::as_text)
        .collect()
}

/// Hold, press Yes (the model only talks: the server runs the call), hold again, press No.
async fn yes_and_no_on(platform: Platform) {
    let s = setup(platform).await;

    let (sent, buttons) = s.hold_withdrawal(platform, "Dana Lee").await;
    let ids: Vec<&str> = buttons.iter().map(|b| b.id.as_str()).collect();
    assert!(
        ids.len() == 2 && ids[0].starts_with("confirm:") && ids[1].ends_with(":no"),
        "{platform:?}: {buttons:?}"
    );
    let code = code_of(ids[0]).expect("the Yes button has a code");
    if platform == Platform::Twilio {
        assert!(
            sent.ends_with(&format!("Reply YES {code} to go ahead, or NO.")),
            "SMS says how to answer, with the code: {sent}"
        );
        assert!(
            !sent.contains(ids[0]),
            "the token stays with Bridle: {sent}"
        );
    } else {
        assert!(sent.contains("Yes, do it"), "{platform:?}: {sent}");
        assert!(
            sent.contains(ids[0]),
            "{platform:?}: the button's id goes out: {sent}"
        );
        assert!(
            !sent.contains(&code),
            "{platform:?}: no code to type: {sent}"
        );
    }
    s.model.push(Reply::text("Done: Dana Lee is withdrawn."));
    let reply = s
        .press(
            platform,
            platform.press(ids[0], "Yes, do it", &format!("yes {code}")),
        )
        .await;
    assert!(
        reply.contains("Dana Lee is withdrawn"),
        "{platform:?}: {reply}"
    );
    assert!(
        !s.names().await.contains(&"Dana Lee".to_owned()),
        "{platform:?}: the Yes press ran the held call"
    );

    let (_, buttons) = s.hold_withdrawal(platform, "Sam Roe").await;
    s.model.push(Reply::text("Alright, Sam Roe stays."));
    let reply = s
        .press(platform, platform.press(&buttons[1].id, "No", "no"))
        .await;
    assert!(reply.contains("Sam Roe stays"), "{platform:?}: {reply}");
    assert!(
        s.names().await.contains(&"Sam Roe".to_owned()),
        "{platform:?}: the No press ran nothing"
    );
    let said = last_words(s.model.requests().last().unwrap());
    assert!(
        said.contains("was not run and is cancelled"),
        "{platform:?}: {said}"
    );
    s.server.stop().await;
}

/// On SMS a reply with the question's code counts as the Yes button only when it came after
/// the question was recorded: one sent while the question's turn still ran (the user could
/// not have seen it; here someone who worked the code out) is words, and confirms nothing
/// either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sms_yes_sent_before_the_question_arrived_confirms_nothing() {
    let platform = Platform::Twilio;
    let s = setup(platform).await;
    let dana = s
        .planner
        .register_attendee(&owner(), &s.event, "Dana Lee", "x@example.com")
        .await
        .unwrap();
    let withdraw = json!({"attendee_id": dana.id});
    s.model.push(Reply::tool_call(
        "c1",
        "withdraw_attendee",
        withdraw.clone(),
    ));
    // The question is written 800 ms into its turn.
    s.model.push(
        Reply::new()
            .then_wait(std::time::Duration::from_millis(800))
            .say("Withdraw Dana Lee from Spring Open?"),
    );
    // The model takes the early "yes" as one and repeats the call: it is held again.
    s.model
        .push(Reply::tool_call("c2", "withdraw_attendee", withdraw));
    s.model.push(Reply::text("Shall I withdraw Dana Lee?"));
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let asked_on = format!("twilio#SM{n:032}");
    let yes = &engine::confirm_buttons(&platform.conversation(), &asked_on)[0];
    let code = code_of(&yes.id).unwrap();
    s.post(platform, &Platform::twilio("how is Dana doing?", n))
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    s.post(platform, &platform.message(&format!("yes {code}")))
        .await;
    s.api.wait_for(2).await;
    tests::browser::eventually("the second reply recorded", || async {
        let visible = s
            .server
            .app
            .store
            .visible(&platform.conversation())
            .await
            .ok()?;
        (visible.len() >= 4).then_some(())
    })
    .await;
    assert_eq!(
        s.model.requests().len(),
        4,
        "the yes went to the model as words"
    );
    assert!(
        s.names().await.contains(&"Dana Lee".to_owned()),
        "the early yes ran nothing"
    );
    let asked = s.api.calls();
    let question = platform.texts(&asked).join("\n");
    assert!(
        question.contains(&format!("YES {code}")),
        "the early reply carried the code of the question it came before: {question}"
    );
    s.server.stop().await;
}

/// Carriers do not authenticate an SMS's `From`: someone sending as the user's number can ask
/// for a withdrawal, but its question goes to the real phone. Answering it blind — "yes", the
/// old option number, the button's title, a made-up code, or the code the message ids in the
/// logs would give without the server's key — runs nothing, even when the model
/// takes the words as a yes and repeats the call; each try is held again and asked with a
/// new code. The code the phone got runs it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sms_yes_without_the_questions_code_confirms_nothing() {
    let platform = Platform::Twilio;
    let s = setup(platform).await;
    let (sent, buttons) = s.hold_withdrawal(platform, "Dana Lee").await;
    let dana = s.planner.list_attendees(&owner(), &s.event).await.unwrap();
    let withdraw = json!({"attendee_id": dana[0].id});
    let mut code = code_of(&buttons[0].id).unwrap();
    assert!(sent.contains(&code), "{sent}");
    let mut asked = 2;
    // The code the token alone gives: what someone reading the logs (the message ids a token
    // is hashed from) could work out. The server's key is not there.
    let unkeyed = engine::confirm_code(&buttons[0].id, None).unwrap();
    assert_ne!(unkeyed, code, "the server keys its codes");
    let unkeyed = format!("YES {unkeyed}");
    for (n, blind) in [
        unkeyed.as_str(),
        "yes",
        "1",
        "Yes, do it",
        "YES 000000",
        "y",
    ]
    .into_iter()
    .enumerate()
    {
        let guess = if blind.ends_with(code.as_str()) {
            "YES 999999"
        } else {
            blind
        };
        // The model believes the sender and repeats the call.
        s.model.push(Reply::tool_call(
            &format!("again{n}"),
            "withdraw_attendee",
            withdraw.clone(),
        ));
        s.model
            .push(Reply::text("Withdraw Dana Lee from Spring Open?"));
        let reply = s.press(platform, platform.message(guess)).await;
        asked += 2;
        let requests = s.model.requests();
        assert_eq!(requests.len(), asked, "{guess}: read as words");
        let seen = last_words(&requests[asked - 2]);
        assert_eq!(
            seen.contains("a typed yes confirms nothing"),
            engine::affirms(guess),
            "{guess}: the model is told a yes did nothing: {seen}"
        );
        assert!(
            s.names().await.contains(&"Dana Lee".to_owned()),
            "{guess}: ran nothing"
        );
        let fresh = tests::browser::eventually("the new question recorded", || async {
            let visible = s
                .server
                .app
                .store
                .visible(&platform.conversation())
                .await
                .ok()?;
            let last = visible.last()?;
            let id = &last.buttons.first()?.id;
            code_of(id).filter(|c| *c != code)
        })
        .await;
        assert!(
            reply.contains(&format!("YES {fresh}")),
            "{guess}: asked again: {reply}"
        );
        code = fresh;
    }
    s.model.push(Reply::text("Done: Dana Lee is withdrawn."));
    let reply = s
        .press(platform, platform.message(&format!("yes {code}")))
        .await;
    assert!(reply.contains("Dana Lee is withdrawn"), "{reply}");
    assert!(
        !s.names().await.contains(&"Dana Lee".to_owned()),
        "the code the phone got ran the held call"
    );
    s.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whatsapp_reply_buttons_decide() {
    yes_and_no_on(Platform::WhatsApp).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telegram_inline_keyboard_decides() {
    yes_and_no_on(Platform::Telegram).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_block_buttons_decide() {
    yes_and_no_on(Platform::Slack).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sms_typed_answers_decide() {
    yes_and_no_on(Platform::Twilio).await;
}

/// `POST /api/conversations/{id}/messages` with `body`; the whole event stream.
async fn post_message(
    server: &TestServer,
    conversation: &str,
    body: serde_json::Value,
) -> Vec<tests::server::Sse> {
    let res = server
        .client
        .post(server.url(&format!("/api/conversations/{conversation}/messages")))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "posting a message");
    tests::server::parse_sse(&res.text().await.unwrap())
}

/// The web chat: the reply's buttons arrive in the stream, and a POST with the Yes button's id
/// runs the held call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_chat_buttons_decide() {
    let model = Arc::new(ScriptedModel::new([]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let store: Arc<dyn Store> = server.app.store.clone();
    let planner = Planner::new(store);
    let owner = owner();
    let new_event = NewEvent {
        title: "Spring Open".into(),
        starts_at: "2025-04-12T10:00".into(),
        venue: "Court 1".into(),
        capacity: 10,
    };
    let event = planner.create_event(&owner, new_event).await.unwrap();
    planner.publish_event(&owner, &event.id).await.unwrap();
    let dana = planner
        .register_attendee(&owner, &event.id, "Dana Lee", "d@example.com")
        .await
        .unwrap();
    let conv = server.new_conversation().await;
    model.push(Reply::tool_call(
        "c1",
        "withdraw_attendee",
        json!({"attendee_id": dana.id}),
    ));
    model.push(Reply::text("Withdraw Dana Lee from Spring Open?"));
    let events = post_message(&server, &conv, json!({"text": "withdraw Dana"})).await;
    let shaped = events
        .iter()
        .find(|(name, _)| name == "shaped")
        .map(|(_, data)| data.clone())
        .expect("the held call's reply carries buttons");
    let yes = shaped["buttons"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(shaped["buttons"][0]["title"], "Yes, do it");
    assert!(yes.starts_with("confirm:"));

    model.push(Reply::text("Done."));
    post_message(
        &server,
        &conv,
        json!({"text": "Yes, do it", "button_id": yes}),
    )
    .await;
    let left = planner.list_attendees(&owner, &event.id).await.unwrap();
    assert!(left.is_empty(), "the press ran the held call");
    server.stop().await;
}
