//! ConverseStream events → neutral [`ModelEvent`]s. Pure: feed it each decoded event, in order,
//! then [`BedrockEventMapper::finish`] when the stream ends; it keeps the state a stream needs
//! (tool inputs being assembled per block, the stop reason, the usage) and says what happened.
//!
//! Choices:
//! - `messageStart` is ignored. Text blocks have no start event: a text delta → `Text`.
//!   Reasoning deltas → `Reasoning` (`Text`, `Signature`, `Redacted` bytes). Empty text is
//!   skipped. Citations, image and tool-result deltas, and unknown events are ignored.
//! - A `contentBlockStart` with `toolUse` opens a tool call for its `contentBlockIndex`; its
//!   partial JSON input deltas are appended per index, so interleaved blocks assemble
//!   correctly. At `contentBlockStop` the input is parsed (empty → `{}`) and `ToolUse` is
//!   emitted. Input that is not a JSON object, a delta for a block that never started, or a
//!   call still open at `messageStop` is never emitted: the answer ends with
//!   `MalformedToolUse` instead (or `MaxTokens`, when that is why the input was cut).
//! - Usage arrives in `metadata`, after `messageStop`. `Done` is emitted once both arrived
//!   (whichever comes second), or at the end of the stream when `messageStop` was seen, with
//!   the usage known so far. The end of the stream without `messageStop` is a `Transport` error:
//!   a cut-off answer is never passed off as a shorter one.
//! - Stop reasons: `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`; `guardrail_intervened`
//!   → `Guardrail`; `content_filtered` → `ContentFiltered`; `model_context_window_exceeded` →
//!   `ContextWindowExceeded`; `malformed_model_output` and `malformed_tool_use` →
//!   `MalformedToolUse`; a value the SDK does not know is kept as `Other(raw)`, except
//!   `refusal`, which is `Refusal`.
//! - After `Done` or an error the mapper is complete and ignores the rest.

use aws_sdk_bedrockruntime::types::{
    ContentBlockDelta, ContentBlockStart, ConverseStreamOutput, ReasoningContentBlockDelta,
    StopReason as WireStopReason, TokenUsage,
};
use backend::{BackendError, ModelEvent, ReasoningDelta, StopReason, Usage};
use serde_json::Value;
use std::collections::BTreeMap;

/// One item the mapper yields.
pub type Mapped = Result<ModelEvent, BackendError>;

/// Turns the events of one ConverseStream response into neutral events.
#[derive(Debug, Default)]
pub struct BedrockEventMapper {
    /// Tool calls being assembled, by content block index.
    calls: BTreeMap<i32, PendingCall>,
    /// Whether a tool call had to be dropped as malformed.
    malformed: bool,
    stop: Option<StopReason>,
    usage: Option<Usage>,
    complete: bool,
}

#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    input: String,
}

impl BedrockEventMapper {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the stream is over for the mapper (`Done` or an error was yielded); anything fed
    /// after that is ignored.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Map one decoded stream event.
    pub fn map_event(&mut self, event: ConverseStreamOutput) -> Vec<Mapped> {
        if self.complete {
            return Vec::new();
        }
        match event {
            ConverseStreamOutput::ContentBlockStart(start) => {
                if let Some(ContentBlockStart::ToolUse(tool)) = start.start {
                    self.calls.insert(
                        start.content_block_index,
                        PendingCall {
                            id: tool.tool_use_id,
                            name: tool.name,
                            input: String::new(),
                        },
                    );
                }
                Vec::new()
            }
            ConverseStreamOutput::ContentBlockDelta(delta) => match delta.delta {
                Some(delta_kind) => self.delta(delta.content_block_index, delta_kind),
                None => Vec::new(),
            },
            ConverseStreamOutput::ContentBlockStop(stop) => {
                self.block_stop(stop.content_block_index)
            }
            ConverseStreamOutput::MessageStop(stop) => {
                self.message_stop(stop_reason(&stop.stop_reason));
                self.done_if_ready()
            }
            ConverseStreamOutput::Metadata(metadata) => {
                let usage = metadata
                    .usage
                    .as_ref()
                    .map(neutral_usage)
                    .unwrap_or_default();
                self.usage = Some(usage);
                self.done_if_ready()
            }
            // `messageStart` says only "assistant"; unknown events are newer than this SDK.
            _ => Vec::new(),
        }
    }

    /// The stream ended: `Done` if the model finished, else a `Transport` error. Idempotent.
    pub fn finish(&mut self) -> Vec<Mapped> {
        if self.complete {
            return Vec::new();
        }
        match self.stop.take() {
            Some(stop_reason) => {
                self.complete = true;
                vec![Ok(ModelEvent::Done {
                    stop_reason,
                    usage: self.usage.unwrap_or_default(),
                })]
            }
            None => self.fail(BackendError::transport(
                "the stream ended before the model finished (no messageStop)",
            )),
        }
    }

    /// The stream failed: yield `err` and ignore everything after it.
    pub fn fail(&mut self, err: BackendError) -> Vec<Mapped> {
        if self.complete {
            return Vec::new();
        }
        self.complete = true;
        vec![Err(err)]
    }

    fn delta(&mut self, index: i32, delta: ContentBlockDelta) -> Vec<Mapped> {
        let event = match delta {
            ContentBlockDelta::Text(text) if !text.is_empty() => ModelEvent::Text { text },
            ContentBlockDelta::ToolUse(tool) => {
                self.calls
                    .entry(index)
                    .or_default()
                    .input
                    .push_str(&tool.input);
                return Vec::new();
            }
            ContentBlockDelta::ReasoningContent(reasoning) => {
                let delta = match reasoning {
                    ReasoningContentBlockDelta::Text(text) if !text.is_empty() => {
                        ReasoningDelta::Text(text)
                    }
                    ReasoningContentBlockDelta::Signature(signature) => {
                        ReasoningDelta::Signature(signature)
                    }
                    ReasoningContentBlockDelta::RedactedContent(blob) => {
                        ReasoningDelta::Redacted(blob.into_inner())
                    }
                    _ => return Vec::new(),
                };
                ModelEvent::Reasoning { delta }
            }
            _ => return Vec::new(),
        };
        vec![Ok(event)]
    }

    fn block_stop(&mut self, index: i32) -> Vec<Mapped> {
        let Some(call) = self.calls.remove(&index) else {
            return Vec::new();
        };
        match call.into_event() {
            Some(event) => vec![Ok(event)],
            None => {
                tracing::warn!(index, "malformed tool call dropped");
                self.malformed = true;
                Vec::new()
            }
        }
    }

    fn message_stop(&mut self, reason: StopReason) {
        if !self.calls.is_empty() {
            tracing::warn!(
                open = self.calls.len(),
                "tool calls never finished before messageStop; dropped"
            );
            self.calls.clear();
            self.malformed = true;
        }
        self.stop = Some(match reason {
            StopReason::MaxTokens => StopReason::MaxTokens,
            _ if self.malformed => StopReason::MalformedToolUse,
            other => other,
        });
    }

    fn done_if_ready(&mut self) -> Vec<Mapped> {
        match (&self.stop, self.usage) {
            (Some(_), Some(_)) => self.finish(),
            _ => Vec::new(),
        }
    }
}

impl PendingCall {
    /// The complete call, or `None` when it never started or its input is not a JSON object.
    fn into_event(self) -> Option<ModelEvent> {
        if self.id.is_empty() || self.name.is_empty() {
            return None;
        }
        let input = if self.input.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str::<Value>(&self.input) {
                Ok(value @ Value::Object(_)) => value,
                _ => return None,
            }
        };
        Some(ModelEvent::ToolUse {
            id: self.id,
            name: self.name,
            input,
        })
    }
}

/// The neutral stop reason for Bedrock's.
pub(crate) fn stop_reason(reason: &WireStopReason) -> StopReason {
    match reason {
        WireStopReason::EndTurn => StopReason::EndTurn,
        WireStopReason::ToolUse => StopReason::ToolUse,
        WireStopReason::MaxTokens => StopReason::MaxTokens,
        WireStopReason::StopSequence => StopReason::StopSequence,
        WireStopReason::GuardrailIntervened => StopReason::Guardrail,
        WireStopReason::ContentFiltered => StopReason::ContentFiltered,
        WireStopReason::ModelContextWindowExceeded => StopReason::ContextWindowExceeded,
        WireStopReason::MalformedModelOutput | WireStopReason::MalformedToolUse => {
            StopReason::MalformedToolUse
        }
        other => match other.as_str() {
            "refusal" => StopReason::Refusal,
            raw => StopReason::Other(raw.to_owned()),
        },
    }
}

fn neutral_usage(wire: &TokenUsage) -> Usage {
    let count = |n: i32| u64::try_from(n).unwrap_or(0);
    Usage {
        input_tokens: count(wire.input_tokens),
        output_tokens: count(wire.output_tokens),
        cache_read_tokens: wire.cache_read_input_tokens.map_or(0, count),
        cache_write_tokens: wire.cache_write_input_tokens.map_or(0, count),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_bedrockruntime::primitives::Blob;
    use aws_sdk_bedrockruntime::types::{
        ContentBlockDeltaEvent, ContentBlockStartEvent, ContentBlockStopEvent,
        ConverseStreamMetadataEvent, MessageStartEvent, MessageStopEvent, ToolUseBlockDelta,
        ToolUseBlockStart,
    };
    use serde_json::json;

    // Builders for the SDK's event types, so each test reads as the stream it replays.

    fn start() -> ConverseStreamOutput {
        ConverseStreamOutput::MessageStart(
            MessageStartEvent::builder()
                .role("assistant".into())
                .build()
                .unwrap(),
        )
    }

    fn delta(index: i32, delta: ContentBlockDelta) -> ConverseStreamOutput {
        ConverseStreamOutput::ContentBlockDelta(
            ContentBlockDeltaEvent::builder()
                .content_block_index(index)
                .delta(delta)
                .build()
                .unwrap(),
        )
    }

    fn text(index: i32, t: &str) -> ConverseStreamOutput {
        delta(index, ContentBlockDelta::Text(t.into()))
    }

    fn reasoning(index: i32, r: ReasoningContentBlockDelta) -> ConverseStreamOutput {
        delta(index, ContentBlockDelta::ReasoningContent(r))
    }

    fn tool_start(index: i32, id: &str, name: &str) -> ConverseStreamOutput {
        ConverseStreamOutput::ContentBlockStart(
            ContentBlockStartEvent::builder()
                .content_block_index(index)
                .start(ContentBlockStart::ToolUse(
                    ToolUseBlockStart::builder()
                        .tool_use_id(id)
                        .name(name)
                        .build()
                        .unwrap(),
                ))
                .build()
                .unwrap(),
        )
    }

    fn tool_input(index: i32, partial: &str) -> ConverseStreamOutput {
        delta(
            index,
            ContentBlockDelta::ToolUse(
                ToolUseBlockDelta::builder().input(partial).build().unwrap(),
            ),
        )
    }

    fn block_stop(index: i32) -> ConverseStreamOutput {
        ConverseStreamOutput::ContentBlockStop(
            ContentBlockStopEvent::builder()
                .content_block_index(index)
                .build()
                .unwrap(),
        )
    }

    fn message_stop(reason: &str) -> ConverseStreamOutput {
        ConverseStreamOutput::MessageStop(
            MessageStopEvent::builder()
                .stop_reason(reason.into())
                .build()
                .unwrap(),
        )
    }

    fn metadata(
        input: i32,
        output: i32,
        read: Option<i32>,
        write: Option<i32>,
    ) -> ConverseStreamOutput {
        let usage = TokenUsage::builder()
            .input_tokens(input)
            .output_tokens(output)
            .total_tokens(input + output + read.unwrap_or(0) + write.unwrap_or(0))
            .set_cache_read_input_tokens(read)
            .set_cache_write_input_tokens(write)
            .build()
            .unwrap();
        ConverseStreamOutput::Metadata(ConverseStreamMetadataEvent::builder().usage(usage).build())
    }

    fn feed(events: Vec<ConverseStreamOutput>) -> Vec<Mapped> {
        let mut mapper = BedrockEventMapper::new();
        let mut out: Vec<Mapped> = events
            .into_iter()
            .flat_map(|e| mapper.map_event(e))
            .collect();
        out.extend(mapper.finish());
        out
    }

    fn check(events: Vec<ConverseStreamOutput>, expected: Vec<ModelEvent>) {
        let got: Vec<ModelEvent> = feed(events).into_iter().map(Result::unwrap).collect();
        assert_eq!(got, expected);
    }

    fn done(stop_reason: StopReason, input: u64, output: u64) -> ModelEvent {
        ModelEvent::Done {
            stop_reason,
            usage: Usage {
                input_tokens: input,
                output_tokens: output,
                ..Usage::default()
            },
        }
    }

    fn call(id: &str, name: &str, input: Value) -> ModelEvent {
        ModelEvent::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    #[test]
    fn text_then_done_with_the_usage_that_follows_message_stop() {
        check(
            vec![
                start(),
                text(0, "Hel"),
                text(0, ""),
                text(0, "lo"),
                block_stop(0),
                message_stop("end_turn"),
                metadata(12, 3, Some(100), Some(7)),
            ],
            vec![
                ModelEvent::text("Hel"),
                ModelEvent::text("lo"),
                ModelEvent::Done {
                    stop_reason: StopReason::EndTurn,
                    usage: Usage {
                        input_tokens: 12,
                        output_tokens: 3,
                        cache_read_tokens: 100,
                        cache_write_tokens: 7,
                    },
                },
            ],
        );
    }

    #[test]
    fn done_is_emitted_at_metadata_not_before() {
        let mut mapper = BedrockEventMapper::new();
        assert!(mapper.map_event(message_stop("end_turn")).is_empty());
        assert!(!mapper.is_complete());
        let out = mapper.map_event(metadata(1, 2, None, None));
        assert!(matches!(&out[..], [Ok(ModelEvent::Done { .. })]));
        assert!(mapper.is_complete());
        assert!(mapper.map_event(text(0, "late")).is_empty());
        assert!(mapper.finish().is_empty());
    }

    #[test]
    fn metadata_before_message_stop_still_gives_one_done() {
        check(
            vec![
                text(0, "x"),
                metadata(5, 1, None, None),
                message_stop("end_turn"),
            ],
            vec![ModelEvent::text("x"), done(StopReason::EndTurn, 5, 1)],
        );
    }

    #[test]
    fn without_metadata_done_comes_at_the_end_of_the_stream() {
        check(
            vec![text(0, "x"), message_stop("max_tokens")],
            vec![ModelEvent::text("x"), done(StopReason::MaxTokens, 0, 0)],
        );
    }

    #[test]
    fn a_stream_without_message_stop_is_a_transport_error() {
        let out = feed(vec![start(), text(0, "partial"), block_stop(0)]);
        assert_eq!(out.len(), 2);
        assert!(matches!(out[1], Err(BackendError::Transport { .. })));
    }

    #[test]
    fn a_tool_call_is_assembled_from_partial_input() {
        check(
            vec![
                start(),
                text(0, "Checking."),
                block_stop(0),
                tool_start(1, "t1", "weather"),
                tool_input(1, "{\"ci"),
                tool_input(1, "ty\": \"Os"),
                tool_input(1, "lo\"}"),
                block_stop(1),
                message_stop("tool_use"),
                metadata(10, 20, None, None),
            ],
            vec![
                ModelEvent::text("Checking."),
                call("t1", "weather", json!({"city": "Oslo"})),
                done(StopReason::ToolUse, 10, 20),
            ],
        );
    }

    #[test]
    fn interleaved_tool_blocks_assemble_by_index() {
        check(
            vec![
                tool_start(0, "a", "weather"),
                tool_start(1, "b", "weather"),
                tool_input(1, "{\"city\":"),
                tool_input(0, "{\"city\":"),
                tool_input(0, "\"Oslo\"}"),
                tool_input(1, "\"Rome\"}"),
                block_stop(1),
                block_stop(0),
                message_stop("tool_use"),
            ],
            vec![
                call("b", "weather", json!({"city": "Rome"})),
                call("a", "weather", json!({"city": "Oslo"})),
                done(StopReason::ToolUse, 0, 0),
            ],
        );
    }

    #[test]
    fn empty_tool_input_is_an_empty_object() {
        check(
            vec![
                tool_start(0, "t", "now"),
                block_stop(0),
                message_stop("tool_use"),
            ],
            vec![call("t", "now", json!({})), done(StopReason::ToolUse, 0, 0)],
        );
    }

    #[test]
    fn malformed_tool_input_ends_with_malformed_tool_use_instead_of_a_call() {
        for bad in ["{\"city\": \"Os", "[1, 2]", "nonsense"] {
            check(
                vec![
                    tool_start(0, "ok", "now"),
                    block_stop(0),
                    tool_start(1, "t", "weather"),
                    tool_input(1, bad),
                    block_stop(1),
                    message_stop("tool_use"),
                ],
                vec![
                    call("ok", "now", json!({})),
                    done(StopReason::MalformedToolUse, 0, 0),
                ],
            );
        }
    }

    #[test]
    fn a_call_cut_by_max_tokens_says_max_tokens() {
        check(
            vec![
                tool_start(0, "t", "weather"),
                tool_input(0, "{\"city\": \"Os"),
                message_stop("max_tokens"),
            ],
            vec![done(StopReason::MaxTokens, 0, 0)],
        );
    }

    #[test]
    fn input_for_a_block_that_never_started_is_malformed() {
        check(
            vec![tool_input(3, "{}"), block_stop(3), message_stop("tool_use")],
            vec![done(StopReason::MalformedToolUse, 0, 0)],
        );
    }

    #[test]
    fn reasoning_text_signature_and_redacted_bytes() {
        check(
            vec![
                reasoning(0, ReasoningContentBlockDelta::Text("Let me ".into())),
                reasoning(0, ReasoningContentBlockDelta::Text("think.".into())),
                reasoning(0, ReasoningContentBlockDelta::Signature("sig==".into())),
                block_stop(0),
                reasoning(
                    1,
                    ReasoningContentBlockDelta::RedactedContent(Blob::new(vec![1, 2, 255])),
                ),
                block_stop(1),
                text(2, "Answer."),
                message_stop("end_turn"),
            ],
            vec![
                ModelEvent::Reasoning {
                    delta: ReasoningDelta::Text("Let me ".into()),
                },
                ModelEvent::Reasoning {
                    delta: ReasoningDelta::Text("think.".into()),
                },
                ModelEvent::Reasoning {
                    delta: ReasoningDelta::Signature("sig==".into()),
                },
                ModelEvent::Reasoning {
                    delta: ReasoningDelta::Redacted(vec![1, 2, 255]),
                },
                ModelEvent::text("Answer."),
                done(StopReason::EndTurn, 0, 0),
            ],
        );
    }

    #[test]
    fn every_stop_reason() {
        let cases = [
            ("end_turn", StopReason::EndTurn),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::MaxTokens),
            ("stop_sequence", StopReason::StopSequence),
            ("guardrail_intervened", StopReason::Guardrail),
            ("content_filtered", StopReason::ContentFiltered),
            (
                "model_context_window_exceeded",
                StopReason::ContextWindowExceeded,
            ),
            ("malformed_model_output", StopReason::MalformedToolUse),
            ("malformed_tool_use", StopReason::MalformedToolUse),
            ("refusal", StopReason::Refusal),
            (
                "paused_for_lunch",
                StopReason::Other("paused_for_lunch".into()),
            ),
        ];
        for (wire, neutral) in cases {
            assert_eq!(stop_reason(&WireStopReason::from(wire)), neutral, "{wire}");
        }
    }

    #[test]
    fn fail_ends_the_mapper() {
        let mut mapper = BedrockEventMapper::new();
        let out = mapper.fail(BackendError::Overloaded);
        assert!(matches!(&out[..], [Err(BackendError::Overloaded)]));
        assert!(mapper.is_complete());
        assert!(mapper.fail(BackendError::Overloaded).is_empty());
        assert!(mapper.map_event(message_stop("end_turn")).is_empty());
        assert!(mapper.finish().is_empty());
    }
}
