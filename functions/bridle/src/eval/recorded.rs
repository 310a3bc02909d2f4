//! What an export recorded about each user turn, and the model that plays it back
//! ([`RecordedModel`]: `BRIDLE_BACKEND=scripted` without `BRIDLE_SCRIPT`).

use crate::export::record::ExportedConversation;
use async_trait::async_trait;
use backend::{BackendError, ChatModel, ChatRequest, EventStream, ModelEvent, ReasoningDelta};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use transcript::{Message, Part, Reasoning, Role};

/// One user turn as recorded.
#[derive(Debug, Clone)]
pub struct RecordedTurn {
    /// 1-based, in the conversation's order.
    pub number: usize,
    /// The segment's rows up to and including the user's message (context block as stored).
    pub history: Vec<Message>,
    /// The model's answers in this turn, in order (assistant rows with a call record).
    pub answers: Vec<Message>,
    /// The results the tools gave, by call: what a replayed call with the same name and
    /// arguments is answered with.
    pub results: RecordedResults,
}

/// A user's message: a user row that no model call wrote (compaction's notes have one).
fn is_user_turn(m: &Message) -> bool {
    m.role == Role::User && m.call.is_none()
}

/// The user turns of a conversation, in order.
pub fn turns(record: &ExportedConversation) -> Vec<RecordedTurn> {
    let mut out = Vec::new();
    for segment in &record.segments {
        let rows = &segment.messages;
        for (i, row) in rows.iter().enumerate() {
            if !is_user_turn(row) {
                continue;
            }
            let end = rows[i + 1..]
                .iter()
                .position(is_user_turn)
                .map_or(rows.len(), |p| i + 1 + p);
            let turn_rows = &rows[i + 1..end];
            out.push(RecordedTurn {
                number: out.len() + 1,
                history: rows[..=i].to_vec(),
                answers: turn_rows
                    .iter()
                    .filter(|m| m.role == Role::Assistant && m.call.is_some())
                    .cloned()
                    .collect(),
                results: RecordedResults::of(turn_rows),
            });
        }
    }
    out
}

/// A tool call as compared: its name and canonical arguments.
pub fn call_key(name: &str, input: &Value) -> String {
    format!("{name} {}", store::canonical_json(input))
}

/// The recorded results of a turn's tool calls, by name and arguments (in order, for a call
/// made twice).
#[derive(Debug, Clone, Default)]
pub struct RecordedResults(HashMap<String, VecDeque<(Value, bool)>>);

impl RecordedResults {
    fn of(rows: &[Message]) -> Self {
        let mut asked = HashMap::new();
        for row in rows.iter().filter(|m| m.role == Role::Assistant) {
            for part in &row.parts {
                if let Part::ToolUse { id, name, input } = part {
                    asked.insert(id.clone(), call_key(name, input));
                }
            }
        }
        let mut results: HashMap<String, VecDeque<(Value, bool)>> = HashMap::new();
        for row in rows.iter().filter(|m| m.role == Role::Tool) {
            for part in &row.parts {
                if let Part::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } = part
                    && let Some(key) = asked.get(tool_use_id)
                {
                    results
                        .entry(key.clone())
                        .or_default()
                        .push_back((content.clone(), *is_error));
                }
            }
        }
        Self(results)
    }

    /// The recorded result of this call, or a neutral error when the recording has none (the
    /// call changed). The bool says whether it was recorded.
    pub fn answer(&mut self, name: &str, input: &Value) -> (Value, bool, bool) {
        match self
            .0
            .get_mut(&call_key(name, input))
            .and_then(VecDeque::pop_front)
        {
            Some((content, is_error)) => (content, is_error, true),
            None => (
                json!({"error": "not recorded: this call was not made in the recorded \
                                 conversation, so the replay has no result for it"}),
                true,
                false,
            ),
        }
    }
}

/// Plays back the recorded answers of the turn being replayed, one per call, as their events:
/// the recorded model, with the recorded stop reason and usage.
#[derive(Debug, Default)]
pub struct RecordedModel {
    answers: Mutex<VecDeque<Message>>,
}

impl RecordedModel {
    /// The answers of the next turn to replay.
    pub fn load(&self, answers: &[Message]) {
        *self.answers.lock().unwrap() = answers.iter().cloned().collect();
    }
}

#[async_trait]
impl ChatModel for RecordedModel {
    fn name(&self) -> &str {
        "recorded"
    }

    async fn stream(&self, _request: ChatRequest) -> Result<EventStream, BackendError> {
        let Some(answer) = self.answers.lock().unwrap().pop_front() else {
            return Err(BackendError::InvalidRequest {
                message: "the recording has no further answer for this turn".into(),
            });
        };
        Ok(Box::pin(futures::stream::iter(events_of(&answer))))
    }
}

/// A recorded answer as the stream that produced it. A failed call streams what it had
/// streamed (its last text part is the harness's apology, not the model's) and then fails.
fn events_of(answer: &Message) -> Vec<Result<ModelEvent, BackendError>> {
    let Some(call) = &answer.call else {
        return Vec::new();
    };
    let mut parts: &[Part] = &answer.parts;
    if call.error.is_some() && matches!(parts.last(), Some(Part::Text { .. })) {
        parts = &parts[..parts.len() - 1];
    }
    let mut events = Vec::new();
    for part in parts {
        match part {
            Part::Text { text } => events.push(Ok(ModelEvent::text(text.clone()))),
            Part::Reasoning(Reasoning::Text { text, signature }) => {
                events.push(Ok(ModelEvent::Reasoning {
                    delta: ReasoningDelta::Text(text.clone()),
                }));
                if let Some(sig) = signature {
                    events.push(Ok(ModelEvent::Reasoning {
                        delta: ReasoningDelta::Signature(sig.clone()),
                    }));
                }
            }
            Part::Reasoning(Reasoning::Redacted { data }) => {
                events.push(Ok(ModelEvent::Reasoning {
                    delta: ReasoningDelta::Redacted(data.clone()),
                }))
            }
            Part::ToolUse { id, name, input } => events.push(Ok(ModelEvent::ToolUse {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
            })),
            Part::ToolResult { .. } | Part::Image(_) | Part::Document(_) => {}
        }
    }
    match (&call.error, &call.stop_reason) {
        (None, Some(stop_reason)) => events.push(Ok(ModelEvent::Done {
            stop_reason: stop_reason.clone(),
            usage: call.usage,
        })),
        (error, _) => events.push(Err(BackendError::transport(format!(
            "the recorded call failed ({})",
            error.as_deref().unwrap_or("no stop reason")
        )))),
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::record::{FORMAT, Segment};
    use futures::StreamExt;
    use transcript::{CallRecord, Conversation, StopReason, Usage};

    fn call(stop: Option<StopReason>, error: Option<&str>) -> CallRecord {
        CallRecord {
            backend: "scripted".into(),
            model: "m".into(),
            stop_reason: stop,
            error: error.map(str::to_owned),
            usage: Usage {
                input_tokens: 7,
                output_tokens: 3,
                ..Usage::default()
            },
            latency_ms: 1,
            tools_offered: vec![],
        }
    }

    fn row(position: u64, role: Role, parts: Vec<Part>, call: Option<CallRecord>) -> Message {
        Message {
            conversation_id: "c".into(),
            segment: 1,
            position,
            role,
            parts,
            call,
            action_id: None,
            created_at_ms: 0,
        }
    }

    fn use_(id: &str, name: &str, input: Value) -> Part {
        Part::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    fn result(id: &str, content: Value) -> Part {
        Part::ToolResult {
            tool_use_id: id.into(),
            content,
            is_error: false,
        }
    }

    /// A segment opened by compaction's notes, then two user turns: one with a tool call made
    /// twice, one answered by the harness alone.
    fn record() -> ExportedConversation {
        let tool_use = Some(call(Some(StopReason::ToolUse), None));
        let done = Some(call(Some(StopReason::EndTurn), None));
        let messages = vec![
            row(
                10,
                Role::User,
                vec![Part::text("<notes>…</notes>")],
                done.clone(),
            ),
            row(11, Role::User, vec![Part::text("first")], None),
            row(
                12,
                Role::Assistant,
                vec![
                    use_("a", "add", json!({"x": 1, "y": 2})),
                    use_("b", "add", json!({"y": 2, "x": 1})),
                ],
                tool_use,
            ),
            row(
                13,
                Role::Tool,
                vec![result("a", json!(3)), result("b", json!("again"))],
                None,
            ),
            row(14, Role::Assistant, vec![Part::text("Done.")], done),
            row(15, Role::User, vec![Part::text("second")], None),
            row(
                16,
                Role::Assistant,
                vec![Part::text("You've reached a limit.")],
                None,
            ),
        ];
        ExportedConversation {
            format: FORMAT.into(),
            conversation: Conversation::new("c", "u", "web", "chat"),
            segments: vec![Segment {
                segment: 1,
                messages,
            }],
            visible: vec![],
            redacted: false,
        }
    }

    #[test]
    fn user_turns_are_the_users_messages_with_the_model_answers_that_followed() {
        let turns = turns(&record());
        assert_eq!(turns.len(), 2, "compaction's notes are not a user turn");
        assert_eq!(turns[0].number, 1);
        let positions = |rows: &[Message]| rows.iter().map(|m| m.position).collect::<Vec<_>>();
        assert_eq!(positions(&turns[0].history), vec![10, 11]);
        assert_eq!(positions(&turns[0].answers), vec![12, 14]);
        assert_eq!(positions(&turns[1].history), vec![10, 11, 12, 13, 14, 15]);
        assert!(
            turns[1].answers.is_empty(),
            "a harness line is no model answer"
        );
    }

    #[test]
    fn calls_are_answered_by_name_and_arguments_in_recorded_order() {
        let mut results = turns(&record())[0].results.clone();
        // Key order does not matter; a call made twice gets its results in turn.
        assert_eq!(
            results.answer("add", &json!({"y": 2, "x": 1})),
            (json!(3), false, true)
        );
        assert_eq!(
            results.answer("add", &json!({"x": 1, "y": 2})),
            (json!("again"), false, true)
        );
        let (content, is_error, recorded) = results.answer("add", &json!({"x": 1, "y": 2}));
        assert!(is_error && !recorded);
        assert!(
            content["error"]
                .as_str()
                .unwrap()
                .starts_with("not recorded")
        );
    }

    #[tokio::test]
    async fn the_recorded_model_plays_each_answer_then_refuses() {
        let model = RecordedModel::default();
        let answers = [
            row(
                1,
                Role::Assistant,
                vec![Part::text("Half"), Part::text("Sorry.")],
                Some(call(None, Some("timeout"))),
            ),
            row(
                2,
                Role::Assistant,
                vec![Part::text("Done.")],
                Some(call(Some(StopReason::EndTurn), None)),
            ),
        ];
        model.load(&answers);
        let request = ChatRequest {
            model: String::new(),
            system: String::new(),
            messages: vec![],
            tools: Default::default(),
            settings: Default::default(),
        };
        let failed: Vec<_> = model.stream(request.clone()).await.unwrap().collect().await;
        // What streamed before the failure, not the harness's apology; then the failure.
        assert_eq!(failed.len(), 2);
        assert_eq!(failed[0].as_ref().unwrap(), &ModelEvent::text("Half"));
        assert!(failed[1].is_err());
        let done: Vec<_> = model.stream(request.clone()).await.unwrap().collect().await;
        assert!(matches!(
            done.last(),
            Some(Ok(ModelEvent::Done { stop_reason: StopReason::EndTurn, usage }))
                if usage.input_tokens == 7
        ));
        assert!(model.stream(request).await.is_err(), "no answer left");
    }
}
