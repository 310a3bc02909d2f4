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
