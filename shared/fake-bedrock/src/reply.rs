//! A scripted [`Reply`]'s steps → the frames Bedrock would send for the same answer, so the
//! fake plays the scenarios the scripted model plays.
//!
//! - Every stream opens with `messageStart`.
//! - Text pieces are deltas on one text block (no start event); reasoning text on one reasoning
//!   block, which its signature closes; redacted reasoning is a block of its own.
//! - A tool call is its own block: `contentBlockStart` with id and name, the input JSON split
//!   into three partial deltas, `contentBlockStop`.
//! - `Done` → `messageStop` and then `metadata` with the usage, as Bedrock orders them.
//! - `Fail(err)` → an exception frame of the matching type, and the stream ends.
//! - `Stall` → nothing more is ever sent; the connection stays open.
//! - A keep-alive → an event of a type the SDK does not know, carrying nothing.

use crate::frame::Frame;
use crate::scenario::Piece;
use backend::{
    BackendError, ModelEvent, OptionalFeature, ReasoningDelta, Reply, Step, StopReason, Usage,
};
use serde_json::Value;

/// The pieces of a reply's stream; `usage` is what `metadata` reports.
pub(crate) fn pieces(reply: &Reply, usage: Usage) -> Vec<Piece> {
    let mut blocks = Blocks::default();
    let mut out = vec![Piece::Frame(Frame::message_start())];
    for step in reply.steps() {
        match step {
            Step::Event(ModelEvent::Done { stop_reason, usage }) => {
                blocks.done(&mut out, stop_reason, *usage);
            }
            Step::Event(event) => blocks.event(&mut out, event),
            Step::Done(stop_reason) => blocks.done(&mut out, stop_reason, usage),
            Step::Delay(d) => out.push(Piece::Wait(*d)),
            Step::Fail(err) => {
                out.push(Piece::Frame(exception_for(err)));
                return out;
            }
            Step::Stall => {
                out.push(Piece::Stall);
                return out;
            }
        }
    }
    out
}

/// What the scripted model would report: 10 input tokens, one output token per text piece and
/// five per tool call.
pub(crate) fn estimated_usage(reply: &Reply) -> Usage {
    let output_tokens = reply
        .steps()
        .iter()
        .map(|step| match step {
            Step::Event(ModelEvent::Text { .. }) => 1,
            Step::Event(ModelEvent::ToolUse { .. }) => 5,
            _ => 0,
        })
        .sum();
    Usage {
        input_tokens: 10,
        output_tokens,
        ..Usage::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Open {
    Text(i32),
    Reasoning(i32),
}

/// Hands out content block indexes and remembers the open text or reasoning block.
#[derive(Debug, Default)]
struct Blocks {
    next: i32,
    open: Option<Open>,
}

impl Blocks {
    fn new_index(&mut self) -> i32 {
        let index = self.next;
        self.next += 1;
        index
    }

    fn close(&mut self, out: &mut Vec<Piece>) {
        if let Some(Open::Text(index) | Open::Reasoning(index)) = self.open.take() {
            out.push(Piece::Frame(Frame::block_stop(index)));
        }
    }

    fn text_block(&mut self, out: &mut Vec<Piece>) -> i32 {
        if let Some(Open::Text(index)) = self.open {
            return index;
        }
        self.close(out);
        let index = self.new_index();
        self.open = Some(Open::Text(index));
        index
    }

    fn reasoning_block(&mut self, out: &mut Vec<Piece>) -> i32 {
        if let Some(Open::Reasoning(index)) = self.open {
            return index;
        }
        self.close(out);
        let index = self.new_index();
        self.open = Some(Open::Reasoning(index));
        index
    }

    fn event(&mut self, out: &mut Vec<Piece>, event: &ModelEvent) {
        let frame = |f: Frame| Piece::Frame(f);
        match event {
            ModelEvent::Text { text } => {
                let index = self.text_block(out);
                out.push(frame(Frame::text(index, text)));
            }
            ModelEvent::Reasoning { delta } => match delta {
                ReasoningDelta::Text(text) => {
                    let index = self.reasoning_block(out);
                    out.push(frame(Frame::reasoning_text(index, text)));
                }
                ReasoningDelta::Signature(signature) => {
                    let index = self.reasoning_block(out);
                    out.push(frame(Frame::reasoning_signature(index, signature)));
                    self.close(out);
                }
                ReasoningDelta::Redacted(data) => {
                    self.close(out);
                    let index = self.new_index();
                    out.push(frame(Frame::redacted_reasoning(index, data)));
                    out.push(frame(Frame::block_stop(index)));
                }
            },
            ModelEvent::ToolUse { id, name, input } => {
                self.close(out);
                let index = self.new_index();
                out.push(frame(Frame::tool_start(index, id, name)));
                for part in split_in_three(&input_json(input)) {
                    out.push(frame(Frame::tool_input(index, part)));
                }
                out.push(frame(Frame::block_stop(index)));
            }
            ModelEvent::KeepAlive => out.push(frame(Frame::unknown_event())),
            ModelEvent::Done { .. } => {}
        }
    }

    fn done(&mut self, out: &mut Vec<Piece>, stop_reason: &StopReason, usage: Usage) {
        self.close(out);
        out.push(Piece::Frame(Frame::message_stop(wire_stop_reason(
            stop_reason,
        ))));
        out.push(Piece::Frame(Frame::metadata(usage)));
    }
}

fn input_json(input: &Value) -> String {
    input.to_string()
}

/// Three non-empty pieces where the text allows, cut at character boundaries.
fn split_in_three(text: &str) -> Vec<&str> {
    let boundaries: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let n = boundaries.len();
    if n < 3 {
        return vec![text];
    }
    let (a, b) = (boundaries[n / 3], boundaries[2 * n / 3]);
    vec![&text[..a], &text[a..b], &text[b..]]
}

/// Bedrock's name for a neutral stop reason.
pub(crate) fn wire_stop_reason(reason: &StopReason) -> &str {
    match reason {
        StopReason::Guardrail => "guardrail_intervened",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
        other => other.as_str(),
    }
}

/// The exception frame Bedrock would send mid-stream for this failure.
pub(crate) fn exception_for(err: &BackendError) -> Frame {
    match err {
        BackendError::Throttled { .. } => Frame::exception(
            "throttlingException",
            "Too many tokens, please wait before trying again.",
        ),
        BackendError::Overloaded => Frame::exception(
            "serviceUnavailableException",
            "Bedrock is unable to process your request.",
        ),
        BackendError::Timeout { .. } => Frame::model_stream_error(408, "Model timed out."),
        BackendError::ContextTooLong => {
            Frame::exception("validationException", CONTEXT_TOO_LONG_MESSAGE)
        }
        BackendError::ReasoningRejected { .. } => {
            Frame::exception("validationException", REASONING_REJECTED_MESSAGE)
        }
        BackendError::FeatureRejected { feature, .. } => {
            Frame::exception("validationException", feature_rejected_message(*feature))
        }
        BackendError::InvalidRequest { message } => {
            Frame::exception("validationException", message)
        }
        BackendError::Auth { message } => Frame::exception("accessDeniedException", message),
        BackendError::Transport { message, .. } => Frame::model_stream_error(400, message),
        // Mid-stream the server was reached: the nearest is a broken stream.
        BackendError::Unreachable { endpoint, .. } => Frame::model_stream_error(400, endpoint),
    }
}

/// Bedrock's refusal of a forced tool choice by a model without it.
pub(crate) const TOOL_CHOICE_REFUSED_MESSAGE: &str = "This model doesn't support the toolConfig.toolChoice.any field. Remove toolConfig.toolChoice.any and try again.";

/// Bedrock's wording when the input does not fit the model.
pub(crate) const CONTEXT_TOO_LONG_MESSAGE: &str = "Input is too long for requested model.";

/// Anthropic's wording (through Bedrock) for a replayed thinking block it no longer accepts.
pub(crate) const REASONING_REJECTED_MESSAGE: &str = "The model returned the following errors: messages.1.content.0: Invalid `signature` in `thinking` block";

/// Bedrock's refusal of cache points (seen as a `ValidationException`, and for some models
/// and accounts as an `AccessDeniedException`).
pub(crate) const PROMPT_CACHE_REFUSED_MESSAGE: &str = "You invoked an unsupported model or your request did not allow prompt caching. See the documentation for more information.";

/// Bedrock's refusal of reasoning settings a model does not take.
pub(crate) const REASONING_SETTINGS_REFUSED_MESSAGE: &str = "Malformed input request: #: extraneous key [thinking] is not permitted, please reformat your input and try again.";

/// Bedrock's wording when it refuses `feature`.
pub(crate) fn feature_rejected_message(feature: OptionalFeature) -> &'static str {
    match feature {
        OptionalFeature::PromptCache => PROMPT_CACHE_REFUSED_MESSAGE,
        OptionalFeature::Reasoning => REASONING_SETTINGS_REFUSED_MESSAGE,
        OptionalFeature::ToolChoice => TOOL_CHOICE_REFUSED_MESSAGE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Each piece as `(kind, payload without padding)`, to pin the frame sequence.
    fn outline(pieces: &[Piece]) -> Vec<(String, Value)> {
        pieces
            .iter()
            .map(|piece| match piece {
                Piece::Frame(Frame::Event {
                    event_type,
                    payload,
                }) => {
                    let mut payload = payload.clone();
                    payload.as_object_mut().unwrap().remove("p");
                    (event_type.clone(), payload)
                }
                Piece::Frame(Frame::Exception {
                    exception_type,
                    payload,
                }) => (format!("exception {exception_type}"), payload.clone()),
                Piece::Wait(d) => (format!("wait {d:?}"), Value::Null),
                Piece::Stall => ("stall".into(), Value::Null),
            })
            .collect()
    }

    fn ev(kind: &str, payload: Value) -> (String, Value) {
        (kind.to_owned(), payload)
    }

    fn delta(index: i32, delta: Value) -> (String, Value) {
        ev(
            "contentBlockDelta",
            json!({"contentBlockIndex": index, "delta": delta}),
        )
    }

    fn stop(index: i32) -> (String, Value) {
        ev("contentBlockStop", json!({"contentBlockIndex": index}))
    }

    #[test]
    fn a_reply_becomes_bedrock_blocks() {
        let reply = Reply::new()
            .reason("hmm", "sig")
            .say("Hi there")
            .call("t1", "now", json!({"tz": "UTC"}))
            .stop(StopReason::ToolUse);
        let usage = Usage {
            input_tokens: 1,
            output_tokens: 2,
            ..Usage::default()
        };
        assert_eq!(
            outline(&pieces(&reply, usage)),
            vec![
                ev("messageStart", json!({"role": "assistant"})),
                delta(0, json!({"reasoningContent": {"text": "hmm"}})),
                delta(0, json!({"reasoningContent": {"signature": "sig"}})),
                stop(0),
                delta(1, json!({"text": "Hi "})),
                delta(1, json!({"text": "there"})),
                stop(1),
                ev(
                    "contentBlockStart",
                    json!({"contentBlockIndex": 2,
                           "start": {"toolUse": {"toolUseId": "t1", "name": "now"}}})
                ),
                delta(2, json!({"toolUse": {"input": "{\"tz"}})),
                delta(2, json!({"toolUse": {"input": "\":\"U"}})),
                delta(2, json!({"toolUse": {"input": "TC\"}"}})),
                stop(2),
                ev("messageStop", json!({"stopReason": "tool_use"})),
                ev(
                    "metadata",
                    json!({"usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3},
                           "metrics": {"latencyMs": 120}})
                ),
            ]
        );
    }

    #[test]
    fn failures_and_stalls_end_the_script() {
        let reply = Reply::new()
            .say("partial")
            .then_fail(BackendError::Throttled { retry_after: None })
            .say("never sent");
        let kinds: Vec<String> = outline(&pieces(&reply, Usage::default()))
            .into_iter()
            .map(|(kind, _)| kind)
            .collect();
        assert_eq!(kinds[2..], ["exception throttlingException"]);
        let reply = Reply::new()
            .say("hi")
            .then_stall()
            .stop(StopReason::EndTurn);
        let last = outline(&pieces(&reply, Usage::default())).pop().unwrap();
        assert_eq!(last.0, "stall");
    }

    #[test]
    fn stop_reasons_use_bedrocks_names() {
        assert_eq!(
            wire_stop_reason(&StopReason::Guardrail),
            "guardrail_intervened"
        );
        assert_eq!(
            wire_stop_reason(&StopReason::ContextWindowExceeded),
            "model_context_window_exceeded"
        );
        assert_eq!(wire_stop_reason(&StopReason::EndTurn), "end_turn");
        assert_eq!(wire_stop_reason(&StopReason::Other("x".into())), "x");
    }

    #[test]
    fn short_input_is_not_split_and_multibyte_input_splits_cleanly() {
        assert_eq!(split_in_three("{}"), vec!["{}"]);
        assert_eq!(split_in_three("ééé").concat(), "ééé");
        assert_eq!(split_in_three("ééé").len(), 3);
    }
}
