//! A whole Chat Completions response where a stream was asked for: some servers ignore
//! `stream: true` and answer one JSON completion. It is taken as a one-shot stream through the
//! same [`OpenAiEventMapper`], so tool calls, finish reasons and usage read exactly as streamed
//! ones do: the choice's `message` is fed as one delta with its finish reason, then the usage.
//!
//! Choices:
//! - Only a body with a `choices` array is a completion; anything else is not taken.
//! - A completion without a finish reason is complete all the same (the server said all it
//!   will say): it reads as `stop` (→ `ToolUse` when it made calls).

use crate::events::{Mapped, OpenAiEventMapper};
use serde_json::{Value, json};

/// The events of a non-streamed completion, or `None` when `body` is not one.
pub fn events_from_completion(body: &Value) -> Option<Vec<Mapped>> {
    let choices = body.get("choices")?.as_array()?;
    let choice = choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)?;
    let message = choice.get("message").cloned().unwrap_or_else(|| json!({}));
    let finish_reason = match choice.get("finish_reason") {
        Some(Value::String(reason)) if !reason.is_empty() => reason.clone(),
        _ => "stop".to_owned(),
    };
    let chunk = json!({
        "choices": [{ "index": 0, "delta": message, "finish_reason": finish_reason }],
        "usage": body.get("usage").cloned().unwrap_or(Value::Null),
    });
    let mut mapper = OpenAiEventMapper::new();
    let mut events = mapper.map_data(&chunk.to_string());
    events.extend(mapper.finish());
    Some(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend::{ModelEvent, StopReason, Usage};

    fn events(body: Value) -> Vec<ModelEvent> {
        events_from_completion(&body)
            .expect("a completion")
            .into_iter()
            .map(|e| e.expect("no error"))
            .collect()
    }

    #[test]
    fn a_text_completion_is_text_then_done_with_its_usage() {
        let got = events(json!({
            "id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there.", "tool_calls": null}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
        }));
        assert_eq!(
            got,
            vec![
                ModelEvent::text("Hello there."),
                ModelEvent::Done {
                    stop_reason: StopReason::EndTurn,
                    usage: Usage {
                        input_tokens: 12,
                        output_tokens: 3,
                        ..Usage::default()
                    }
                }
            ]
        );
    }

    #[test]
    fn tool_calls_without_index_and_legacy_function_call_are_calls() {
        let got = events(json!({
            "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "add_note", "arguments": "{\"text\":\"milk\"}"}},
                {"id": "call_b", "type": "function", "function": {"name": "list_notes", "arguments": ""}}
            ]}, "finish_reason": "tool_calls"}]
        }));
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(
            got[0],
            ModelEvent::ToolUse {
                id: "call_a".into(),
                name: "add_note".into(),
                input: json!({"text": "milk"})
            }
        );
        assert!(
            matches!(&got[1], ModelEvent::ToolUse { id, input, .. } if id == "call_b" && *input == json!({}))
        );
        assert!(matches!(
            got[2],
            ModelEvent::Done {
                stop_reason: StopReason::ToolUse,
                ..
            }
        ));
        let legacy = events(json!({
            "choices": [{"message": {"role": "assistant", "function_call": {"name": "list_notes", "arguments": "{}"}}, "finish_reason": null}]
        }));
        assert!(matches!(&legacy[0], ModelEvent::ToolUse { name, .. } if name == "list_notes"));
        assert!(matches!(
            legacy[1],
            ModelEvent::Done {
                stop_reason: StopReason::ToolUse,
                ..
            }
        ));
    }

    #[test]
    fn a_body_without_choices_is_not_a_completion() {
        assert!(events_from_completion(&json!({"error": {"message": "x"}})).is_none());
        assert!(events_from_completion(&json!({"choices": []})).is_none());
        assert!(events_from_completion(&json!("text")).is_none());
    }
}
