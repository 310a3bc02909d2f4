//! Resuming a turn whose worker died: what the stored transcript says was already done.
//!
//! Every message a turn writes carries its action id. When the same job runs again, the engine
//! finds its user message and carries on from the last stored row: no second user message, no
//! second run of a tool whose result is stored, no model call repeated whose answer is stored.

use tools::ToolCall;
use transcript::{Message, Part, Role, StopReason};

/// What is left to do for a turn found in the transcript.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    /// Call the model (after the user message or after tool results).
    Model,
    /// The last answer (stored at position `asked_at`, ended for `stop`) asked for tools and
    /// their tool message was never stored: run the calls whose own results are not stored
    /// either — or, when `stop` is one that runs no tools (cut off, refused), answer them as not
    /// executed, as the first attempt was doing.
    Tools {
        calls: Vec<ToolCall>,
        asked_at: u64,
        stop: StopReason,
    },
    /// The last answer ended for `stop`, which runs no tools, and its calls were answered as not
    /// executed: only the turn's ending is left (the line the user is owed, say "cut off").
    Conclude { stop: StopReason },
    /// The turn had ended; only the bookkeeping after it may be missing.
    Finished,
}

/// A turn that was already under way.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Resume {
    /// Model calls already made (they count towards the ceiling).
    pub calls_made: u32,
    /// The assistant text already produced, as it would have been shown.
    pub shown: String,
    pub next: Next,
}

/// The state of the turn written by `action_id`, if its user message is in `history`. The
/// notes a compaction of this turn wrote (a user row with the compaction call's record, the
/// turn's action id, first in the new segment) are not its user message: a turn cut after its
/// compaction and before its message has not started, and runs as new after the notes.
/// Everything after its message counts, a later turn's rows too (so a turn overtaken by a
/// finished later one reads as finished); a turn a later one overtook is not run again
/// ([`overtaken`]), whatever this reads.
pub(crate) fn find(history: &[Message], action_id: &str) -> Option<Resume> {
    let start = user_row_of(history, action_id)?;
    Some(from_rows(history[start + 1..].iter().collect()))
}

/// [`find`], from the turn's own rows only: how the turn itself ended, whatever later turns did
/// (asked by the retry of the next message, whose own rows say nothing of whether this one
/// asked its question).
pub(crate) fn find_own(history: &[Message], action_id: &str) -> Option<Resume> {
    let start = user_row_of(history, action_id)?;
    let rows = history[start + 1..]
        .iter()
        .filter(|m| m.action_id.as_deref().is_none_or(|a| a == action_id))
        .collect();
    Some(from_rows(rows))
}

/// Whether a later message's turn began after the turn written by `action_id` (a user message
/// of another action follows its own): that turn took the conversation over, with this one's
/// message and whatever it stored in its history (closed first, had it been left asking), so
/// this one is not run again — a dead letter sent again after newer messages were answered.
/// Resumed, it would read the later turn's rows as its own: run the calls that turn left
/// open, or send that turn's answer as its reply.
pub(crate) fn overtaken(history: &[Message], action_id: &str) -> bool {
    let Some(start) = user_row_of(history, action_id) else {
        return false;
    };
    history[start + 1..].iter().any(|m| {
        m.role == Role::User && m.call.is_none() && m.action_id.as_deref() != Some(action_id)
    })
}

/// Whether the turn written by `action_id`, not in the current segment (`rows`), stored its
/// user message in an earlier one — so a later turn's compaction moved on from it, and it is
/// overtaken as [`overtaken`] says. Looked for only when the current segment opened after the
/// message was received (at `received_at_ms`; `None`: not known, not looked for) and holds no
/// row of this turn's: back through the segments opened since, one read each, none for a
/// message newer than its segment (every turn but a dead letter's sent again, or one queued
/// behind a compaction).
pub(crate) async fn in_earlier_segment(
    store: &dyn store::Store,
    conversation: &transcript::Conversation,
    rows: &[Message],
    action_id: &str,
    received_at_ms: Option<i64>,
) -> Result<bool, store::StoreError> {
    let Some(received) = received_at_ms else {
        return Ok(false);
    };
    let opened_since = |first: Option<&Message>| first.is_some_and(|m| m.created_at_ms > received);
    // A row of its own in the current segment (its own compaction's notes, or its message
    // moved on by a crashed compaction's segment, `Turn::append`): its turn is here, not in
    // one before.
    let here = rows
        .iter()
        .any(|m| m.action_id.as_deref() == Some(action_id));
    if conversation.segment == 0 || here || !opened_since(rows.first()) {
        return Ok(false);
    }
    for segment in (0..conversation.segment).rev() {
        let earlier = store.messages(&conversation.id, segment).await?;
        if user_row_of(&earlier, action_id).is_some() {
            return Ok(true);
        }
        if !opened_since(earlier.first()) {
            return Ok(false);
        }
    }
    Ok(false)
}

/// Where the turn's user message is.
fn user_row_of(history: &[Message], action_id: &str) -> Option<usize> {
    history.iter().rposition(|m| {
        m.role == Role::User && m.call.is_none() && m.action_id.as_deref() == Some(action_id)
    })
}

/// The state of a turn whose rows after its user message are `rows`.
fn from_rows(rows: Vec<&Message>) -> Resume {
    let calls_made = rows.iter().filter(|m| m.call.is_some()).count() as u32;
    let shown = rows
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .map(|m| m.text())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    let next = match rows.last() {
        None => Next::Model,
        Some(last) if last.role == Role::Tool => {
            let answered = rows.len().checked_sub(2).map(|i| &rows[i]);
            match answered.and_then(|m| m.call.as_ref()?.stop_reason.clone()) {
                Some(stop) if !runs_tools(&stop) => Next::Conclude { stop },
                _ => Next::Model,
            }
        }
        Some(last) if last.role == Role::Assistant && last.call.is_some() => {
            let calls = tool_calls(&last.parts);
            if calls.is_empty() {
                Next::Finished
            } else {
                Next::Tools {
                    calls,
                    asked_at: last.position,
                    stop: last
                        .call
                        .as_ref()
                        .and_then(|c| c.stop_reason.clone())
                        .unwrap_or(StopReason::ToolUse),
                }
            }
        }
        // A line of the harness's own (bail-out, cut-off, apology) ends a turn.
        Some(_) => Next::Finished,
    };
    Resume {
        calls_made,
        shown,
        next,
    }
}

/// The turn before a new one, when it was left asking for tools whose results were never
/// stored (its worker died on its last attempt, or a web function's process was killed, and
/// nobody gave it up): its action id and what it left undone. A provider refuses a request
/// whose `tool_use` has no `tool_result` after it, so that turn is closed before the next one
/// starts. (A turn left after its user message or its tool results needs nothing: the next
/// message joins them.)
pub(crate) fn left_asking(history: &[Message]) -> Option<(String, Next)> {
    let last = history
        .iter()
        .rev()
        .find(|m| m.role == Role::User && m.call.is_none())?;
    let action = last.action_id.clone()?;
    match find(history, &action)?.next {
        next @ Next::Tools { .. } => Some((action, next)),
        Next::Model | Next::Conclude { .. } | Next::Finished => None,
    }
}

/// Whether an answer that ended for `stop` has its calls run (the others end cut off, refused
/// or filtered, and their calls are answered as not executed).
pub(crate) fn runs_tools(stop: &StopReason) -> bool {
    matches!(
        stop,
        StopReason::ToolUse | StopReason::EndTurn | StopReason::StopSequence
    )
}

pub(crate) fn tool_calls(parts: &[Part]) -> Vec<ToolCall> {
    parts
        .iter()
        .filter_map(|p| match p {
            Part::ToolUse { id, name, input } => Some(ToolCall {
                id: id.clone(),
                name: name.clone(),
                input: input.clone(),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use transcript::{CallRecord, StopReason, Usage};

    fn row(role: Role, parts: Vec<Part>, called: bool, action: &str) -> Message {
        Message {
            conversation_id: "c".into(),
            segment: 0,
            position: 0,
            role,
            parts,
            call: called.then(|| CallRecord {
                backend: "b".into(),
                model: "m".into(),
                stop_reason: Some(StopReason::ToolUse),
                error: None,
                usage: Usage::default(),
                latency_ms: 0,
                tools_offered: vec![],
            }),
            action_id: Some(action.into()),
            created_at_ms: 0,
        }
    }

    fn user(action: &str) -> Message {
        row(Role::User, vec![Part::text("hi")], false, action)
    }

    fn asks_for_tool(action: &str) -> Message {
        let parts = vec![
            Part::text("Checking."),
            Part::ToolUse {
                id: "t1".into(),
                name: "list".into(),
                input: json!({}),
            },
        ];
        row(Role::Assistant, parts, true, action)
    }

    #[test]
    fn a_turn_not_in_the_transcript_is_new() {
        assert_eq!(find(&[user("a1")], "a2"), None);
    }

    #[test]
    fn a_lone_user_message_resumes_at_the_model() {
        let r = find(&[user("a0"), user("a1")], "a1").unwrap();
        assert_eq!(
            (r.calls_made, r.next, r.shown.as_str()),
            (0, Next::Model, "")
        );
    }

    #[test]
    fn tools_without_results_are_run_and_stored_results_are_not() {
        let r = find(&[user("a1"), asks_for_tool("a1")], "a1").unwrap();
        assert_eq!(r.calls_made, 1);
        assert!(matches!(&r.next, Next::Tools { calls: c, .. } if c.len() == 1 && c[0].id == "t1"));
        assert_eq!(r.shown, "Checking.");
        let done = row(Role::Tool, vec![], false, "a1");
        let r = find(&[user("a1"), asks_for_tool("a1"), done], "a1").unwrap();
        assert_eq!(r.next, Next::Model);
    }

    #[test]
    fn a_turn_is_overtaken_once_a_later_message_follows_it() {
        let left = [user("a1"), asks_for_tool("a1")];
        assert!(!overtaken(&left, "a1"));
        assert!(!overtaken(&left, "a2"), "not in the transcript");
        let later = [
            user("a1"),
            asks_for_tool("a1"),
            user("a2"),
            asks_for_tool("a2"),
        ];
        assert!(overtaken(&later, "a1"));
        assert!(!overtaken(&later, "a2"));
        // A compaction's notes (a user row with a call record) are not a later message.
        let notes = row(Role::User, vec![Part::text("notes")], true, "a2");
        assert!(!overtaken(&[user("a1"), notes], "a1"));
    }

    #[test]
    fn a_final_answer_or_a_harness_line_means_finished() {
        let answer = row(Role::Assistant, vec![Part::text("Done.")], true, "a1");
        let r = find(&[user("a1"), answer.clone()], "a1").unwrap();
        assert_eq!((r.next, r.shown.as_str()), (Next::Finished, "Done."));
        let line = row(Role::Assistant, vec![Part::text("Sorry.")], false, "a1");
        assert_eq!(
            find(&[user("a1"), line], "a1").unwrap().next,
            Next::Finished
        );
    }
}
