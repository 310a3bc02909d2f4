//! The adapter against a local server that replays recorded streams in small, delayed pieces
//! (so SSE frames straddle TCP reads) and records every request it gets.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use backend::{
    BackendError, ChatMessage, ChatModel, ChatRequest, InferenceSettings, ModelEvent,
    ReasoningEffort, StopReason, ToolChoice, ToolSpec, Usage,
};
use backend_openai::{OpenAiConfig, OpenAiModel, into_openai};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use transcript::{Part, Role};

const KEY: &str = "sk-test-0123456789abcdefSECRET";

/// What the fake server answers, one per request.
enum Canned {
    Sse(Vec<u8>),
    /// SSE sent piece by piece, each after its wait.
    Paced(Vec<(Duration, &'static str)>),
    Status {
        status: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: String,
    },
}

/// What the fake server received.
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    accept: Option<String>,
    body: Value,
}

#[derive(Clone, Default)]
struct Fake {
    replies: Arc<Mutex<VecDeque<Canned>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn chat_completions(State(fake): State<Fake>, headers: HeaderMap, body: Bytes) -> Response {
    let header =
        |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    fake.seen.lock().unwrap().push(Seen {
        authorization: header(header::AUTHORIZATION),
        accept: header(header::ACCEPT),
        body: serde_json::from_slice(&body).unwrap(),
    });
    let canned = fake
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .expect("a canned reply");
    match canned {
        Canned::Sse(bytes) => {
            let pieces: Vec<Bytes> = bytes.chunks(37).map(Bytes::copy_from_slice).collect();
            let stream = futures::stream::iter(pieces).then(|piece| async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                Ok::<_, std::convert::Infallible>(piece)
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Canned::Paced(pieces) => {
            let stream = futures::stream::iter(pieces).then(|(wait, piece)| async move {
                tokio::time::sleep(wait).await;
                Ok::<_, std::convert::Infallible>(Bytes::from_static(piece.as_bytes()))
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Canned::Status {
            status,
            headers,
            body,
        } => {
            let mut response = Response::builder()
                .status(StatusCode::from_u16(status).unwrap())
                .header(header::CONTENT_TYPE, "application/json");
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
    }
}

/// Start the fake with these replies; returns it and its base URL (with a trailing slash, which
/// the adapter must handle).
async fn serve(replies: Vec<Canned>) -> (Fake, String) {
    let fake = Fake::default();
    fake.replies.lock().unwrap().extend(replies);
    let app = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (fake, format!("http://{addr}/v1/"))
}

fn model(base_url: &str, api_key: Option<&str>) -> OpenAiModel {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    OpenAiModel::new(
        OpenAiConfig {
            base_url: base_url.to_owned(),
            api_key: api_key.map(str::to_owned),
            model: "test-model".into(),
        },
        client,
    )
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You are Bridle.".into(),
        messages: vec![ChatMessage {
            role: Role::User,
            parts: vec![Part::text("Weather in Oslo and Rome?")].into(),
        }],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Current weather.".into(),
            input_schema: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        }]
        .into(),
        settings: InferenceSettings::default(),
    }
}

/// The events, without keep-alives (the pieces arrive a few milliseconds apart, so some bytes
/// complete no event; the keep-alive tests look at those).
async fn collect(model: &OpenAiModel) -> Vec<Result<ModelEvent, BackendError>> {
    model
        .stream(request())
        .await
        .unwrap()
        .filter(|e| std::future::ready(!matches!(e, Ok(ModelEvent::KeepAlive))))
        .collect()
        .await
}

#[tokio::test]
async fn streams_a_recorded_response_and_sends_the_converted_body_with_the_key() {
    let (fake, url) = serve(vec![Canned::Sse(fixture("parallel_tool_calls.sse"))]).await;
    let model = model(&url, Some(KEY));
    assert_eq!(model.name(), "openai");

    let events: Vec<ModelEvent> = collect(&model)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        vec![
            ModelEvent::text("Checking both cities."),
            ModelEvent::ToolUse {
                id: "call_Oslo111".into(),
                name: "get_weather".into(),
                input: json!({"city": "Oslo"}),
            },
            ModelEvent::ToolUse {
                id: "call_Rome222".into(),
                name: "get_weather".into(),
                input: json!({"city": "Rome"}),
            },
            ModelEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input_tokens: 120,
                    output_tokens: 40,
                    ..Usage::default()
                },
            },
        ]
    );

    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, into_openai(&request(), "test-model"));
    assert_eq!(seen[0].body["model"], "test-model");
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some(&*format!("Bearer {KEY}"))
    );
    assert_eq!(seen[0].accept.as_deref(), Some("text/event-stream"));
}

#[tokio::test]
async fn no_authorization_header_without_a_key() {
    let (fake, url) = serve(vec![
        Canned::Sse(fixture("text.sse")),
        Canned::Sse(fixture("text.sse")),
    ])
    .await;
    for key in [None, Some("")] {
        let items = collect(&model(&url, key)).await;
        assert!(matches!(
            items.last(),
            Some(Ok(ModelEvent::Done {
                stop_reason: StopReason::EndTurn,
                ..
            }))
        ));
    }
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.authorization.is_none()));
}

#[tokio::test]
async fn a_cut_off_stream_ends_in_a_transport_error() {
    let (_fake, url) = serve(vec![Canned::Sse(fixture("cut_off.sse"))]).await;
    let items = collect(&model(&url, None)).await;
    assert_eq!(items.len(), 3);
    assert!(matches!(
        items.last(),
        Some(Err(BackendError::Transport { .. }))
    ));
}

async fn open_error(canned: Canned) -> BackendError {
    let (_fake, url) = serve(vec![canned]).await;
    match model(&url, Some(KEY)).stream(request()).await {
        Ok(_) => panic!("the stream opened"),
        Err(err) => err,
    }
}

#[tokio::test]
async fn http_429_with_retry_after_is_throttled_before_any_event() {
    let err = open_error(Canned::Status {
        status: 429,
        headers: vec![("retry-after", "7")],
        body: r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#.into(),
    })
    .await;
    assert!(
        matches!(err, BackendError::Throttled { retry_after: Some(d) } if d == Duration::from_secs(7)),
        "{err:?}"
    );
}

#[tokio::test]
async fn http_500_is_overloaded() {
    let err = open_error(Canned::Status {
        status: 500,
        headers: vec![],
        body: r#"{"error":{"message":"The server had an error","type":"server_error"}}"#.into(),
    })
    .await;
    assert!(matches!(err, BackendError::Overloaded), "{err:?}");
}

#[tokio::test]
async fn http_401_is_auth_and_never_shows_the_key() {
    let err = open_error(Canned::Status {
        status: 401,
        headers: vec![],
        body: format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
        ),
    })
    .await;
    assert!(matches!(err, BackendError::Auth { .. }), "{err:?}");
    let shown = format!("{err} / {err:?}");
    assert!(!shown.contains(KEY) && !shown.contains("SECRET"), "{shown}");
}

#[tokio::test]
async fn http_400_context_length_is_context_too_long() {
    let err = open_error(Canned::Status {
        status: 400,
        headers: vec![],
        body: r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#.into(),
    })
    .await;
    assert!(matches!(err, BackendError::ContextTooLong), "{err:?}");
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_and_names_the_endpoint_without_secrets() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let url = format!("http://user:{KEY}@{addr}/v1");
    let err = match model(&url, Some(KEY)).stream(request()).await {
        Ok(_) => panic!("the stream opened"),
        Err(err) => err,
    };
    assert!(matches!(err, BackendError::Unreachable { .. }), "{err:?}");
    assert_eq!(err.kind(), "unreachable");
    assert!(err.is_retryable());
    let shown = err.to_string();
    assert_eq!(
        shown,
        format!("cannot reach the model server at http://{addr}/v1/chat/completions")
    );
    let mut chain = format!("{err:?}");
    let mut source = std::error::Error::source(&err);
    assert!(source.is_some());
    while let Some(s) = source {
        chain.push_str(&s.to_string());
        source = s.source();
    }
    assert!(!chain.contains("SECRET"), "{chain}");
}

#[tokio::test]
async fn keep_alive_comments_surface_as_keep_alives_before_the_answer() {
    let ping = Duration::from_millis(60);
    let mut pieces = vec![(Duration::ZERO, ": ping\n\n")];
    pieces.extend([(ping, ": ping - 2026-12-01 18:00:00\n\n"); 4]);
    pieces.extend([
        (
            ping,
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Ready.\"}}]}\n\n",
        ),
        (
            Duration::ZERO,
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        ),
    ]);
    let (_fake, url) = serve(vec![Canned::Paced(pieces)]).await;
    let events: Vec<ModelEvent> = model(&url, None)
        .stream(request())
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    let alive = events
        .iter()
        .take_while(|e| **e == ModelEvent::KeepAlive)
        .count();
    assert!(alive >= 4, "one keep-alive per ping, at least: {events:?}");
    assert_eq!(events[alive], ModelEvent::text("Ready."));
    assert!(matches!(
        events.last(),
        Some(ModelEvent::Done {
            stop_reason: StopReason::EndTurn,
            ..
        })
    ));
}

#[tokio::test]
async fn tool_choice_and_reasoning_effort_reach_the_server() {
    let (fake, url) = serve(vec![
        Canned::Sse(fixture("text.sse")),
        Canned::Sse(fixture("text.sse")),
        Canned::Sse(fixture("text.sse")),
    ])
    .await;
    let model = model(&url, None);
    for (choice, effort) in [
        (ToolChoice::Required, Some(ReasoningEffort::Low)),
        (ToolChoice::None, None),
        (ToolChoice::Auto, Some(ReasoningEffort::High)),
    ] {
        let mut req = request();
        req.settings.tool_choice = choice;
        req.settings.reasoning_effort = effort;
        let _: Vec<_> = model.stream(req).await.unwrap().collect().await;
    }
    let seen = fake.seen();
    assert_eq!(seen[0].body["tool_choice"], "required");
    assert_eq!(seen[0].body["reasoning_effort"], "low");
    assert_eq!(seen[1].body["tool_choice"], "none");
    assert!(seen[1].body.get("reasoning_effort").is_none());
    assert!(
        seen[2].body.get("tool_choice").is_none(),
        "auto is the default and not sent"
    );
    assert_eq!(seen[2].body["reasoning_effort"], "high");
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_taken_as_a_one_shot_stream() {
    let completion = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "local",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me check.",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59}
    });
    let (fake, url) = serve(vec![Canned::Status {
        status: 200,
        headers: vec![],
        body: completion.to_string(),
    }])
    .await;
    let events: Vec<ModelEvent> = collect(&model(&url, None))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        events,
        vec![
            ModelEvent::text("Let me check."),
            ModelEvent::ToolUse {
                id: "call_1".into(),
                name: "get_weather".into(),
                input: json!({"city": "Oslo"}),
            },
            ModelEvent::Done {
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input_tokens: 50,
                    output_tokens: 9,
                    ..Usage::default()
                },
            },
        ]
    );
    assert_eq!(fake.seen().len(), 1, "asked once, not again");
}

#[tokio::test]
async fn json_that_is_neither_a_completion_nor_an_error_is_a_transport_error() {
    let err = open_error(Canned::Status {
        status: 200,
        headers: vec![],
        body: r#"{"hello": "world"}"#.into(),
    })
    .await;
    assert!(matches!(err, BackendError::Transport { .. }), "{err:?}");
}

#[test]
fn config_debug_hides_the_key() {
    let config = OpenAiConfig {
        base_url: "https://api.openai.com/v1/".into(),
        api_key: Some(KEY.into()),
        model: "gpt-4o-mini".into(),
    };
    assert!(!format!("{config:?}").contains("SECRET"));
    assert_eq!(
        config.chat_completions_url(),
        "https://api.openai.com/v1/chat/completions"
    );
}
