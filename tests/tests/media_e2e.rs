//! Attachments end to end through the local server: a signed WhatsApp image message →
//! `POST /webhooks/whatsapp` → the embedded queue → the worker's channel job → the media fetched
//! from the fake Graph API in two hops and stored by reference → the scripted model sees the
//! image part with the stored key. An image over the cap never downloads: the model gets the
//! words with a note, and the user still gets a reply.

use backend::{Reply, ScriptedModel};
use bridle::channel_setup::ChannelSetup;
use bridle::guards::GuardOptions;
use bridle::{AppOptions, OtherStore};
use budget::BudgetConfig;
use budget::{Cap, Source};
use channels::media::{InMemory, MediaStore, StoredMedia};
use queue::QueueSettings;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use tests::platform_api::PlatformApi;
use tests::server::TestServer;
use transcript::{MediaRef, Part, Role};

const WA_SECRET: &str = "wa-app-secret";
const WA_TOKEN: &str = "wa-access-token";
const USER: &str = "16315551181";
/// A small cap (`BRIDLE_MEDIA_MAX_BYTES`) so "too large" is cheap.
const CAP: u64 = 4096;

struct Setup {
    server: TestServer,
    api: PlatformApi,
    model: Arc<ScriptedModel>,
    media: Arc<InMemory>,
}

async fn setup(replies: Vec<Reply>) -> Setup {
    setup_with(replies, Options::default()).await
}

/// What a test sets besides the channel: caps, the queue's deliveries, another store.
#[derive(Default)]
struct Options {
    budget: BudgetConfig,
    queue: QueueSettings,
    store: Option<Arc<dyn store::Store>>,
}

async fn setup_with(replies: Vec<Reply>, options: Options) -> Setup {
    let api = PlatformApi::start().await;
    let vars: HashMap<&str, String> = [
        ("PUBLIC_BASE_URL", "https://bridle.example".to_owned()),
        ("WHATSAPP_APP_SECRET", WA_SECRET.into()),
        ("WHATSAPP_VERIFY_TOKEN", "wa-verify".into()),
        ("WHATSAPP_ACCESS_TOKEN", WA_TOKEN.into()),
        ("WHATSAPP_PHONE_NUMBER_ID", "106540352242922".into()),
        ("WHATSAPP_API_BASE", api.base.clone()),
        ("BRIDLE_MEDIA_MAX_BYTES", CAP.to_string()),
    ]
    .into_iter()
    .collect();
    let mut channels = ChannelSetup::from_vars(&|k| vars.get(k).cloned(), &reqwest::Client::new())
        .expect("channels configure");
    let media = Arc::new(InMemory::default());
    channels.media_store = Some(media.clone());
    let model = Arc::new(ScriptedModel::new(replies));
    let server = TestServer::start(
        model.clone(),
        AppOptions {
            channels,
            guards: GuardOptions {
                budget: Arc::new(options.budget),
                ..GuardOptions::default()
            },
            queue: options.queue,
            store: options.store.map(OtherStore),
            ..AppOptions::default()
        },
    )
    .await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    server
        .app
        .store
        .bind_identity("whatsapp", USER, &"local".into(), now)
        .await
        .unwrap();
    Setup {
        server,
        api,
        model,
        media,
    }
}

impl Setup {
    /// The text of the user's last message in the model's transcript, which must be text
    /// alone (an attachment not kept is a note in it, not a part).
    async fn last_user_text(&self) -> String {
        let messages = self
            .server
            .app
            .store
            .messages(&"whatsapp:16315551181@local".into(), 0)
            .await
            .unwrap();
        let last_user = messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .expect("the message is kept");
        let [Part::Text { text }] = &last_user.parts[..] else {
            panic!("one text part and no attachment: {:?}", last_user.parts);
        };
        text.clone()
    }

    /// A signed WhatsApp image message with a caption.
    async fn send_image(&self, message_id: &str, media_id: &str, caption: &str) -> u16 {
        // Sent now: the webhook drops deliveries older than duplicates are remembered.
        let sent = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            .to_string();
        let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398",
            "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
            "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
            "contacts": [{"profile": {"name": "Kerry"}, "wa_id": USER}],
            "messages": [{"from": USER, "id": message_id, "timestamp": sent, "type": "image",
                          "image": {"caption": caption, "mime_type": "image/jpeg", "sha256": "x", "id": media_id}}]}}]}]})
        .to_string();
        let sig = channels::whatsapp::sign(WA_SECRET.as_bytes(), body.as_bytes());
        self.server
            .client
            .post(self.server.url("/webhooks/whatsapp"))
            .header("x-hub-signature-256", sig)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// Graph's media lookup for `media_id`, declaring `size`, with the download at `/cdn/{id}`.
    fn graph_media(&self, media_id: &str, size: u64, bytes: Vec<u8>) {
        let lookup = json!({"messaging_product": "whatsapp", "url": format!("{}/cdn/{media_id}", self.api.base),
            "mime_type": "image/jpeg", "sha256": "x", "file_size": size.to_string(), "id": media_id});
        self.api.serve(
            &format!("/v21.0/{media_id}"),
            200,
            "application/json",
            lookup.to_string().into_bytes(),
        );
        self.api
            .serve(&format!("/cdn/{media_id}"), 200, "image/jpeg", bytes);
    }

    /// The paths the fake platform was asked for (GETs), in order.
    fn gets(&self) -> Vec<String> {
        self.api
            .calls()
            .into_iter()
            .filter(|c| c.method == "GET")
            .map(|c| c.path)
            .collect()
    }

    /// The reply texts the fake platform received (POSTs to the messages endpoint).
    async fn replies(&self, n: usize) -> Vec<String> {
        for _ in 0..500 {
            let texts: Vec<String> = self
                .api
                .calls()
                .into_iter()
                .filter(|c| c.method == "POST" && c.path.ends_with("/messages"))
                .map(|c| c.body)
                .collect();
            if texts.len() >= n {
                return texts;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("expected {n} replies, got calls {:#?}", self.api.calls());
    }

    /// The parts of the user message of the model's `n`th request.
    fn user_parts(&self, n: usize) -> Vec<Part> {
        let requests = self.model.requests();
        let last = requests[n]
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .expect("a user message");
        last.parts.to_vec()
    }
}

#[tokio::test]
async fn a_whatsapp_image_reaches_the_model_by_reference() {
    let s = setup(vec![Reply::text("A cat on a sofa.")]).await;
    let picture: Vec<u8> = (0..3000u32).map(|i| (i % 251) as u8).collect();
    s.graph_media("1234567890", 3000, picture.clone());
    assert_eq!(
        s.send_image("wamid.img1", "1234567890", "What is in this picture?")
            .await,
        200
    );
    let replies = s.replies(1).await;
    assert!(replies[0].contains("A cat on a sofa."), "{replies:?}");

    let key = "media/whatsapp/16315551181/wamid.img1/0";
    assert_eq!(s.media.keys(), [key]);
    assert_eq!(
        s.media.get(key).await.unwrap(),
        StoredMedia {
            mime_type: "image/jpeg".into(),
            bytes: picture
        }
    );
    let parts = s.user_parts(0);
    assert!(
        matches!(&parts[0], Part::Text { text } if text.contains("What is in this picture?")),
        "{parts:?}"
    );
    assert_eq!(
        parts[1..],
        [Part::Image(MediaRef {
            key: key.into(),
            mime_type: "image/jpeg".into(),
            size_bytes: 3000
        })]
    );
    // The two hops, in order.
    let gets = s.gets();
    assert_eq!(gets, ["/v21.0/1234567890", "/cdn/1234567890"]);
    // The visible transcript keeps the user's words only.
    let visible = s
        .server
        .app
        .store
        .visible(&"whatsapp:16315551181@local".into())
        .await
        .unwrap();
    assert_eq!(visible[0].text, "What is in this picture?");
}

#[tokio::test]
async fn an_image_over_the_cap_becomes_a_note_and_the_user_still_gets_a_reply() {
    let s = setup(vec![Reply::text("I could not open that picture.")]).await;
    s.graph_media("999", CAP + 1, vec![0u8; CAP as usize + 1]);
    assert_eq!(s.send_image("wamid.big1", "999", "Look!").await, 200);
    let replies = s.replies(1).await;
    assert!(
        replies[0].contains("I could not open that picture."),
        "{replies:?}"
    );
    let parts = s.user_parts(0);
    assert_eq!(parts.len(), 1, "no attachment part: {parts:?}");
    let Part::Text { text } = &parts[0] else {
        panic!("{parts:?}")
    };
    assert!(text.contains("Look!"), "{text}");
    assert!(
        text.contains("[The user sent an image that could not be read: it is larger than 4 KB.]"),
        "{text}"
    );
    assert!(s.media.keys().is_empty(), "nothing stored");
    let gets = s.gets();
    assert_eq!(gets, ["/v21.0/999"], "the download was never requested");
    let visible = s
        .server
        .app
        .store
        .visible(&"whatsapp:16315551181@local".into())
        .await
        .unwrap();
    assert_eq!(visible[0].text, "Look!", "the note is for the model only");
}

/// A conversation already at its messages-per-hour cap gets the busy sentence, and its
/// attachments are not fetched: a sender over the rate (or a budget window) costs no download
/// and no storage per message. The transcript notes that an image came.
#[tokio::test]
async fn an_image_sent_over_the_rate_is_not_fetched() {
    let budget = BudgetConfig {
        conversation_messages_per_hour: Cap {
            limit: Some(1),
            source: Source::Default,
        },
        ..BudgetConfig::default()
    };
    let s = setup_with(
        vec![
            Reply::text("A cat."),
            Reply::text("never said: over the rate"),
        ],
        Options {
            budget,
            ..Options::default()
        },
    )
    .await;
    s.graph_media("111", 3000, vec![1; 3000]);
    assert_eq!(s.send_image("wamid.r1", "111", "And this?").await, 200);
    s.replies(1).await;
    s.graph_media("555", 3000, vec![7; 3000]);
    assert_eq!(s.send_image("wamid.r2", "555", "And this one?").await, 200);
    let replies = s.replies(2).await;
    let busy: serde_json::Value = serde_json::from_str(&replies[1]).unwrap();
    assert_eq!(busy["text"]["body"], budget::lines::CONVERSATION_BUSY);
    assert_eq!(
        s.gets(),
        ["/v21.0/111", "/cdn/111"],
        "the second image not fetched"
    );
    assert_eq!(s.media.keys(), ["media/whatsapp/16315551181/wamid.r1/0"]);
    assert_eq!(s.model.requests().len(), 1, "no model call over the rate");
    let text = s.last_user_text().await;
    assert!(
        text.contains(
            "And this one?\n\n[The user sent an image that was not kept: it came while a usage \
             limit was reached.]"
        ),
        "{text}"
    );
}

/// A job tried again after its turn started resumes from the message it stored: its
/// attachment is not fetched again (here the first fetch failed, and the reply's delivery
/// fails every time, so the job is tried twice and then given up).
async fn a_resumed_turn_does_not_fetch_its_attachment_again(store: Option<Arc<dyn store::Store>>) {
    let s = setup_with(
        vec![Reply::text("POISON: no picture came through.")],
        Options {
            queue: QueueSettings {
                max_receives: 2,
                ..QueueSettings::default()
            },
            store,
            ..Options::default()
        },
    )
    .await;
    s.api
        .refuse("POISON", 500, json!({"error": {"message": "internal"}}));
    // No such media: the lookup answers nothing usable, and the model gets a note.
    assert_eq!(s.send_image("wamid.x1", "999", "See this?").await, 200);
    let replies = s.replies(3).await;
    assert!(
        replies[2].contains("couldn't process that message"),
        "given up after two deliveries: {replies:?}"
    );
    assert_eq!(s.model.requests().len(), 1, "the retry resumed");
    assert_eq!(s.gets(), ["/v21.0/999"], "fetched on the first try only");
}

#[tokio::test]
async fn a_resumed_turn_does_not_fetch_its_attachment_again_on_sqlite() {
    a_resumed_turn_does_not_fetch_its_attachment_again(None).await;
}

/// DynamoDB reads the conversation without its segment: the job reads it to tell.
#[tokio::test]
async fn a_resumed_turn_does_not_fetch_its_attachment_again_on_dynamodb() {
    let store: Arc<dyn store::Store> = tests::moto::dynamo_store("media-resumed").await;
    a_resumed_turn_does_not_fetch_its_attachment_again(Some(store)).await;
}

/// A paused account's turn runs no model call, so its attachments are not fetched either: a
/// script sending images to a paused (or closed) account costs no downloads and no storage.
/// (Its conversation's first message is the exception: the account is not read with it.)
#[tokio::test]
async fn a_paused_accounts_image_is_not_fetched() {
    let s = setup(vec![
        Reply::text("A cat."),
        Reply::text("never said: the account is paused"),
    ])
    .await;
    s.graph_media("111", 3000, vec![1; 3000]);
    assert_eq!(s.send_image("wamid.a1", "111", "And this?").await, 200);
    s.replies(1).await;
    s.server
        .app
        .store
        .set_account_status(&"local".into(), store::AccountStatus::Paused)
        .await
        .unwrap();
    s.graph_media("555", 3000, vec![7; 3000]);
    assert_eq!(s.send_image("wamid.p1", "555", "Look at this").await, 200);
    let replies = s.replies(2).await;
    assert!(
        !replies[1].contains("never said"),
        "the paused account's sentence: {replies:?}"
    );
    let gets = s.gets();
    assert_eq!(
        gets,
        ["/v21.0/111", "/cdn/111"],
        "the second image not fetched"
    );
    assert_eq!(s.media.keys(), ["media/whatsapp/16315551181/wamid.a1/0"]);
    assert_eq!(
        s.model.requests().len(),
        1,
        "no model call for the paused turn"
    );
    // The transcript still says an image came with the words (for an operator, and the model
    // once the account is answered again).
    let text = s.last_user_text().await;
    assert!(
        text.contains(
            "Look at this\n\n[The user sent an image that was not kept: it came while the \
             assistant was not answering here.]"
        ),
        "{text}"
    );
}
