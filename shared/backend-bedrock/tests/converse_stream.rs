//! The adapter through the real AWS SDK client against the fake Bedrock runtime, which speaks
//! the real event-stream framing: what streams arrive as, how damaged streams and HTTP errors
//! fail, and what request body Bedrock receives.

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use backend::{
    BackendError, ChatMessage, ChatModel, ChatRequest, EventStream, InferenceSettings, ModelEvent,
    ReasoningDelta, Reply, StopReason, ToolChoice, ToolSpec, Usage,
};
use backend_bedrock::BedrockModel;
use fake_bedrock::{FakeBedrock, Frame, Scenario};
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::Duration;
use transcript::{Part, Reasoning, Role};

const MODEL: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

/// An item as the tests compare it: the event, or the error's kind.
type Item = Result<ModelEvent, &'static str>;

/// The SDK client as production builds it, but pointed at the fake with dummy credentials
/// (no credential chain, no IMDS) and without SDK retries.
fn client(endpoint: &str) -> Client {
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

async fn serve(scenarios: Vec<Scenario>) -> (FakeBedrock, BedrockModel) {
    let fake = FakeBedrock::start(scenarios).await.unwrap();
    let model = BedrockModel::new(client(&fake.endpoint()), MODEL.to_owned());
    (fake, model)
}

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You are Bridle.".into(),
        messages: vec![ChatMessage {
            role: Role::User,
            parts: vec![Part::text("Weather in Oslo?")].into(),
        }],
        tools: vec![weather_tool()].into(),
        settings: InferenceSettings::default(),
    }
}

fn weather_tool() -> ToolSpec {
    ToolSpec {
        name: "weather".into(),
        description: "Current weather for a city.".into(),
        input_schema: json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        }),
    }
}

/// The stream without keep-alives (every frame that carries no content is one; the keep-alive
/// test looks at them).
async fn open(model: &BedrockModel) -> EventStream {
    match model.stream(request()).await {
        Ok(stream) => stream
            .filter(|e| std::future::ready(!matches!(e, Ok(ModelEvent::KeepAlive))))
            .boxed(),
        Err(err) => panic!("the stream did not open: {err:?}"),
    }
}

async fn play(scenario: Scenario) -> Vec<Item> {
    let (_fake, model) = serve(vec![scenario]).await;
    let items: Vec<_> = open(&model).await.collect().await;
    items.into_iter().map(|r| r.map_err(|e| e.kind())).collect()
}

async fn check(scenario: Scenario, expected: Vec<Item>) {
    assert_eq!(play(scenario).await, expected);
}

async fn open_error(scenario: Scenario) -> BackendError {
    let (_fake, model) = serve(vec![scenario]).await;
    match model.stream(request()).await {
        Ok(_) => panic!("the stream opened"),
        Err(err) => err,
    }
}

fn text(t: &str) -> Item {
    Ok(ModelEvent::text(t))
}

fn reasoning(delta: ReasoningDelta) -> Item {
    Ok(ModelEvent::Reasoning { delta })
}

fn call(id: &str, name: &str, input: Value) -> Item {
    Ok(ModelEvent::ToolUse {
        id: id.into(),
        name: name.into(),
        input,
    })
}

fn done(stop_reason: StopReason, input: u64, output: u64) -> Item {
    Ok(ModelEvent::Done {
        stop_reason,
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        },
    })
}

fn reasoned_tool_reply() -> Reply {
    Reply::new()
        .reason("The user wants Oslo.", "sig-abc==")
        .redacted_reasoning(&[0, 1, 2, 254, 255])
        .say("Let me check the weather in Oslo.")
        .call(
            "tooluse_1",
            "weather",
            json!({"city": "Oslo", "unit": "°C"}),
        )
        .stop(StopReason::ToolUse)
}

fn reasoned_tool_items() -> Vec<Item> {
    vec![
        reasoning(ReasoningDelta::Text("The user wants Oslo.".into())),
        reasoning(ReasoningDelta::Signature("sig-abc==".into())),
        reasoning(ReasoningDelta::Redacted(vec![0, 1, 2, 254, 255])),
        text("Let "),
        text("me "),
        text("check "),
        text("the "),
        text("weather "),
        text("in "),
        text("Oslo."),
        call(
            "tooluse_1",
            "weather",
            json!({"city": "Oslo", "unit": "°C"}),
        ),
        done(StopReason::ToolUse, 10, 12),
    ]
}

#[tokio::test]
async fn a_text_answer_streams_and_ends_with_usage() {
    check(
        Scenario::reply(&Reply::text("Hello from Bedrock")),
        vec![
            text("Hello "),
            text("from "),
            text("Bedrock"),
            done(StopReason::EndTurn, 10, 3),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_tool_call_is_assembled_from_partial_input() {
    check(
        Scenario::reply(
            &Reply::new()
                .say("Checking.")
                .call(
                    "tooluse_1",
                    "weather",
                    json!({"city": "Oslo", "days": [1, 2]}),
                )
                .stop(StopReason::ToolUse),
        ),
        vec![
            text("Checking."),
            call(
                "tooluse_1",
                "weather",
                json!({"city": "Oslo", "days": [1, 2]}),
            ),
            done(StopReason::ToolUse, 10, 6),
        ],
    )
    .await;
}

#[tokio::test]
async fn two_parallel_tool_calls_with_interleaved_blocks() {
    check(
        Scenario::frames([
            Frame::message_start(),
            Frame::text(0, "Both cities."),
            Frame::block_stop(0),
            Frame::tool_start(1, "tooluse_oslo", "weather"),
            Frame::tool_start(2, "tooluse_rome", "weather"),
            Frame::tool_input(2, "{\"city\""),
            Frame::tool_input(1, "{\"city\": "),
            Frame::tool_input(1, "\"Oslo\"}"),
            Frame::tool_input(2, ": \"Rome\"}"),
            Frame::block_stop(1),
            Frame::block_stop(2),
            Frame::message_stop("tool_use"),
            Frame::metadata(Usage {
                input_tokens: 50,
                output_tokens: 30,
                ..Usage::default()
            }),
        ]),
        vec![
            text("Both cities."),
            call("tooluse_oslo", "weather", json!({"city": "Oslo"})),
            call("tooluse_rome", "weather", json!({"city": "Rome"})),
            done(StopReason::ToolUse, 50, 30),
        ],
    )
    .await;
}

#[tokio::test]
async fn reasoning_with_its_signature_and_redacted_reasoning() {
    check(
        Scenario::reply(&reasoned_tool_reply()),
        reasoned_tool_items(),
    )
    .await;
}

#[tokio::test]
async fn frames_split_across_http_chunks_change_nothing() {
    for size in [5, 64, 1000] {
        let items = play(Scenario::reply(&reasoned_tool_reply()).in_chunks_of(size)).await;
        assert_eq!(items, reasoned_tool_items(), "{size}-byte chunks");
    }
}

#[tokio::test]
async fn usage_includes_cache_tokens() {
    let usage = Usage {
        input_tokens: 12,
        output_tokens: 5,
        cache_read_tokens: 2048,
        cache_write_tokens: 300,
    };
    check(
        Scenario::reply_with_usage(&Reply::text("Cached."), usage),
        vec![
            text("Cached."),
            Ok(ModelEvent::Done {
                stop_reason: StopReason::EndTurn,
                usage,
            }),
        ],
    )
    .await;
}

#[tokio::test]
async fn malformed_tool_input_ends_with_malformed_tool_use_and_no_call() {
    check(
        Scenario::frames([
            Frame::message_start(),
            Frame::tool_start(0, "tooluse_1", "weather"),
            Frame::tool_input(0, "{\"city\": \"Os"),
            Frame::tool_input(0, "lo\", }"),
            Frame::block_stop(0),
            Frame::message_stop("tool_use"),
            Frame::metadata(Usage::default()),
        ]),
        vec![done(StopReason::MalformedToolUse, 0, 0)],
    )
    .await;
}

#[tokio::test]
async fn guardrail_and_context_window_stop_reasons() {
    for (wire, neutral) in [
        ("guardrail_intervened", StopReason::Guardrail),
        (
            "model_context_window_exceeded",
            StopReason::ContextWindowExceeded,
        ),
    ] {
        check(
            Scenario::frames([
                Frame::message_start(),
                Frame::message_stop(wire),
                Frame::metadata(Usage::default()),
            ]),
            vec![done(neutral, 0, 0)],
        )
        .await;
    }
}

#[tokio::test]
async fn a_throttling_exception_mid_stream_is_an_error_after_the_text() {
    check(
        Scenario::reply(
            &Reply::new()
                .say("partial answer")
                .then_fail(BackendError::Throttled { retry_after: None }),
        ),
        vec![text("partial "), text("answer"), Err("throttled")],
    )
    .await;
}

#[tokio::test]
async fn other_exceptions_mid_stream() {
    let cases = [
        (BackendError::Overloaded, "overloaded"),
        (BackendError::ContextTooLong, "context_too_long"),
        (BackendError::transport("model crashed"), "transport"),
    ];
    for (err, kind) in cases {
        let items = play(Scenario::reply(&Reply::new().say("hi").then_fail(err))).await;
        assert_eq!(items, vec![text("hi"), Err(kind)]);
    }
}

/// The items of a stream expected to break after some text, and the error's whole chain.
async fn play_broken(scenario: Scenario) -> (Vec<Item>, String) {
    let (_fake, model) = serve(vec![scenario]).await;
    let mut items: Vec<_> = open(&model).await.collect().await;
    let Some(Err(err)) = items.pop() else {
        panic!("the stream did not end in an error: {items:?}")
    };
    let mut chain = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        chain.push_str(&format!(" <- {cause}"));
        source = cause.source();
    }
    let items = items.into_iter().map(|r| r.map_err(|e| e.kind())).collect();
    assert_eq!(err.kind(), "transport", "{chain}");
    (items, chain)
}

#[tokio::test]
async fn a_stream_cut_off_mid_frame_is_a_transport_error_not_a_shorter_answer() {
    let (items, chain) =
        play_broken(Scenario::reply(&Reply::text("one two three four")).cut_in_frame(3)).await;
    assert_eq!(items, vec![text("one "), text("two ")], "{chain}");
}

#[tokio::test]
async fn a_frame_with_a_bad_crc_is_a_transport_error_not_a_shorter_answer() {
    let (items, chain) =
        play_broken(Scenario::reply(&Reply::text("one two three four")).corrupt_frame(3)).await;
    assert_eq!(items, vec![text("one "), text("two ")], "{chain}");
    assert!(chain.contains("checksum"), "{chain}");
}

#[tokio::test]
async fn a_stream_that_ends_without_message_stop_is_a_transport_error() {
    check(
        Scenario::frames([
            Frame::message_start(),
            Frame::text(0, "So far"),
            Frame::block_stop(0),
        ]),
        vec![text("So far"), Err("transport")],
    )
    .await;
}

#[tokio::test]
async fn a_stalled_stream_yields_nothing_more_and_does_not_end() {
    let (_fake, model) = serve(vec![Scenario::reply(&Reply::new().say("hi").then_stall())]).await;
    let mut stream = open(&model).await;
    assert_eq!(
        stream.next().await.unwrap().unwrap(),
        ModelEvent::text("hi")
    );
    // The engine's idle timeout ends such a call; the adapter must not invent an ending.
    let next = tokio::time::timeout(Duration::from_millis(300), stream.next()).await;
    assert!(next.is_err(), "a stalled stream yielded {next:?}");
}

#[tokio::test]
async fn http_429_is_throttled_before_any_event() {
    let err = open_error(Scenario::throttled()).await;
    assert!(
        matches!(err, BackendError::Throttled { retry_after: None }),
        "{err:?}"
    );
}

#[tokio::test]
async fn http_400_is_invalid_request_or_context_too_long_by_its_wording() {
    let err = open_error(Scenario::validation_error(
        "1 validation error detected: Value at 'inferenceConfig.maxTokens' failed to satisfy constraint",
    ))
    .await;
    assert!(
        matches!(&err, BackendError::InvalidRequest { message } if message.contains("maxTokens")),
        "{err:?}"
    );
    let err = open_error(Scenario::validation_error(
        "Input is too long for requested model.",
    ))
    .await;
    assert!(matches!(err, BackendError::ContextTooLong), "{err:?}");
    let err = open_error(Scenario::open_error(&BackendError::ReasoningRejected {
        message: String::new(),
    }))
    .await;
    assert!(
        matches!(err, BackendError::ReasoningRejected { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn other_http_errors_before_any_event() {
    let cases = [
        (BackendError::Overloaded, "overloaded"),
        (
            BackendError::Timeout {
                after: Duration::ZERO,
            },
            "timeout",
        ),
        (
            BackendError::Auth {
                message: String::new(),
            },
            "auth",
        ),
        (BackendError::transport("x"), "overloaded"),
    ];
    for (scripted, kind) in cases {
        let err = open_error(Scenario::open_error(&scripted)).await;
        assert_eq!(err.kind(), kind, "{scripted:?} → {err:?}");
    }
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_and_names_the_endpoint() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let model =
        BedrockModel::new(client(&endpoint), MODEL.to_owned()).with_endpoint(Some(&endpoint));
    let err = match model.stream(request()).await {
        Ok(_) => panic!("the stream opened"),
        Err(err) => err,
    };
    assert!(matches!(err, BackendError::Unreachable { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("cannot reach the model server at {endpoint}")
    );
    assert!(std::error::Error::source(&err).is_some());
    // Without a named endpoint, the region's is named.
    let model = BedrockModel::new(client(&endpoint), MODEL.to_owned());
    let err = model.stream(request()).await.err().unwrap();
    assert!(
        err.to_string()
            .ends_with("https://bedrock-runtime.us-east-1.amazonaws.com"),
        "{err}"
    );
}

#[tokio::test]
async fn frames_without_content_are_keep_alives() {
    let (_fake, model) = serve(vec![Scenario::reply(
        &Reply::new()
            .keep_alive()
            .keep_alive()
            .say("hi")
            .stop(StopReason::EndTurn),
    )])
    .await;
    let items: Vec<ModelEvent> = model
        .stream(request())
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    // messageStart, then the two unknown events; the text block has no start event.
    assert_eq!(
        &items[..4],
        &[
            ModelEvent::KeepAlive,
            ModelEvent::KeepAlive,
            ModelEvent::KeepAlive,
            ModelEvent::text("hi"),
        ],
        "{items:?}"
    );
    assert!(matches!(items.last(), Some(ModelEvent::Done { .. })));
}

#[tokio::test]
async fn a_required_tool_call_is_tool_choice_any_in_the_body() {
    let (fake, model) = serve(vec![
        Scenario::reply(&Reply::text("ok")),
        Scenario::reply(&Reply::text("ok")),
        Scenario::reply(&Reply::text("ok")),
    ])
    .await;
    for choice in [ToolChoice::Required, ToolChoice::Auto, ToolChoice::None] {
        let mut req = request();
        req.settings.tool_choice = choice;
        let _: Vec<_> = model.stream(req).await.unwrap().collect().await;
    }
    let bodies: Vec<Value> = fake.requests().iter().map(|r| r.body.clone()).collect();
    assert_eq!(bodies[0]["toolConfig"]["toolChoice"], json!({"any": {}}));
    assert!(bodies[0]["toolConfig"]["tools"].is_array());
    for body in &bodies[1..] {
        assert!(
            body["toolConfig"].get("toolChoice").is_none(),
            "auto is Converse's default; none cannot be said: {body}"
        );
    }
}

#[tokio::test]
async fn bedrock_receives_the_converse_request_body() {
    let (fake, model) = serve(vec![Scenario::reply(&Reply::text("ok"))]).await;
    assert_eq!(model.name(), "bedrock");
    let request = ChatRequest {
        model: String::new(),
        system: "You are Bridle.".into(),
        messages: vec![
            ChatMessage {
                role: Role::User,
                parts: vec![Part::text("Weather in Oslo and Rome?")].into(),
            },
            ChatMessage {
                role: Role::Assistant,
                parts: vec![
                    Part::Reasoning(Reasoning::Text {
                        text: "Two cities.".into(),
                        signature: Some("sig-1==".into()),
                    }),
                    Part::Reasoning(Reasoning::Redacted {
                        data: vec![1, 2, 3],
                    }),
                    Part::text("Checking both."),
                    Part::ToolUse {
                        id: "tooluse_oslo".into(),
                        name: "weather".into(),
                        input: json!({"city": "Oslo"}),
                    },
                    Part::ToolUse {
                        id: "tooluse_rome".into(),
                        name: "weather".into(),
                        input: json!({"city": "Rome"}),
                    },
                ]
                .into(),
            },
            ChatMessage {
                role: Role::Tool,
                parts: vec![
                    Part::ToolResult {
                        tool_use_id: "tooluse_oslo".into(),
                        content: json!({"temp_c": -3, "sky": "snow"}),
                        is_error: false,
                    },
                    Part::ToolResult {
                        tool_use_id: "tooluse_rome".into(),
                        content: json!("The weather service is down."),
                        is_error: true,
                    },
                ]
                .into(),
            },
            ChatMessage {
                role: Role::User,
                parts: vec![Part::text("And tomorrow?")].into(),
            },
        ],
        tools: vec![weather_tool()].into(),
        settings: InferenceSettings {
            max_tokens: 1024,
            temperature: Some(0.5),
            stop_sequences: vec!["\nUser:".into()],
            reasoning_budget: Some(2048),
            prompt_cache: true,
            ..InferenceSettings::default()
        },
    };
    let items: Vec<_> = model.stream(request).await.unwrap().collect().await;
    assert!(matches!(items.last(), Some(Ok(ModelEvent::Done { .. }))));

    let seen = fake.requests();
    assert_eq!(seen.len(), 1);
    let seen = &seen[0];
    assert_eq!(seen.model_id, MODEL);
    assert_eq!(
        seen.path,
        "/model/anthropic.claude-sonnet-4-20250514-v1%3A0/converse-stream"
    );
    assert_eq!(seen.headers["content-type"], "application/json");
    assert!(
        seen.headers["authorization"].starts_with("AWS4-HMAC-SHA256 Credential=test/"),
        "{:?}",
        seen.headers
    );
    assert_eq!(
        seen.body,
        json!({
            "system": [{"text": "You are Bridle."}, {"cachePoint": {"type": "default"}}],
            "messages": [
                {"role": "user", "content": [{"text": "Weather in Oslo and Rome?"}]},
                {"role": "assistant", "content": [
                    {"reasoningContent": {"reasoningText": {"text": "Two cities.", "signature": "sig-1=="}}},
                    {"reasoningContent": {"redactedContent": "AQID"}},
                    {"text": "Checking both."},
                    {"toolUse": {"toolUseId": "tooluse_oslo", "name": "weather", "input": {"city": "Oslo"}}},
                    {"toolUse": {"toolUseId": "tooluse_rome", "name": "weather", "input": {"city": "Rome"}}},
                ]},
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": "tooluse_oslo",
                                    "content": [{"json": {"temp_c": -3, "sky": "snow"}}]}},
                    {"toolResult": {"toolUseId": "tooluse_rome",
                                    "content": [{"text": "The weather service is down."}],
                                    "status": "error"}},
                    {"text": "And tomorrow?"},
                    {"cachePoint": {"type": "default"}},
                ]},
            ],
            "inferenceConfig": {"maxTokens": 1024, "temperature": 0.5, "stopSequences": ["\nUser:"]},
            "toolConfig": {"tools": [{"toolSpec": {
                "name": "weather",
                "description": "Current weather for a city.",
                "inputSchema": {"json": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                }},
            }}, {"cachePoint": {"type": "default"}}]},
            "additionalModelRequestFields": {"thinking": {"type": "enabled", "budget_tokens": 2048}},
        }),
        "\n got: {}",
        serde_json::to_string_pretty(&seen.body).unwrap()
    );
}
