//! Neutral [`ChatRequest`] → Chat Completions request body. Pure: no I/O, no configuration
//! beyond the model to use when the request names none.
//!
//! Choices, for OpenAI and local servers alike:
//! - `max_tokens` (not `max_completion_tokens`): local servers (llama.cpp, vLLM, Ollama) accept
//!   it; OpenAI's o-series reasoning models reject it, so use a non-reasoning model or a proxy
//!   that rewrites it. `reasoning_budget` is not sent (there is no portable field);
//!   `reasoning_effort` is, when set.
//! - `tool_choice` is sent only with tools and only when it is not `auto` (the API's default):
//!   `"required"` or `"none"`.
//! - Text parts of one message are joined with a blank line into a plain `content` string, the
//!   most widely accepted form.
//! - Reasoning parts are dropped: OpenAI-compatible APIs do not accept reasoning on input.
//! - Images and documents are media refs whose bytes live in a blob store this crate cannot
//!   reach; they are sent as a short text placeholder (`[image: key]`, `[document: key]`).
//! - Tool results become one `role: tool` message each, placed before any other content of the
//!   same neutral message (the API wants them right after the assistant's `tool_calls`). A
//!   string result is sent as is (prefixed `Error: ` when it is an error); any other value is
//!   sent as its JSON text, so the engine's `{"error": ...}` results arrive unchanged.
//! - An assistant message without text has `content: ""` (some chat templates fail on `null`).

use backend::{ChatMessage, ChatRequest, ToolChoice, ToolSpec};
use serde_json::{Value, json};
use transcript::{MediaRef, Part, Role};

/// The Chat Completions body for `request`. `fallback_model` is used when `request.model` is
/// empty (the adapter passes its configured model).
pub fn into_openai(request: &ChatRequest, fallback_model: &str) -> Value {
    let model = if request.model.is_empty() {
        fallback_model
    } else {
        &request.model
    };
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({ "role": "system", "content": request.system }));
    }
    for message in &request.messages {
        push_message(&mut messages, message);
    }

    let settings = &request.settings;
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": { "include_usage": true },
        "max_tokens": settings.max_tokens,
    });
    if let Some(temperature) = settings.temperature {
        body["temperature"] = json!(f32_to_f64(temperature));
    }
    if !settings.stop_sequences.is_empty() {
        body["stop"] = json!(settings.stop_sequences);
    }
    if !request.tools.is_empty() {
        body["tools"] = request.tools.iter().map(tool).collect();
        match settings.tool_choice {
            ToolChoice::Auto => {}
            choice => body["tool_choice"] = json!(choice.as_str()),
        }
    }
    if let Some(effort) = settings.reasoning_effort {
        body["reasoning_effort"] = json!(effort.as_str());
    }
    body
}

fn push_message(out: &mut Vec<Value>, message: &ChatMessage) {
    match message.role {
        Role::Assistant => push_assistant(out, &message.parts),
        Role::User | Role::Tool => push_user_side(out, &message.parts),
    }
}

fn push_assistant(out: &mut Vec<Value>, parts: &[Part]) {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for part in parts {
        match part {
            Part::ToolUse { id, name, input } => calls.push(json!({
                "id": id,
                "type": "function",
                "function": { "name": name, "arguments": input.to_string() },
            })),
            // An assistant never carries tool results; nothing sensible to send.
            Part::ToolResult { .. } => {}
            other => texts.extend(content_text(other)),
        }
    }
    if texts.is_empty() && calls.is_empty() {
        return;
    }
    let mut message = json!({ "role": "assistant", "content": texts.join("\n\n") });
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    out.push(message);
}

/// User and tool messages: each tool result becomes its own `tool` message, then whatever else
/// the message says becomes one `user` message.
fn push_user_side(out: &mut Vec<Value>, parts: &[Part]) {
    let mut texts = Vec::new();
    for part in parts {
        match part {
            Part::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => out.push(json!({
                "role": "tool",
                "tool_call_id": tool_use_id,
                "content": tool_result_content(content, *is_error),
            })),
            // A user never makes tool calls; nothing sensible to send.
            Part::ToolUse { .. } => {}
            other => texts.extend(content_text(other)),
        }
    }
    if !texts.is_empty() {
        out.push(json!({ "role": "user", "content": texts.join("\n\n") }));
    }
}

/// The text a content part contributes, if any (reasoning contributes none).
fn content_text(part: &Part) -> Option<String> {
    match part {
        Part::Text { text } => Some(text.clone()),
        Part::Image(media) => Some(placeholder("image", media)),
        Part::Document(media) => Some(placeholder("document", media)),
        Part::Reasoning(_) | Part::ToolUse { .. } | Part::ToolResult { .. } => None,
    }
}

fn placeholder(kind: &str, media: &MediaRef) -> String {
    format!("[{kind}: {}]", media.key)
}

fn tool_result_content(content: &Value, is_error: bool) -> String {
    match content {
        Value::String(text) if is_error => format!("Error: {text}"),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.input_schema,
        },
    })
}

/// `0.7_f32` as the `0.7` a person wrote, not `0.699999988079071`.
fn f32_to_f64(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend::InferenceSettings;
    use transcript::Reasoning;

    fn request(messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: String::new(),
            system: String::new(),
            messages,
            tools: Default::default(),
            settings: InferenceSettings {
                max_tokens: 100,
                ..InferenceSettings::default()
            },
        }
    }

    fn msg(role: Role, parts: Vec<Part>) -> ChatMessage {
        ChatMessage::new(role, parts)
    }

    fn check(request: &ChatRequest, expected: Value) {
        let got = into_openai(request, "fallback-model");
        assert_eq!(
            got,
            expected,
            "\n got: {}\nwant: {}",
            serde_json::to_string_pretty(&got).unwrap(),
            serde_json::to_string_pretty(&expected).unwrap()
        );
    }

    #[test]
    fn a_full_exchange_converts_to_the_exact_body() {
        let request = ChatRequest {
            model: "gpt-4o-mini".into(),
            system: "You are Bridle.".into(),
            messages: vec![
                msg(Role::User, vec![Part::text("Weather in Oslo and Rome?")]),
                msg(
                    Role::Assistant,
                    vec![
                        Part::Reasoning(Reasoning::Text {
                            text: "two cities".into(),
                            signature: Some("sig".into()),
                        }),
                        Part::text("Checking both."),
                        Part::ToolUse {
                            id: "call_1".into(),
                            name: "weather".into(),
                            input: json!({"city": "Oslo"}),
                        },
                        Part::ToolUse {
                            id: "call_2".into(),
                            name: "weather".into(),
                            input: json!({"city": "Rome"}),
                        },
                    ],
                ),
                msg(
                    Role::Tool,
                    vec![
                        Part::ToolResult {
                            tool_use_id: "call_1".into(),
                            content: json!({"temp_c": 3}),
                            is_error: false,
                        },
                        Part::ToolResult {
                            tool_use_id: "call_2".into(),
                            content: json!({"error": "The weather service is down."}),
                            is_error: true,
                        },
                    ],
                ),
            ],
            tools: vec![ToolSpec {
                name: "weather".into(),
                description: "Current weather for a city.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                }),
            }]
            .into(),
            settings: InferenceSettings {
                max_tokens: 1024,
                temperature: Some(0.7),
                stop_sequences: vec!["\nUser:".into()],
                reasoning_budget: Some(2048),
                prompt_cache: true,
                ..InferenceSettings::default()
            },
        };
        check(
            &request,
            json!({
                "model": "gpt-4o-mini",
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 1024,
                "temperature": 0.7,
                "stop": ["\nUser:"],
                "messages": [
                    {"role": "system", "content": "You are Bridle."},
                    {"role": "user", "content": "Weather in Oslo and Rome?"},
                    {
                        "role": "assistant",
                        "content": "Checking both.",
                        "tool_calls": [
                            {"id": "call_1", "type": "function",
                             "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}},
                            {"id": "call_2", "type": "function",
                             "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}},
                        ],
                    },
                    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\":3}"},
                    {"role": "tool", "tool_call_id": "call_2",
                     "content": "{\"error\":\"The weather service is down.\"}"},
                ],
                "tools": [{
                    "type": "function",
                    "function": {
                        "name": "weather",
                        "description": "Current weather for a city.",
                        "parameters": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                    },
                }],
            }),
        );
    }

    #[test]
    fn empty_model_system_tools_and_stops_fall_back_or_are_omitted() {
        check(
            &request(vec![msg(Role::User, vec![Part::text("hi")])]),
            json!({
                "model": "fallback-model",
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 100,
                "messages": [{"role": "user", "content": "hi"}],
            }),
        );
    }

    #[test]
    fn tool_choice_goes_only_with_tools_and_only_when_not_auto() {
        let mut req = request(vec![msg(Role::User, vec![Part::text("hi")])]);
        req.settings.tool_choice = ToolChoice::Required;
        assert!(
            into_openai(&req, "m").get("tool_choice").is_none(),
            "no tools"
        );
        req.tools = vec![ToolSpec {
            name: "t".into(),
            description: "d".into(),
            input_schema: json!({"type": "object"}),
        }]
        .into();
        assert_eq!(into_openai(&req, "m")["tool_choice"], "required");
        req.settings.tool_choice = ToolChoice::None;
        assert_eq!(into_openai(&req, "m")["tool_choice"], "none");
        req.settings.tool_choice = ToolChoice::Auto;
        assert!(into_openai(&req, "m").get("tool_choice").is_none());
    }

    #[test]
    fn text_parts_join_and_media_become_placeholders() {
        let media = |key: &str| MediaRef {
            key: key.into(),
            mime_type: "image/png".into(),
            size_bytes: 10,
        };
        let got = into_openai(
            &request(vec![msg(
                Role::User,
                vec![
                    Part::text("first"),
                    Part::Image(media("img/1")),
                    Part::text("second"),
                    Part::Document(media("doc/2")),
                ],
            )]),
            "m",
        );
        assert_eq!(
            got["messages"],
            json!([{"role": "user",
                    "content": "first\n\n[image: img/1]\n\nsecond\n\n[document: doc/2]"}])
        );
    }

    #[test]
    fn string_tool_results_are_sent_as_is_and_string_errors_are_marked() {
        let got = into_openai(
            &request(vec![msg(
                Role::Tool,
                vec![
                    Part::ToolResult {
                        tool_use_id: "a".into(),
                        content: json!("42 rows"),
                        is_error: false,
                    },
                    Part::ToolResult {
                        tool_use_id: "b".into(),
                        content: json!("no such table"),
                        is_error: true,
                    },
                    Part::text("and also: thanks"),
                ],
            )]),
            "m",
        );
        assert_eq!(
            got["messages"],
            json!([
                {"role": "tool", "tool_call_id": "a", "content": "42 rows"},
                {"role": "tool", "tool_call_id": "b", "content": "Error: no such table"},
                {"role": "user", "content": "and also: thanks"},
            ])
        );
    }

    #[test]
    fn tool_only_and_reasoning_only_assistant_messages() {
        let got = into_openai(
            &request(vec![
                msg(
                    Role::Assistant,
                    vec![Part::ToolUse {
                        id: "c".into(),
                        name: "now".into(),
                        input: json!({}),
                    }],
                ),
                msg(
                    Role::Assistant,
                    vec![Part::Reasoning(Reasoning::Redacted { data: vec![1, 2] })],
                ),
            ]),
            "m",
        );
        assert_eq!(
            got["messages"],
            json!([{
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c", "type": "function",
                                "function": {"name": "now", "arguments": "{}"}}],
            }])
        );
    }
}
