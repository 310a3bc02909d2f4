//! The conversation `bridle smoke` holds, and the built-in model that plays the assistant's side
//! of it when `BRIDLE_BACKEND=scripted` names no `BRIDLE_SCRIPT` (how CI runs it).
//!
//! The planner gives events fresh ids, so the built-in model is a script with one blank: each
//! call's arguments may say `$event`, filled in with the newest event id in the tool results it
//! was sent. Every call is played by the [`ScriptedModel`], so its stream and usage are the
//! scripted model's.

use async_trait::async_trait;
use backend::{
    BackendError, ChatModel, ChatRequest, EventStream, Reply, ScriptedModel, StopReason,
};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Mutex;
use transcript::Part;

/// What the user does on one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Said {
    /// Types these words.
    Types(&'static str),
    /// Presses the server's "yes" button of the previous reply (when it offered one; otherwise
    /// types these words instead).
    PressesYes(&'static str),
}

/// One turn of the conversation: what it exercises, and what the user says.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    pub about: &'static str,
    pub said: Said,
}

/// The nine messages: greeting, a note, a planner event with a date, a correction, a risky
/// change (held for confirmation), the confirmation, undo (held too: undoing the cancellation
/// reopens the event), its confirmation, thanks.
pub const CONVERSATION: [Step; 9] = [
    Step {
        about: "greeting",
        said: Said::Types("Hi there!"),
    },
    Step {
        about: "a note",
        said: Said::Types("Please make a note: buy bread for the book club."),
    },
    Step {
        about: "a planner event with a date",
        said: Said::Types(
            "Plan a book club evening on 12 March 2027 at 19:00 at the town library, for 20 \
             people, and open registration.",
        ),
    },
    Step {
        about: "a correction",
        said: Said::Types("Sorry, I meant room for 25 people, not 20."),
    },
    Step {
        about: "a risky change (must be held for confirmation)",
        said: Said::Types("Actually, cancel the book club evening."),
    },
    Step {
        about: "the confirmation",
        said: Said::PressesYes("Yes, cancel it."),
    },
    Step {
        about: "undo (reopening the event: held for confirmation too)",
        said: Said::Types("Oh no, undo that please."),
    },
    Step {
        about: "the undo's confirmation",
        said: Said::PressesYes("Yes, reopen it."),
    },
    Step {
        about: "thanks",
        said: Said::Types("Thanks, that's all!"),
    },
];

/// The index of the step whose risky change must be held.
pub const RISKY_STEP: usize = 4;

/// The index of the step whose undo (reopening the cancelled event) is held too.
pub const UNDO_STEP: usize = 6;

/// One model call of the built-in script: words, then at most one tool call.
struct Call {
    say: &'static str,
    tool: Option<(&'static str, Value)>,
}

fn say(text: &'static str) -> Call {
    Call {
        say: text,
        tool: None,
    }
}

fn call(text: &'static str, tool: &'static str, input: Value) -> Call {
    Call {
        say: text,
        tool: Some((tool, input)),
    }
}

/// The assistant's side, call by call (15 calls over the 9 turns).
fn calls() -> Vec<Call> {
    vec![
        say("Hello! I can keep notes and plan events for you. What would you like to do?"),
        call(
            "",
            "add_note",
            json!({"text": "Buy bread for the book club"}),
        ),
        say("Noted: buy bread for the book club."),
        call(
            "Let me set that up.",
            "create_event",
            json!({"title": "Book club evening", "starts_at": "2027-03-12T19:00",
                   "venue": "Town library", "capacity": 20}),
        ),
        call("", "publish_event", json!({"event_id": "$event"})),
        say(
            "The book club evening is planned for 12 March 2027 at 19:00 at the town library, \
             for 20 people, and registration is open.",
        ),
        call(
            "",
            "update_event",
            json!({"event_id": "$event", "capacity": 25}),
        ),
        say("Done: there is room for 25 people now."),
        call("", "cancel_event", json!({"event_id": "$event"})),
        say("Cancelling a published event needs your yes. Shall I cancel the book club evening?"),
        say("The book club evening is cancelled."),
        call("", "undo", json!({})),
        say("Reopening the book club evening needs your yes too. Shall I undo the cancellation?"),
        say("The book club evening is back on."),
        say("You're welcome! Enjoy the book club."),
    ]
}

/// The built-in model: plays [`calls`] in order, filling in `$event`.
#[derive(Debug, Default)]
pub struct BuiltInScript {
    played: Mutex<usize>,
}

#[async_trait]
impl ChatModel for BuiltInScript {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, BackendError> {
        let n = {
            let mut played = self.played.lock().unwrap_or_else(|p| p.into_inner());
            *played += 1;
            *played
        };
        let Some(next) = calls().into_iter().nth(n - 1) else {
            return Err(BackendError::InvalidRequest {
                message: format!("the built-in smoke script has no call {n}"),
            });
        };
        let mut reply = Reply::new();
        if !next.say.is_empty() {
            reply = reply.say(next.say);
        }
        reply = match next.tool {
            Some((tool, input)) => {
                let input = fill(input, newest_event(&request).as_deref());
                reply
                    .call(&format!("smoke-{n}"), tool, input)
                    .stop(StopReason::ToolUse)
            }
            None => reply.stop(StopReason::EndTurn),
        };
        ScriptedModel::new([reply]).stream(request).await
    }
}

/// `$event` replaced with `event` wherever it is a whole string value.
fn fill(input: Value, event: Option<&str>) -> Value {
    match (input, event) {
        (Value::String(s), Some(id)) if s == "$event" => Value::String(id.to_owned()),
        (Value::Object(map), _) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, fill(v, event))).collect())
        }
        (other, _) => other,
    }
}

/// The newest event id (`ev-…`) in the tool results the request carries.
fn newest_event(request: &ChatRequest) -> Option<String> {
    request
        .messages
        .iter()
        .rev()
        .flat_map(|m| m.parts.iter().rev())
        .find_map(|part| match part {
            Part::ToolResult { content, .. } => event_id_in(content),
            _ => None,
        })
}

fn event_id_in(value: &Value) -> Option<String> {
    let mut queue = VecDeque::from([value]);
    while let Some(v) = queue.pop_front() {
        match v {
            Value::Object(map) => {
                if let Some(Value::String(id)) = map.get("id")
                    && id.starts_with("ev-")
                {
                    return Some(id.clone());
                }
                queue.extend(map.values());
            }
            Value::Array(items) => queue.extend(items),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_are_found_in_results_and_filled_in() {
        let found = event_id_in(&json!({"items": [{"id": "at-1", "event": {"id": "ev-42"}}]}));
        assert_eq!(found.as_deref(), Some("ev-42"));
        assert_eq!(
            fill(json!({"event_id": "$event", "capacity": 25}), Some("ev-42")),
            json!({"event_id": "ev-42", "capacity": 25})
        );
        assert_eq!(calls().len(), 15);
    }
}
