//! Attachments through the real SDK client against the fake Bedrock runtime, which refuses an
//! S3 location from a model that reads none, as Bedrock does (Anthropic's models: the default).
//! Such a model gets an attachment's bytes, read through the media source; one that cannot be
//! read, or is larger than Converse takes, goes as a line naming it; Amazon Nova's models get
//! the S3 location and nothing is read. Before, every photo went as an S3 location, and the
//! refusal failed that turn and every later one of the conversation (the history carries it).

mod support;

use async_trait::async_trait;
use backend::{ChatMessage, ChatModel, ChatRequest, InferenceSettings, MediaSource, Reply};
use backend_bedrock::{BedrockModel, MAX_IMAGE_BYTES};
use fake_bedrock::{S3_LINKS_REFUSED_MESSAGE, Scenario};
use futures::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use transcript::{MediaRef, Part, Role};

const CLAUDE: &str = "anthropic.claude-sonnet-4-5-20250929-v1:0";
const NOVA: &str = "amazon.nova-pro-v1:0";
const PHOTO: &str = "s3://media-bucket/media/whatsapp/c1/m1/0";
const REPORT: &str = "s3://media-bucket/media/whatsapp/c1/m1/1";

/// Attachments in a map, as a media store keeps them; the keys it was asked for.
#[derive(Debug, Default)]
struct Stored {
    bytes: HashMap<String, Vec<u8>>,
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl MediaSource for Stored {
    async fn bytes(&self, media: &MediaRef) -> Option<Vec<u8>> {
        self.asked.lock().unwrap().push(media.key.clone());
        self.bytes.get(&media.key).cloned()
    }
}

fn media(key: &str, mime_type: &str) -> MediaRef {
    MediaRef {
        key: key.into(),
        mime_type: mime_type.into(),
        size_bytes: 0,
    }
}

/// `key` as the transcript keeps it, its stored size known.
fn sized(key: &str, mime_type: &str, size_bytes: u64) -> MediaRef {
    MediaRef {
        size_bytes,
        ..media(key, mime_type)
    }
}

/// "What is in these?" with a photo and a PDF.
fn with_attachments() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![ChatMessage {
            role: Role::User,
            parts: vec![
                Part::text("What is in these?"),
                Part::Image(media(PHOTO, "image/jpeg")),
                Part::Document(media(REPORT, "application/pdf")),
            ]
            .into(),
        }],
        tools: Default::default(),
        settings: InferenceSettings::default(),
    }
}

/// The request's content blocks as Bedrock received them.
fn blocks(body: &Value) -> Vec<Value> {
    body["messages"][0]["content"].as_array().unwrap().clone()
}

/// Streams `request` to the end; the error's kind, if it failed.
async fn answered(model: &BedrockModel, request: ChatRequest) -> Result<(), String> {
    let mut stream = model.stream(request).await.map_err(|e| format!("{e:?}"))?;
    while let Some(item) = stream.next().await {
        item.map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

#[tokio::test]
async fn a_model_that_reads_no_s3_location_gets_the_bytes() {
    let (fake, model) = support::serve(CLAUDE, vec![Scenario::reply(&Reply::text("A cat."))]).await;
    let stored = Arc::new(Stored {
        bytes: HashMap::from([
            (PHOTO.to_owned(), b"\xff\xd8jpeg bytes".to_vec()),
            (REPORT.to_owned(), b"%PDF-1.7 report".to_vec()),
        ]),
        ..Stored::default()
    });
    let model = model.with_media(stored.clone());
    answered(&model, with_attachments())
        .await
        .expect("answered");
    let sent = blocks(&fake.requests()[0].body);
    assert_eq!(sent[1]["image"]["format"], "jpeg");
    assert_eq!(sent[1]["image"]["source"]["bytes"], "/9hqcGVnIGJ5dGVz");
    assert_eq!(sent[2]["document"]["format"], "pdf");
    assert_eq!(
        sent[2]["document"]["source"]["bytes"],
        "JVBERi0xLjcgcmVwb3J0"
    );
    assert!(
        !fake.requests()[0]
            .raw_body
            .windows(10)
            .any(|w| w == b"s3Location")
    );
    assert_eq!(stored.asked.lock().unwrap().len(), 2);
}

/// Without a media source, an attachment it cannot read, or one larger than Converse takes:
/// a line names it, and the turn is answered.
#[tokio::test]
async fn what_cannot_go_as_bytes_goes_as_a_line_and_the_turn_is_answered() {
    let (fake, model) = support::serve(
        CLAUDE,
        vec![
            Scenario::reply(&Reply::text("I cannot see them.")),
            Scenario::reply(&Reply::text("A report.")),
        ],
    )
    .await;
    answered(&model, with_attachments())
        .await
        .expect("answered without a source");
    let sent = blocks(&fake.requests()[0].body);
    assert_eq!(sent[1]["text"], format!("[image: {PHOTO}]"));
    assert_eq!(sent[2]["text"], format!("[document: {REPORT}]"));

    // The photo is gone (past the bucket's keep) and the next too large.
    let stored = Arc::new(Stored {
        bytes: HashMap::from([(REPORT.to_owned(), vec![b'x'; MAX_IMAGE_BYTES + 1])]),
        ..Stored::default()
    });
    let mut request = with_attachments();
    request.messages[0].parts = vec![
        Part::Image(media(PHOTO, "image/jpeg")),
        Part::Image(media(REPORT, "image/png")),
    ]
    .into();
    let model = model.with_media(stored);
    answered(&model, request).await.expect("answered");
    let sent = blocks(&fake.requests()[1].body);
    assert_eq!(sent[0]["text"], format!("[image: {PHOTO}]"));
    assert_eq!(sent[1]["text"], format!("[image: {REPORT}]"));
}

/// Amazon Nova reads S3 locations: nothing is read, the location goes. Any other model sent
/// one is refused, as Bedrock refuses it (the fake's rule the tests above rely on).
#[tokio::test]
async fn nova_gets_the_s3_location_and_another_model_is_refused_it() {
    let (fake, model) = support::serve(NOVA, vec![Scenario::reply(&Reply::text("A cat."))]).await;
    let stored = Arc::new(Stored::default());
    let model = model.with_media(stored.clone());
    answered(&model, with_attachments())
        .await
        .expect("answered");
    let sent = blocks(&fake.requests()[0].body);
    assert_eq!(sent[1]["image"]["source"]["s3Location"]["uri"], PHOTO);
    assert!(stored.asked.lock().unwrap().is_empty(), "nothing read");

    // The request the adapter sent for every model before: S3 locations, here to Claude.
    let input = backend_bedrock::into_bedrock(
        &with_attachments(),
        CLAUDE,
        &backend_bedrock::Media::links(),
    )
    .unwrap();
    let (fake, _) = support::serve(CLAUDE, vec![Scenario::reply(&Reply::text("unplayed"))]).await;
    let refused = support::client(&fake.endpoint())
        .converse_stream()
        .set_model_id(input.model_id)
        .set_messages(input.messages)
        .send()
        .await
        .expect_err("refused");
    let refused = aws_sdk_bedrockruntime::error::DisplayErrorContext(&refused).to_string();
    assert!(refused.contains(S3_LINKS_REFUSED_MESSAGE), "{refused}");
}

/// The 20 MB a request may carry goes to the newest attachment first, whatever its kind: a
/// photo sent now goes as itself though four older PDFs fill most of it (the oldest is the one
/// left as a line, and, its size known, never read). The second call of the turn (a tool
/// round) reads nothing again.
#[tokio::test]
async fn the_newest_attachment_goes_first_and_a_turns_calls_read_it_once() {
    let pdf = |n: usize| format!("s3://media-bucket/media/whatsapp/c1/m1/{n}");
    let photo = "s3://media-bucket/media/whatsapp/c1/m2/0";
    let mut bytes: HashMap<String, Vec<u8>> =
        (0..4).map(|n| (pdf(n), vec![b'%'; 4_400_000])).collect();
    bytes.insert(photo.to_owned(), vec![0xff; 3_000_000]);
    let stored = Arc::new(Stored {
        bytes,
        ..Stored::default()
    });
    let (fake, model) = support::serve(
        CLAUDE,
        vec![
            Scenario::reply(&Reply::text("Four reports.")),
            Scenario::reply(&Reply::text("And a photo.")),
        ],
    )
    .await;
    let model = model.with_media(stored.clone());
    let request = ChatRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![
            ChatMessage {
                role: Role::User,
                parts: (0..4)
                    .map(|n| Part::Document(sized(&pdf(n), "application/pdf", 4_400_000)))
                    .collect::<Vec<_>>()
                    .into(),
            },
            ChatMessage {
                role: Role::Assistant,
                parts: vec![Part::text("Read them.")].into(),
            },
            ChatMessage {
                role: Role::User,
                parts: vec![Part::Image(sized(photo, "image/jpeg", 3_000_000))].into(),
            },
        ],
        tools: Default::default(),
        settings: InferenceSettings::default(),
    };
    answered(&model, request.clone()).await.expect("answered");
    answered(&model, request).await.expect("answered again");
    let body = &fake.requests()[1].body;
    let newest = &body["messages"][2]["content"][0];
    assert!(
        newest["image"]["source"]["bytes"].is_string(),
        "the photo goes: {}",
        newest["text"]
    );
    let older = body["messages"][0]["content"].as_array().unwrap();
    assert_eq!(
        older[0]["text"],
        format!("[document: {}]", pdf(0)),
        "the oldest is the line"
    );
    assert!(
        older[1..]
            .iter()
            .all(|b| b["document"]["source"]["bytes"].is_string())
    );
    // The oldest PDF, known to be past what is left, is never read; the rest once.
    assert_eq!(
        stored.asked.lock().unwrap().len(),
        4,
        "read once for both calls"
    );
}
