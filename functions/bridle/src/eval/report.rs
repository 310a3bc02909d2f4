//! The evaluation's results per turn and in total, as a table or JSON, and the verdict for CI.

use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;
use transcript::Usage;

/// The format of `bridle eval --json`.
pub const EVAL_FORMAT: &str = "bridle-eval/1";

/// One tool call as compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

impl ToolCall {
    pub fn new(name: &str, arguments: &Value) -> Self {
        Self {
            name: name.to_owned(),
            arguments: arguments.clone(),
        }
    }

    fn label(&self) -> String {
        format!("{} {}", self.name, store::canonical_json(&self.arguments))
    }
}

/// What one side (recorded or replayed) of a turn did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Side {
    pub tool_calls: Vec<ToolCall>,
    /// The last model call's stop reason.
    pub stop_reason: Option<String>,
    /// Characters of the model's text.
    pub reply_chars: usize,
    pub usage: Usage,
    pub tokens: u64,
    /// Estimated, in micro-dollars (the budget's price table).
    pub cost_micros: u64,
    /// Why the turn failed, if it did.
    pub failure: Option<String>,
    /// Replayed calls the recording had no result for.
    pub not_recorded: usize,
}

impl Side {
    pub fn add_usage(&mut self, usage: Usage, cost_micros: u64) {
        self.usage += usage;
        self.tokens = self.usage.total();
        self.cost_micros += cost_micros;
    }
}

/// One turn: recorded, replayed, and what differs.
#[derive(Debug, Clone, Serialize)]
pub struct TurnResult {
    pub conversation: String,
    pub turn: usize,
    /// `same`, `changed`, `fails` (fails now, did not before) or `skipped` (no model call was
    /// recorded for it).
    pub verdict: &'static str,
    /// One sentence per difference.
    pub changes: Vec<String>,
    pub recorded: Side,
    pub replayed: Side,
}

impl TurnResult {
    pub fn new(conversation: &str, turn: usize, recorded: Side, replayed: Side) -> Self {
        let mut changes = Vec::new();
        let calls_same = recorded.tool_calls.len() == replayed.tool_calls.len()
            && recorded
                .tool_calls
                .iter()
                .zip(&replayed.tool_calls)
                .all(|(a, b)| super::same_call(a, b));
        if !calls_same {
            changes.push(format!(
                "tool calls: {} → {}",
                calls_label(&recorded.tool_calls),
                calls_label(&replayed.tool_calls)
            ));
        }
        if replayed.not_recorded > 0 {
            changes.push(format!(
                "{} call(s) had no recorded result and were answered \"not recorded\"",
                replayed.not_recorded
            ));
        }
        if recorded.stop_reason != replayed.stop_reason {
            changes.push(format!(
                "stop reason: {} → {}",
                recorded.stop_reason.as_deref().unwrap_or("none"),
                replayed.stop_reason.as_deref().unwrap_or("none")
            ));
        }
        match (&recorded.failure, &replayed.failure) {
            (None, Some(now)) => changes.push(format!("now fails: {now}")),
            (Some(_), None) => changes.push("no longer fails".into()),
            _ => {}
        }
        let verdict = if recorded.failure.is_none() && replayed.failure.is_some() {
            "fails"
        } else if changes.is_empty() {
            "same"
        } else {
            "changed"
        };
        Self {
            conversation: conversation.to_owned(),
            turn,
            verdict,
            changes,
            recorded,
            replayed,
        }
    }

    /// A turn the recording has no model call for: listed, not replayed, not a change.
    pub fn skipped(conversation: &str, turn: usize, recorded: Side) -> Self {
        Self {
            conversation: conversation.to_owned(),
            turn,
            verdict: "skipped",
            changes: Vec::new(),
            replayed: Side::default(),
            recorded,
        }
    }

    pub fn is_changed(&self) -> bool {
        !matches!(self.verdict, "same" | "skipped")
    }
}

fn calls_label(calls: &[ToolCall]) -> String {
    if calls.is_empty() {
        return "(none)".into();
    }
    calls
        .iter()
        .map(ToolCall::label)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Sums over all turns.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub tool_calls: usize,
    pub reply_chars: usize,
    pub tokens: u64,
    pub cost_micros: u64,
    pub failing_turns: usize,
}

impl Totals {
    fn of<'a>(sides: impl Iterator<Item = &'a Side>) -> Self {
        let mut t = Totals::default();
        for s in sides {
            t.tool_calls += s.tool_calls.len();
            t.reply_chars += s.reply_chars;
            t.tokens += s.tokens;
            t.cost_micros += s.cost_micros;
            t.failing_turns += usize::from(s.failure.is_some());
        }
        t
    }
}

/// The whole evaluation.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub format: &'static str,
    pub turns: Vec<TurnResult>,
    /// Turns that differ from the recording (failing ones included).
    pub changed_turns: usize,
    /// Turns that fail now and did not before.
    pub newly_failing_turns: usize,
    pub recorded: Totals,
    pub replayed: Totals,
    /// The threshold: at most this many changed turns pass.
    pub max_changed: usize,
    pub passed: bool,
}

impl EvalReport {
    pub fn new(turns: Vec<TurnResult>) -> Self {
        let changed_turns = turns.iter().filter(|t| t.is_changed()).count();
        Self {
            format: EVAL_FORMAT,
            changed_turns,
            newly_failing_turns: turns.iter().filter(|t| t.verdict == "fails").count(),
            recorded: Totals::of(turns.iter().map(|t| &t.recorded)),
            replayed: Totals::of(turns.iter().map(|t| &t.replayed)),
            turns,
            max_changed: 0,
            passed: changed_turns == 0,
        }
    }

    /// Apply the CI threshold.
    pub fn with_threshold(mut self, max_changed: usize) -> Self {
        self.max_changed = max_changed;
        self.passed = self.changed_turns <= max_changed;
        self
    }

    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// A table, then each change in a sentence, then the verdict.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<24} {:>4}  {:<8} {:>11}  {:<22} {:>13}  {:>15}  {:>19}",
            "CONVERSATION",
            "TURN",
            "RESULT",
            "TOOL CALLS",
            "STOP",
            "REPLY CHARS",
            "TOKENS",
            "COST $"
        );
        for t in &self.turns {
            let (r, n) = (&t.recorded, &t.replayed);
            let _ = writeln!(
                out,
                "{:<24} {:>4}  {:<8} {:>11}  {:<22} {:>13}  {:>15}  {:>19}",
                short(&t.conversation, 24),
                t.turn,
                t.verdict,
                format!("{} → {}", r.tool_calls.len(), n.tool_calls.len()),
                short(
                    &format!(
                        "{} → {}",
                        r.stop_reason.as_deref().unwrap_or("-"),
                        n.stop_reason.as_deref().unwrap_or("-")
                    ),
                    22
                ),
                format!("{} → {}", r.reply_chars, n.reply_chars),
                format!("{} → {}", r.tokens, n.tokens),
                format!("{} → {}", dollars(r.cost_micros), dollars(n.cost_micros)),
            );
        }
        let (r, n) = (&self.recorded, &self.replayed);
        let _ = writeln!(
            out,
            "{:<24} {:>4}  {:<8} {:>11}  {:<22} {:>13}  {:>15}  {:>19}",
            "TOTAL",
            self.turns.len(),
            "",
            format!("{} → {}", r.tool_calls, n.tool_calls),
            "",
            format!("{} → {}", r.reply_chars, n.reply_chars),
            format!("{} → {}", r.tokens, n.tokens),
            format!("{} → {}", dollars(r.cost_micros), dollars(n.cost_micros)),
        );
        let changed: Vec<&TurnResult> = self.turns.iter().filter(|t| t.is_changed()).collect();
        if !changed.is_empty() {
            out.push_str("\nChanges:\n");
            for t in changed {
                for c in &t.changes {
                    let _ = writeln!(out, "  {} turn {}: {c}", t.conversation, t.turn);
                }
            }
        }
        let _ = writeln!(
            out,
            "\n{} of {} turns changed ({} now failing); at most {} allowed: {}.",
            self.changed_turns,
            self.turns.len(),
            self.newly_failing_turns,
            self.max_changed,
            if self.passed { "passed" } else { "FAILED" }
        );
        out
    }
}

fn short(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(width - 1).collect();
    s.push('…');
    s
}

fn dollars(micros: u64) -> String {
    format!("{:.4}", micros as f64 / 1_000_000.0)
}
