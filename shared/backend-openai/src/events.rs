//! Chat Completions stream chunks → neutral [`ModelEvent`]s. Pure: feed it each SSE `data:`
//! payload, in order; it keeps the state a stream needs (tool calls being assembled, the finish
//! reason, the usage) and says what happened.
//!
//! Choices:
//! - Text deltas → `Text`; `reasoning_content` / `reasoning` deltas (vLLM, DeepSeek, Ollama,
//!   llama.cpp) → `Reasoning(Text)`. Empty deltas are skipped. Only choice 0 is read.
//! - Tool calls are assembled by `index` and emitted, complete and in index order, when the
//!   finish reason arrives. Servers that repeat `id`/`name`/`type` in every delta do not get the
//!   name duplicated (a repeated or cumulative name replaces, a new fragment appends), explicit
//!   `null`s are ignored, a delta without `index` continues the call with the same `id` (or the
//!   last one), a legacy `function_call` delta is call 0 (only when no `tool_calls` came), and
//!   `arguments` sent as a JSON object instead of a string is accepted.
//! - Empty arguments mean `{}`. If any call's arguments do not parse as a JSON object, or a call
//!   has no name, no call is emitted and the stop reason is `MalformedToolUse` (`MaxTokens`
//!   when the answer was cut by `length`): never a bogus call.
//! - `stop` → `EndTurn` (→ `ToolUse` if calls were made: Ollama and some vLLM versions say
//!   `stop` there), `tool_calls`/`function_call` → `ToolUse`, `length` → `MaxTokens`,
//!   `content_filter` → `ContentFiltered`, anything else → `Other(raw)`.
//! - Usage: the last `usage` seen (the usage-only chunk that `include_usage` adds after the
//!   finish chunk, or per-chunk usage from vLLM). OpenAI's `prompt_tokens` *include* cached
//!   tokens; the neutral `input_tokens` do not (as in Bedrock), so `input_tokens =
//!   prompt_tokens - cached_tokens` and `cache_read_tokens = cached_tokens`; `Usage::total()`
//!   then counts every token once. DeepSeek's `prompt_cache_hit_tokens` is read too.
//! - `Done` is emitted only when `[DONE]` arrives (or the stream ends) after a finish reason
//!   was seen, carrying the usage. `[DONE]` or the end of the stream without a finish reason is
//!   a `Transport` error: a cut-off answer is never passed off as a shorter one.
//! - An `{"error": ...}` payload, or one that is not JSON, is an `Err` item. After `Done` or an
//!   error the mapper is complete and ignores the rest.

use crate::error::{excerpt, from_error_object};
use backend::{BackendError, ModelEvent, ReasoningDelta, StopReason, Usage};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One item the mapper yields.
pub type Mapped = Result<ModelEvent, BackendError>;

/// Turns the `data:` payloads of one Chat Completions stream into neutral events.
#[derive(Debug, Default)]
pub struct OpenAiEventMapper {
    calls: BTreeMap<u64, PendingCall>,
    /// Set once the finish reason arrived (tool calls have then been emitted).
    stop: Option<StopReason>,
    usage: Usage,
    complete: bool,
}

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
}

impl OpenAiEventMapper {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the stream is over for the mapper (`Done` or an error was yielded); anything fed
    /// after that is ignored.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Map one SSE `data:` payload (a JSON chunk, or `[DONE]`).
    pub fn map_data(&mut self, data: &str) -> Vec<Mapped> {
        if self.complete {
            return Vec::new();
        }
        let data = data.trim();
        if data == "[DONE]" {
            return self.finish();
        }
        if data.is_empty() {
            return Vec::new();
        }
        let chunk: Chunk = match serde_json::from_str(data) {
            Ok(chunk) => chunk,
            Err(err) => {
                return self.fail(BackendError::Transport {
                    message: format!("malformed stream chunk: {}", excerpt(data, None)),
                    source: Some(std::sync::Arc::new(err)),
                });
            }
        };
        if let Some(error) = chunk.error {
            return self.fail(from_error_object(&error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = usage.into_neutral();
        }
        let mut out = Vec::new();
        let first = chunk
            .choices
            .into_iter()
            .flatten()
            .find(|c| c.index.unwrap_or(0) == 0);
        // After the finish reason only usage (and `[DONE]`) still counts.
        if let Some(choice) = first
            && self.stop.is_none()
        {
            if let Some(delta) = choice.delta {
                self.apply_delta(delta, &mut out);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.finish_choice(&reason, &mut out);
            }
        }
        out
    }

    /// The stream ended (`[DONE]`, or the body closed): `Done` if the model finished, else an
    /// error. Idempotent.
    pub fn finish(&mut self) -> Vec<Mapped> {
        if self.complete {
            return Vec::new();
        }
        match self.stop.take() {
            Some(stop_reason) => {
                self.complete = true;
                vec![Ok(ModelEvent::Done {
                    stop_reason,
                    usage: self.usage,
                })]
            }
            None => self.fail(BackendError::transport(
                "the stream ended before the model finished (no finish_reason)",
            )),
        }
    }

    fn fail(&mut self, err: BackendError) -> Vec<Mapped> {
        self.complete = true;
        vec![Err(err)]
    }

    fn apply_delta(&mut self, delta: Delta, out: &mut Vec<Mapped>) {
        let reasoning = delta.reasoning_content.or(delta.reasoning);
        if let Some(text) = reasoning.filter(|t| !t.is_empty()) {
            out.push(Ok(ModelEvent::Reasoning {
                delta: ReasoningDelta::Text(text),
            }));
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push(Ok(ModelEvent::Text { text }));
        }
        match delta.tool_calls {
            Some(calls) if !calls.is_empty() => {
                for call in calls {
                    let index = self.index_for(call.index, call.id.as_deref());
                    self.calls
                        .entry(index)
                        .or_default()
                        .apply(call.id, call.function);
                }
            }
            _ => {
                if let Some(function) = delta.function_call {
                    self.calls.entry(0).or_default().apply(None, Some(function));
                }
            }
        }
    }

    /// Which call a delta continues. Without `index`: the call with the same `id`, a new call
    /// for a new `id`, else the last call.
    fn index_for(&self, index: Option<u64>, id: Option<&str>) -> u64 {
        if let Some(index) = index {
            return index;
        }
        let last = self.calls.keys().next_back().copied();
        match id.filter(|id| !id.is_empty()) {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, c)| c.id == id)
                .map(|(i, _)| *i)
                .unwrap_or_else(|| last.map_or(0, |i| i + 1)),
            None => last.unwrap_or(0),
        }
    }

    fn finish_choice(&mut self, reason: &str, out: &mut Vec<Mapped>) {
        let mut stop = match reason {
            "stop" => StopReason::EndTurn,
            "tool_calls" | "function_call" => StopReason::ToolUse,
            "length" => StopReason::MaxTokens,
            "content_filter" => StopReason::ContentFiltered,
            other => StopReason::Other(other.to_owned()),
        };
        let calls = std::mem::take(&mut self.calls);
        let mut events = Vec::with_capacity(calls.len());
        for (index, call) in calls {
            match call.into_event(index) {
                Some(event) => events.push(event),
                None => {
                    tracing::warn!(index, finish_reason = reason, "malformed tool call dropped");
                    stop = if stop == StopReason::MaxTokens {
                        StopReason::MaxTokens
                    } else {
                        StopReason::MalformedToolUse
                    };
                    events.clear();
                    break;
                }
            }
        }
        if !events.is_empty() && stop == StopReason::EndTurn {
            stop = StopReason::ToolUse;
        }
        out.extend(events.into_iter().map(Ok));
        self.stop = Some(stop);
    }
}

impl PendingCall {
    fn apply(&mut self, id: Option<String>, function: Option<FunctionDelta>) {
        if let Some(id) = id.filter(|id| !id.is_empty())
            && self.id.is_empty()
        {
            self.id = id;
        }
        let Some(function) = function else { return };
        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
            if self.name.is_empty() || name.starts_with(&self.name) {
                self.name = name;
            } else if !self.name.ends_with(&name) {
                self.name.push_str(&name);
            }
        }
        match function.arguments {
            Some(Value::String(fragment)) => self.arguments.push_str(&fragment),
            Some(Value::Null) | None => {}
            Some(whole) if self.arguments.is_empty() => self.arguments = whole.to_string(),
            Some(_) => {}
        }
    }

    /// The complete call, or `None` when it has no name or its arguments are not a JSON object.
    fn into_event(self, index: u64) -> Option<ModelEvent> {
        if self.name.is_empty() {
            return None;
        }
        let input = if self.arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str::<Value>(&self.arguments) {
                Ok(value @ Value::Object(_)) => value,
                _ => return None,
            }
        };
        let id = if self.id.is_empty() {
            format!("call_{index}")
        } else {
            self.id
        };
        Some(ModelEvent::ToolUse {
            id,
            name: self.name,
            input,
        })
    }
}

// The wire: every field optional and null-tolerant; unknown fields are ignored.

#[derive(Debug, Deserialize)]
struct Chunk {
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Option<Vec<ToolCallDelta>>,
    function_call: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct ToolCallDelta {
    index: Option<u64>,
    id: Option<String>,
    function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
struct FunctionDelta {
    name: Option<String>,
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek's name for cached prompt tokens.
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

impl WireUsage {
    fn into_neutral(self) -> Usage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let cached = self
            .prompt_tokens_details
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .unwrap_or(0)
            .min(prompt);
        Usage {
            input_tokens: prompt - cached,
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(payloads: &[&str]) -> Vec<Mapped> {
        let mut mapper = OpenAiEventMapper::new();
        let mut out: Vec<Mapped> = payloads.iter().flat_map(|p| mapper.map_data(p)).collect();
        out.extend(mapper.finish());
        out
    }

    fn ok(items: Vec<Mapped>) -> Vec<ModelEvent> {
        items.into_iter().map(|r| r.unwrap()).collect()
    }

    #[test]
    fn a_call_without_index_or_id_is_continued_and_given_an_id() {
        let events = ok(feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"now","arguments":"{\"tz\":"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"\"UTC\"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
        ]));
        assert_eq!(
            events[0],
            ModelEvent::ToolUse {
                id: "call_0".into(),
                name: "now".into(),
                input: json!({"tz": "UTC"})
            }
        );
    }

    #[test]
    fn split_and_cumulative_names_are_not_duplicated() {
        let mut call = PendingCall::default();
        for name in ["get_", "weather", "get_weather", "weather"] {
            call.apply(
                None,
                Some(FunctionDelta {
                    name: Some(name.into()),
                    arguments: None,
                }),
            );
        }
        assert_eq!(call.name, "get_weather");
    }

    #[test]
    fn arguments_sent_as_an_object_are_accepted() {
        let events = ok(feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"now","arguments":{"tz":"UTC"}}}]},"finish_reason":"tool_calls"}]}"#,
        ]));
        assert_eq!(
            events[0],
            ModelEvent::ToolUse {
                id: "c1".into(),
                name: "now".into(),
                input: json!({"tz": "UTC"})
            }
        );
    }

    #[test]
    fn a_truncated_call_under_length_is_dropped_and_reported_as_max_tokens() {
        let events = ok(feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"now","arguments":"{\"tz\":\"U"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
        ]));
        assert_eq!(
            events,
            vec![ModelEvent::Done {
                stop_reason: StopReason::MaxTokens,
                usage: Usage::default()
            }]
        );
    }

    #[test]
    fn stop_with_calls_is_tool_use_and_other_reasons_are_kept() {
        let events = ok(feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"now","arguments":""}}]},"finish_reason":"stop"}]}"#,
        ]));
        assert!(matches!(
            &events[1],
            ModelEvent::Done {
                stop_reason: StopReason::ToolUse,
                ..
            }
        ));
        let events = ok(feed(&[
            r#"{"choices":[{"delta":{},"finish_reason":"eos"}]}"#,
        ]));
        assert!(
            matches!(&events[0], ModelEvent::Done { stop_reason: StopReason::Other(raw), .. } if raw == "eos")
        );
    }

    #[test]
    fn garbage_payload_is_a_transport_error_and_ends_the_mapper() {
        let mut mapper = OpenAiEventMapper::new();
        let out = mapper.map_data("{not json");
        assert!(matches!(&out[..], [Err(BackendError::Transport { .. })]));
        assert!(mapper.is_complete());
        assert!(mapper.map_data("[DONE]").is_empty());
        assert!(mapper.finish().is_empty());
    }

    #[test]
    fn other_choices_and_content_after_the_finish_are_ignored() {
        let events = ok(feed(&[
            r#"{"choices":[{"index":1,"delta":{"content":"other"}},{"index":0,"delta":{"content":"mine"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"late"}}]}"#,
        ]));
        assert_eq!(events.len(), 2);
        assert_eq!(events[0], ModelEvent::text("mine"));
    }

    #[test]
    fn identical_reasoning_fields_are_emitted_once() {
        let events = ok(feed(&[
            r#"{"choices":[{"delta":{"reasoning_content":"hmm","reasoning":"hmm"}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#,
        ]));
        assert_eq!(
            events[0],
            ModelEvent::Reasoning {
                delta: ReasoningDelta::Text("hmm".into())
            }
        );
        assert_eq!(events.len(), 2);
    }
}
