//! Prompt-cache points as Bedrock receives them: the request bodies the fake Bedrock recorded
//! from the real SDK client, per model family, with caching off, next to reasoning, and across
//! the requests of a growing conversation (the stable prefix the cache is for).

mod support;

use backend::{
    ChatMessage, ChatModel, ChatRequest, InferenceSettings, ModelEvent, ReasoningDelta, Reply,
    StopReason, ToolSpec,
};
use fake_bedrock::{FakeBedrock, RecordedRequest, Scenario};
use futures::StreamExt;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use support::serve;
use transcript::{Part, Reasoning, Role};

const CLAUDE: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";
const NOVA: &str = "amazon.nova-pro-v1:0";
const LLAMA: &str = "meta.llama3-3-70b-instruct-v1:0";

/// A cache point as it travels in every field.
const CACHE_POINT_JSON: &str = r#"{"cachePoint":{"type":"default"}}"#;

fn cache_point() -> Value {
    json!({"cachePoint": {"type": "default"}})
}

fn tools() -> Vec<ToolSpec> {
    ["weather", "now"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.into(),
            description: format!("The {name} tool."),
            // Several keys at each level: the SDK would write them in hash order.
            input_schema: json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            }),
        })
        .collect()
}

fn user(text: &str) -> ChatMessage {
    ChatMessage {
        role: Role::User,
        parts: vec![Part::text(text)].into(),
    }
}

fn request(messages: Vec<ChatMessage>) -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You are Bridle.".into(),
        messages,
        tools: tools().into(),
        settings: InferenceSettings::default(),
    }
}

/// The body Bedrock received for `request` sent through the adapter for `model_id`.
async fn sent(model_id: &str, request: ChatRequest) -> Value {
    let (fake, model) = serve(model_id, vec![Scenario::reply(&Reply::text("ok"))]).await;
    let items: Vec<_> = model.stream(request).await.unwrap().collect().await;
    assert!(matches!(items.last(), Some(Ok(ModelEvent::Done { .. }))));
    let seen = only_request(&fake);
    // The body is rewritten with sorted keys before signing; its length must follow.
    assert_eq!(
        seen.headers["content-length"],
        seen.raw_body.len().to_string()
    );
    seen.body
}

fn only_request(fake: &FakeBedrock) -> RecordedRequest {
    let mut seen = fake.requests();
    assert_eq!(seen.len(), 1);
    seen.remove(0)
}

fn last_content(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_array()
        .unwrap()
}

fn cache_point_count(body: &Value) -> usize {
    body.to_string().matches(CACHE_POINT_JSON).count()
}

#[tokio::test]
async fn claude_gets_points_after_system_tools_and_the_last_message() {
    let body = sent(
        CLAUDE,
        request(vec![user("Weather?"), user("In Oslo, please.")]),
    )
    .await;
    assert_eq!(
        body["system"],
        json!([{"text": "You are Bridle."}, cache_point()])
    );
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    assert_eq!(tools[0]["toolSpec"]["name"], "weather");
    assert_eq!(tools[1]["toolSpec"]["name"], "now");
    assert_eq!(tools[2], cache_point());
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": [
            {"text": "Weather?"}, {"text": "In Oslo, please."}, cache_point(),
        ]}])
    );
    assert!(cache_point_count(&body) <= backend_bedrock::MAX_CACHE_POINTS);
}

#[tokio::test]
async fn nova_gets_no_point_in_the_tool_list() {
    let body = sent(NOVA, request(vec![user("Weather?")])).await;
    assert_eq!(
        body["system"],
        json!([{"text": "You are Bridle."}, cache_point()])
    );
    let tools = body["toolConfig"]["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(tools.iter().all(|t| t.get("toolSpec").is_some()));
    assert_eq!(last_content(&body).last(), Some(&cache_point()));
    assert_eq!(cache_point_count(&body), 2);
}

#[tokio::test]
async fn llama_and_caching_turned_off_get_none() {
    let body = sent(LLAMA, request(vec![user("Weather?")])).await;
    assert_eq!(cache_point_count(&body), 0, "{body}");
    assert_eq!(body["system"], json!([{"text": "You are Bridle."}]));

    let mut off = request(vec![user("Weather?")]);
    off.settings.prompt_cache = false;
    let body = sent(CLAUDE, off).await;
    assert_eq!(cache_point_count(&body), 0, "{body}");
    assert_eq!(body["toolConfig"]["tools"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn no_point_directly_after_a_reasoning_block() {
    let ends_in_reasoning = ChatMessage {
        role: Role::Assistant,
        parts: vec![
            Part::text("Let me think."),
            Part::Reasoning(Reasoning::Text {
                text: "Oslo is cold.".into(),
                signature: Some("sig==".into()),
            }),
        ]
        .into(),
    };
    let body = sent(CLAUDE, request(vec![user("Weather?"), ends_in_reasoning])).await;
    let last = last_content(&body);
    assert_eq!(last.len(), 2, "{last:?}");
    assert!(last[1].get("reasoningContent").is_some(), "{last:?}");
    assert!(
        !body["messages"].to_string().contains(CACHE_POINT_JSON),
        "{body}"
    );
    // The system prompt and the tools keep theirs.
    assert_eq!(cache_point_count(&body), 2);
}

/// The assistant message the engine would store for a streamed answer.
fn assistant_message(events: &[ModelEvent]) -> ChatMessage {
    let mut parts = Vec::new();
    let mut reasoning = String::new();
    let mut text = String::new();
    for event in events {
        match event {
            ModelEvent::Reasoning {
                delta: ReasoningDelta::Text(t),
            } => reasoning.push_str(t),
            ModelEvent::Reasoning {
                delta: ReasoningDelta::Signature(signature),
            } => parts.push(Part::Reasoning(Reasoning::Text {
                text: std::mem::take(&mut reasoning),
                signature: Some(signature.clone()),
            })),
            ModelEvent::Text { text: t } => text.push_str(t),
            ModelEvent::ToolUse { id, name, input } => {
                parts.push(Part::text(std::mem::take(&mut text)));
                parts.push(Part::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
            }
            _ => {}
        }
    }
    if !text.is_empty() {
        parts.push(Part::text(text));
    }
    ChatMessage::new(Role::Assistant, parts)
}

/// A recorded body's top-level fields and messages, each exactly as the bytes arrived.
struct RawBody<'a> {
    fields: BTreeMap<&'a str, &'a RawValue>,
    messages: Vec<&'a str>,
}

fn raw_body(text: &str) -> RawBody<'_> {
    let fields: BTreeMap<&str, &RawValue> = serde_json::from_str(text).unwrap();
    let messages: Vec<&RawValue> = serde_json::from_str(fields["messages"].get()).unwrap();
    RawBody {
        fields,
        messages: messages.into_iter().map(RawValue::get).collect(),
    }
}

/// Request N and request N+1 of one conversation: everything before N's last message
/// is byte for byte the same, and so are the system prompt, the tools and the settings.
///
/// The one thing that moves is the message cache point: in request N it ends the last
/// message; in request N+1 that message is no longer last, so it is sent without it and the
/// point ends the new last message instead. The point is a marker, not content: Bedrock caches
/// the prefix up to the marked block and looks for earlier cached prefixes behind a later point,
/// so request N+1 still reads what request N wrote.
fn assert_stable_prefix(before: &[u8], after: &[u8]) {
    let (before_text, after_text) = (
        std::str::from_utf8(before).unwrap(),
        std::str::from_utf8(after).unwrap(),
    );
    let (n, n1) = (raw_body(before_text), raw_body(after_text));
    for field in ["system", "toolConfig", "inferenceConfig"] {
        assert_eq!(
            n.fields[field].get(),
            n1.fields[field].get(),
            "{field} changed between requests"
        );
    }
    assert!(n1.messages.len() > n.messages.len());
    let last = n.messages.len() - 1;
    assert_eq!(
        n.messages[..last],
        n1.messages[..last],
        "an earlier message changed"
    );
    // The previous last message: the same bytes, less exactly its one cache point.
    let with_point = n.messages[last];
    assert_eq!(with_point.matches(CACHE_POINT_JSON).count(), 1);
    assert_eq!(
        with_point.replacen(&format!(",{CACHE_POINT_JSON}"), "", 1),
        n1.messages[last]
    );
    assert!(
        n1.messages.last().unwrap().contains(CACHE_POINT_JSON),
        "the new last message carries the point"
    );
    assert!(
        n1.messages[..n1.messages.len() - 1]
            .iter()
            .all(|m| !m.contains(CACHE_POINT_JSON))
    );
    // On the wire the body is one byte string (the SDK writes `messages` before `system` and
    // `toolConfig`): request N+1 starts with every byte of request N up to its message point.
    let moving_point = before_text.find(CACHE_POINT_JSON).unwrap();
    assert!(
        n.fields["messages"].get().contains(CACHE_POINT_JSON)
            && moving_point < before_text.find(r#""system":"#).unwrap(),
        "the first point in the body is the message point"
    );
    let shared = &before[..moving_point - 1]; // up to the comma before the point
    assert!(
        after.starts_with(shared),
        "request N+1 does not start with request N's bytes before the moving point"
    );
}

#[tokio::test]
async fn consecutive_requests_share_a_byte_identical_prefix() {
    let first_answer = Reply::new()
        .reason("Oslo, today.", "sig-1==")
        .say("Checking the weather.")
        .call("tooluse_1", "weather", json!({"city": "Oslo"}))
        .stop(StopReason::ToolUse);
    let second_answer = Reply::text("It is -3 °C and snowing in Oslo.");
    let third_answer = Reply::text("Tomorrow too.");
    let (fake, model) = serve(
        CLAUDE,
        vec![
            Scenario::reply(&first_answer),
            Scenario::reply(&second_answer),
            Scenario::reply(&third_answer),
        ],
    )
    .await;

    let context = "<context>now: 2026-01-05 09:00 Europe/Oslo</context>";
    let mut conversation = vec![ChatMessage {
        role: Role::User,
        parts: vec![
            Part::text(context),
            Part::text("<user_message>Weather in Oslo?</user_message>"),
        ]
        .into(),
    }];
    let play = async |conversation: &mut Vec<ChatMessage>| {
        let events: Vec<ModelEvent> = model
            .stream(request(conversation.clone()))
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        conversation.push(assistant_message(&events));
    };

    play(&mut conversation).await;
    conversation.push(ChatMessage {
        role: Role::Tool,
        parts: vec![Part::ToolResult {
            tool_use_id: "tooluse_1".into(),
            content: json!({"temp_c": -3, "sky": "snow"}),
            is_error: false,
        }]
        .into(),
    });
    play(&mut conversation).await;
    conversation.push(ChatMessage {
        role: Role::User,
        parts: vec![
            Part::text("<context>now: 2026-01-05 09:01 Europe/Oslo</context>"),
            Part::text("<user_message>And tomorrow?</user_message>"),
        ]
        .into(),
    });
    play(&mut conversation).await;

    let seen = fake.requests();
    assert_eq!(seen.len(), 3);
    let messages = |i: usize| seen[i].body["messages"].as_array().unwrap().len();
    assert_eq!((messages(0), messages(1), messages(2)), (1, 3, 5));
    // The replayed assistant message keeps its reasoning first and takes no point of its own.
    assert_eq!(
        seen[1].body["messages"][1]["content"][0]["reasoningContent"]["reasoningText"],
        json!({"text": "Oslo, today.", "signature": "sig-1=="})
    );
    for pair in seen.windows(2) {
        assert_stable_prefix(&pair[0].raw_body, &pair[1].raw_body);
    }
}
