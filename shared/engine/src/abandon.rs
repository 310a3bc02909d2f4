//! Giving up on a turn for good (its job failed on every attempt): the transcript is closed so
//! the next turn is coherent — calls left unanswered get a "not executed" result, and the
//! assistant says the message could not be processed — and nothing that was stored is changed
//! (append-only). A call that did run keeps what it did: its recorded result, or its answer
//! from the receipt its effect was committed with, so the model is never told that a change
//! it made was not made (and makes it again). The visible entry is the job path's, which also
//! tells the user.

use crate::resume::{self, Next};
use crate::{Engine, EngineError};
use serde_json::json;
use tools::ActionId;
use transcript::{Conversation, ConversationId, Message, Part, Role};

/// What [`Engine::close_abandoned_turn`] found of the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandoned {
    /// The user's message was never stored: there is no turn to close.
    NotStored,
    /// The turn had ended with its answer: nothing was written. `latest`: no later turn has
    /// begun since (so the conversation's latest entries are this turn's).
    Finished { latest: bool },
    /// A later turn had begun: the turn was open (the later job took the conversation's lease
    /// between this one's last attempt and its give-up), or its message is in a segment before
    /// the current one, which the later turn's compaction opened (a dead letter sent again,
    /// given up again; in whatever state it was left). Nothing was written, since rows now
    /// would land inside that turn (which closed this one first if it was left asking). The
    /// job path tells its user the message failed.
    Overtaken,
    /// The turn was open and is closed now.
    Closed,
}

impl Engine {
    /// Close the turn written by `action_id` in `conversation` with `line`, unless it already
    /// ended, and say which it was. `received_at_ms`: when its message was received, to find
    /// it in a segment a later turn's compaction moved on from ([`resume::in_earlier_segment`];
    /// `None`: not looked for).
    pub async fn close_abandoned_turn(
        &self,
        conversation: &ConversationId,
        action_id: &ActionId,
        line: &str,
        received_at_ms: Option<i64>,
    ) -> Result<Abandoned, EngineError> {
        let store = &self.store;
        let Some(conv) = store.conversation(conversation).await? else {
            return Ok(Abandoned::NotStored);
        };
        let history = store.messages(conversation, conv.segment).await?;
        let Some(found) = resume::find(&history, &action_id.0) else {
            let earlier = resume::in_earlier_segment(
                store.as_ref(),
                &conv,
                &history,
                &action_id.0,
                received_at_ms,
            )
            .await?;
            return Ok(match earlier {
                true => Abandoned::Overtaken,
                false => Abandoned::NotStored,
            });
        };
        let user_row = |m: &Message| m.role == Role::User && m.call.is_none();
        let mine = history
            .iter()
            .rposition(|m| user_row(m) && m.action_id.as_deref() == Some(action_id.0.as_str()));
        let latest = mine == history.iter().rposition(user_row);
        if let Next::Finished = found.next {
            return Ok(Abandoned::Finished { latest });
        }
        if !latest {
            tracing::warn!(conversation = %conversation, action_id = %action_id, "a later turn began before this one was given up; nothing written into it");
            return Ok(Abandoned::Overtaken);
        }
        let position = store.next_position(conversation).await?;
        let rows = self
            .closing_rows(&conv, &action_id.0, found.next, line, position)
            .await?;
        for row in &rows {
            store.append_message(row).await?;
        }
        tracing::warn!(conversation = %conversation, action_id = %action_id, "turn given up and closed");
        Ok(Abandoned::Closed)
    }

    /// Void the calls the turn written by `action_id` held for a yes, when the user never saw
    /// its question (its reply did not go out, and the turn was given up): no later yes, to
    /// "please send it again", may confirm them. Each record is taken as by a No press.
    pub async fn void_held(
        &self,
        conversation: &ConversationId,
        action_id: &ActionId,
    ) -> Result<(), EngineError> {
        let Some(gate) = &self.confirmation else {
            return Ok(());
        };
        let Some(conv) = self.store.conversation(conversation).await? else {
            return Ok(());
        };
        let history = self.store.messages(conversation, conv.segment).await?;
        for call in crate::confirm::held_calls(&history, &action_id.0) {
            gate.void_unseen(conversation, &call, &action_id.0).await?;
        }
        Ok(())
    }

    /// The rows that close the turn written by `action_id` in `conv`, open at `next`, from
    /// `position` on: its unanswered calls answered (as recorded, from their receipts, or as
    /// not executed), then `line` in the assistant's place. Nothing for a finished turn.
    pub(crate) async fn closing_rows(
        &self,
        conv: &Conversation,
        action_id: &str,
        next: Next,
        line: &str,
        mut position: u64,
    ) -> Result<Vec<Message>, EngineError> {
        let store = &self.store;
        let mut append = |role: Role, parts: Vec<Part>| {
            let message = Message {
                conversation_id: conv.id.clone(),
                segment: conv.segment,
                position,
                role,
                parts,
                call: None,
                action_id: Some(action_id.to_owned()),
                created_at_ms: (self.clock)(),
            };
            position += 1;
            message
        };
        let mut rows = Vec::new();
        match next {
            Next::Finished => {}
            Next::Tools {
                calls, asked_at, ..
            } => {
                let mut recorded = store.tool_results(&conv.id, asked_at).await?;
                let mut results = Vec::with_capacity(calls.len());
                for call in &calls {
                    let key = crate::turn::call_key(&conv.id, asked_at, &call.id);
                    let part = match recorded.remove(&call.id) {
                        Some(part) => part,
                        None => match store.receipt(&key).await? {
                            Some(output) => self.tools.answer(call, output).part,
                            None => Part::ToolResult {
                                tool_use_id: call.id.clone(),
                                content: json!({ "error": "NOT EXECUTED: processing this message failed and was given up." }),
                                is_error: true,
                            },
                        },
                    };
                    results.push(part);
                }
                rows.push(append(Role::Tool, results));
                rows.push(append(Role::Assistant, vec![Part::text(line)]));
            }
            Next::Model | Next::Conclude { .. } => {
                rows.push(append(Role::Assistant, vec![Part::text(line)]))
            }
        }
        Ok(rows)
    }
}
