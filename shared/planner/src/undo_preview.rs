//! What an undo would revert, told to a person before they undo it outside a conversation: the
//! owner undoing what one of their MCP clients did (a token revoked after a lost laptop can no
//! longer undo its own changes, and its conversation is reachable only through it). The
//! preview names the action; the undo runs only while that action is still on top of the
//! token's stack, so what the person read is what is reverted.

use crate::service::Caller;
use crate::{ATTENDEE, Attendee, EVENT, Event, Planner, PlannerError};
use serde_json::Value;
use store::{Change, StoreError, UndoRequest, UndoScope, reverting_changes};

/// The action an undo in a scope would revert now, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoPreview {
    /// Its action id: what [`Planner::undo_previewed`] is given back.
    pub action_id: String,
    /// When it was made.
    pub at_ms: i64,
    /// One line per record it would put back.
    pub lines: Vec<String>,
}

impl Planner {
    /// What an undo in `scope` would revert now; `None` when nothing is left to undo there.
    pub async fn undo_preview(
        &self,
        caller: &Caller,
        scope: &UndoScope,
    ) -> Result<Option<UndoPreview>, PlannerError> {
        let rows = self.store.next_undo(&caller.user, scope).await?;
        let Some(first) = rows.first() else {
            return Ok(None);
        };
        Ok(Some(UndoPreview {
            action_id: first.action_id.clone(),
            at_ms: rows.iter().map(|r| r.at_ms).max().unwrap_or(first.at_ms),
            lines: reverting_changes(&rows).iter().map(line).collect(),
        }))
    }

    /// Undo in `scope` the action `action_id` a preview named, only while it is still the one
    /// on top (nothing is reverted otherwise: [`PlannerError::Changed`]); the undo's answer.
    /// The rows checked are the rows pinned: the undo reverts exactly them, or nothing (an
    /// action landing on top in between is a conflict, never reverted in their place).
    pub async fn undo_previewed(
        &self,
        caller: &Caller,
        scope: UndoScope,
        action_id: &str,
    ) -> Result<String, PlannerError> {
        self.check_may_write(caller).await?;
        let rows = self.store.next_undo(&caller.user, &scope).await?;
        if rows.first().map(|r| r.action_id.as_str()) != Some(action_id) {
            return Err(PlannerError::Changed);
        }
        let call_key = format!("undo-previewed:{}", caller.action_id);
        let receipt = crate::events::receipt_for(&rows, &call_key, false);
        let undone = self
            .store
            .undo_last(&UndoRequest {
                user: caller.user.clone(),
                scope,
                action_id: caller.action_id.clone(),
                actor: caller.actor,
                conversation: caller.conversation.clone(),
                at_ms: self.now(),
                receipt,
            })
            .await;
        match undone {
            Err(StoreError::Conflict { .. }) => Err(PlannerError::Changed),
            other => Ok(crate::events::undo_answer(&other?, false)),
        }
    }
}

/// What putting `change` (already reversed: `after` is what it becomes) back does, in a line.
fn line(change: &Change) -> String {
    let title = |v: &Option<Value>| {
        v.as_ref()
            .and_then(|v| serde_json::from_value::<Event>(v.clone()).ok())
            .map(|e| format!("\u{201c}{}\u{201d}", crate::risk::whole_line(&e.title)))
    };
    let person = |v: &Option<Value>| {
        v.as_ref()
            .and_then(|v| serde_json::from_value::<Attendee>(v.clone()).ok())
            .map(|a| {
                format!(
                    "{} ({})",
                    crate::risk::whole_line(&a.name),
                    crate::risk::whole_line(&a.email)
                )
            })
    };
    match (change.kind.as_str(), &change.before, &change.after) {
        (EVENT, _, None) => format!(
            "delete the event {}",
            title(&change.before).unwrap_or_default()
        ),
        (EVENT, None, after) => {
            format!("bring back the event {}", title(after).unwrap_or_default())
        }
        (EVENT, _, after) => {
            let was = after
                .as_ref()
                .and_then(|v| serde_json::from_value::<Event>(v.clone()).ok());
            match was {
                Some(e) => format!(
                    "put the event {} back as it was ({}, {} at {}, {} places)",
                    title(after).unwrap_or_default(),
                    e.status.as_str(),
                    e.starts_at,
                    crate::risk::whole_line(&e.venue),
                    e.capacity
                ),
                None => "put an event back as it was".to_owned(),
            }
        }
        (ATTENDEE, _, None) => format!(
            "withdraw {}",
            person(&change.before).unwrap_or_else(|| "an attendee".into())
        ),
        (ATTENDEE, None, after) => format!(
            "register {} again",
            person(after).unwrap_or_else(|| "an attendee".into())
        ),
        (kind, _, _) => format!("put back the {kind} {} as it was", change.id),
    }
}
