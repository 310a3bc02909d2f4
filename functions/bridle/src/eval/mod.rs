//! `bridle eval`: replay every recorded user turn of an export (`bridle export`) against the
//! current prompt, model and tools, and report what changed.
//!
//! Each turn is replayed on its own, from the recorded history up to the user's message (with
//! the context block as stored), through the engine's own request and call code
//! ([`engine::Replay`]). Tools never run: a call is answered with the recorded result of the
//! call with the same name and arguments, and a call the recording does not have gets a neutral
//! "not recorded" error (and counts as a change). A turn is *changed* when its tool calls (names,
//! arguments, order), its last stop reason, or whether it failed differ from the recording;
//! reply length, tokens and cost are reported side by side. A turn in which the model was not
//! called (a paused conversation, a guard's refusal, a confirmation press) is skipped.
//!
//! With the recorded model ([`recorded::RecordedModel`]) the recorded answers are played back,
//! so an export evaluated as it is shows no change.

pub mod cli;
pub mod config;
pub mod recorded;
pub mod report;

use crate::export::record::{ExportedConversation, FORMAT};
use engine::{Engine, FailedReplay};
use recorded::{RecordedModel, RecordedTurn, call_key};
use report::{EvalReport, Side, ToolCall, TurnResult};
use std::sync::Arc;
use transcript::{CallRecord, Message, Part, Role, StopReason};

/// Why the file could not be evaluated.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("line {line} of the export is not a conversation this version can read: {problem}")]
    BadLine { line: usize, problem: String },
    #[error("the export holds no conversation")]
    Empty,
}

/// Read an export: one conversation per non-blank line, each of [`FORMAT`].
pub fn read_export(text: &str) -> Result<Vec<ExportedConversation>, EvalError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: ExportedConversation =
            serde_json::from_str(line).map_err(|e| EvalError::BadLine {
                line: i + 1,
                problem: e.to_string(),
            })?;
        if record.format != FORMAT {
            return Err(EvalError::BadLine {
                line: i + 1,
                problem: format!("format {:?}, expected {FORMAT:?}", record.format),
            });
        }
        out.push(record);
    }
    if out.is_empty() {
        return Err(EvalError::Empty);
    }
    Ok(out)
}

/// What answers the replayed calls.
#[derive(Clone)]
pub enum Answerer {
    /// The engine's model (a real one, or a script file).
    Engine,
    /// The recorded answers, loaded turn by turn into the engine's model.
    Recorded(Arc<RecordedModel>),
}

impl std::fmt::Debug for Answerer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Answerer::Engine => "Engine",
            Answerer::Recorded(_) => "Recorded",
        })
    }
}

/// Everything the evaluation needs.
#[derive(Debug)]
pub struct Evaluator<'a> {
    pub engine: &'a Engine,
    pub answerer: Answerer,
    pub prices: &'a budget::PriceTable,
}

impl Evaluator<'_> {
    /// Replay every turn of every conversation, in order.
    pub async fn run(&self, conversations: &[ExportedConversation]) -> EvalReport {
        let mut turns = Vec::new();
        for record in conversations {
            for turn in recorded::turns(record) {
                turns.push(self.turn(record, turn).await);
            }
        }
        EvalReport::new(turns)
    }

    async fn turn(&self, record: &ExportedConversation, turn: RecordedTurn) -> TurnResult {
        let before = self.recorded_side(&turn);
        if turn.answers.is_empty() {
            // Paused, refused by a guard, or a confirmation press the harness decided: the
            // model was not asked then, so there is nothing to compare.
            return TurnResult::skipped(&record.conversation.id.0, turn.number, before);
        }
        if let Answerer::Recorded(model) = &self.answerer {
            model.load(&turn.answers);
        }
        let mut results = turn.results.clone();
        let mut replay = self
            .engine
            .replay(&record.conversation.purpose, turn.history.clone());
        let mut now = Side::default();
        let mut position = turn.history.last().map_or(0, |m| m.position + 1);
        let row = |role, parts, call, position| Message {
            conversation_id: record.conversation.id.clone(),
            segment: turn.history.last().map_or(0, |m| m.segment),
            position,
            role,
            parts,
            call,
            action_id: None,
            created_at_ms: 0,
        };
        let mut calls = 0;
        loop {
            if calls == self.engine.max_cycles() {
                now.failure = Some("the model-tool round-trip limit was reached".into());
                break;
            }
            calls += 1;
            let answer = match replay.call().await {
                Ok(answer) => answer,
                Err(FailedReplay { error, parts }) => {
                    now.reply_chars += text_chars(&parts);
                    now.failure = Some(format!("the model call failed ({})", error.kind()));
                    break;
                }
            };
            // The cost of the recorded model when its answers are played back.
            let model_id = match &self.answerer {
                Answerer::Recorded(_) => turn
                    .answers
                    .get(calls as usize - 1)
                    .and_then(|m| m.call.as_ref())
                    .map_or(String::new(), |c| c.model.clone()),
                Answerer::Engine => replay.request().model,
            };
            now.add_usage(answer.usage, self.prices.cost(&model_id, &answer.usage));
            now.reply_chars += text_chars(&answer.parts);
            now.stop_reason = Some(answer.stop_reason.as_str().to_owned());
            let asked: Vec<(String, String, serde_json::Value)> = answer
                .parts
                .iter()
                .filter_map(|p| match p {
                    Part::ToolUse { id, name, input } => {
                        Some((id.clone(), name.clone(), input.clone()))
                    }
                    _ => None,
                })
                .collect();
            for (_, name, input) in &asked {
                now.tool_calls.push(ToolCall::new(name, input));
            }
            let go_on = answer.stop_reason == StopReason::ToolUse && !asked.is_empty();
            let call = CallRecord {
                backend: "replay".into(),
                model: model_id,
                stop_reason: Some(answer.stop_reason.clone()),
                error: None,
                usage: answer.usage,
                latency_ms: answer.latency_ms,
                tools_offered: Vec::new(),
            };
            replay.push(row(Role::Assistant, answer.parts, Some(call), position));
            position += 1;
            if !go_on {
                break;
            }
            let mut answered = Vec::new();
            for (id, name, input) in asked {
                let (content, is_error, was_recorded) = results.answer(&name, &input);
                if !was_recorded {
                    now.not_recorded += 1;
                }
                answered.push(Part::ToolResult {
                    tool_use_id: id,
                    content,
                    is_error,
                });
            }
            replay.push(row(Role::Tool, answered, None, position));
            position += 1;
        }
        TurnResult::new(&record.conversation.id.0, turn.number, before, now)
    }

    /// The recorded turn, summed up the same way.
    fn recorded_side(&self, turn: &RecordedTurn) -> Side {
        let mut side = Side::default();
        for answer in &turn.answers {
            let Some(call) = &answer.call else { continue };
            side.add_usage(call.usage, self.prices.cost(&call.model, &call.usage));
            let mut parts: &[Part] = &answer.parts;
            if let Some(error) = &call.error {
                // The last text of a failed call is the harness's apology.
                if matches!(parts.last(), Some(Part::Text { .. })) {
                    parts = &parts[..parts.len() - 1];
                }
                side.failure = Some(format!("the model call failed ({error})"));
            }
            side.reply_chars += text_chars(parts);
            side.stop_reason = call.stop_reason.as_ref().map(|s| s.as_str().to_owned());
            for part in parts {
                if let Part::ToolUse { name, input, .. } = part {
                    side.tool_calls.push(ToolCall::new(name, input));
                }
            }
        }
        if side.failure.is_none()
            && side.stop_reason.as_deref() == Some("tool_use")
            && turn.answers.len() >= self.engine.max_cycles() as usize
        {
            side.failure = Some("the model-tool round-trip limit was reached".into());
        }
        side
    }
}

fn text_chars(parts: &[Part]) -> usize {
    parts
        .iter()
        .filter_map(Part::as_text)
        .map(|t| t.chars().count())
        .sum()
}

/// Two tool calls are the same call when their names and canonical arguments are.
pub fn same_call(a: &ToolCall, b: &ToolCall) -> bool {
    call_key(&a.name, &a.arguments) == call_key(&b.name, &b.arguments)
}
