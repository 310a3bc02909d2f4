//! A compact picture of the user's planner state for the per-turn context block.

use crate::risk::whole_line;
use crate::{EVENT, Event, Planner, PlannerError};
use serde::Serialize;
use transcript::{ConversationId, UserId};

/// The most events the context block lists: the next ones from yesterday on (UTC), filled up with
/// the latest before them; the active one is described in full whatever its date. The block goes
/// with every model call of every turn, so it must not grow with the user's history: 50 lines
/// are about 1,500 tokens.
pub const SNAPSHOT_EVENTS: usize = 50;

/// One event in a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventLine {
    pub id: String,
    pub title: String,
    /// The date part of `starts_at`.
    pub date: String,
    pub status: String,
}

/// What the per-turn context block says about the user: their account's name and time zone,
/// and the planner snapshot as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserContext {
    pub name: Option<String>,
    pub time_zone: Option<String>,
    pub records: String,
}

/// The user's events and the conversation's active event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    pub events: Vec<EventLine>,
    /// The active event in full, when there is one and it is still the user's.
    pub active: Option<Event>,
    /// Both, as compact text.
    pub text: String,
}

impl Planner {
    /// The user's events (compact) and the active event of `conversation` (details).
    pub async fn snapshot(
        &self,
        user: &UserId,
        conversation: &ConversationId,
    ) -> Result<Snapshot, PlannerError> {
        // One read: the user's events and the conversation's pointer. The active event is
        // the listed one with that id, so the owner gate is the list's: a stale or foreign
        // pointer shows nothing.
        let (records, active) = self
            .store
            .records_with_active(user, EVENT, conversation)
            .await?;
        let listed = crate::events::sorted_events(records);
        let active = active.and_then(|id| listed.iter().find(|e| e.id == id).cloned());
        let events: Vec<EventLine> = listed
            .into_iter()
            .map(|e| EventLine {
                date: e.starts_at.get(..10).unwrap_or(&e.starts_at).to_owned(),
                status: e.status.as_str().to_owned(),
                id: e.id,
                title: e.title,
            })
            .collect();
        let mut text = String::from("Events:");
        if events.is_empty() {
            text.push_str(" none");
        }
        // The next ones from yesterday on (UTC), filled up with the latest before them.
        let from = crate::events::recent_date(self.now());
        let upcoming = events.partition_point(|e| e.date.as_str() < from.as_str());
        let first = upcoming.min(events.len().saturating_sub(SNAPSHOT_EVENTS));
        let shown = &events[first..events.len().min(first + SNAPSHOT_EVENTS)];
        if shown.len() < events.len() {
            text.push_str(&format!(
                " {} in all; these {} are the next ones (and the latest before them); \
                 list_events with a `from` date lists others",
                events.len(),
                shown.len()
            ));
        }
        // Each record on its line: a title or venue with a line break in it (anyone with a
        // write can set one) must not write lines of its own into the context block.
        for e in shown {
            text.push_str(&format!(
                "\n- {} | {} | {} | {}",
                e.id,
                whole_line(&e.title),
                e.date,
                e.status
            ));
        }
        if let Some(a) = &active {
            text.push_str(&format!(
                "\nActive event: {} \"{}\" at {}, {}; {}; {} of {} places taken",
                a.id,
                whole_line(&a.title),
                whole_line(&a.venue),
                a.starts_at,
                a.status.as_str(),
                a.registered,
                a.capacity
            ));
        }
        Ok(Snapshot {
            events,
            active,
            text,
        })
    }

    /// The account (name, time zone) and [`Planner::snapshot`] for the context block.
    pub async fn user_context(
        &self,
        user: &UserId,
        conversation: &ConversationId,
    ) -> Result<UserContext, PlannerError> {
        let account = self.store.account(user).await?;
        let snapshot = self.snapshot(user, conversation).await?;
        Ok(UserContext {
            name: account
                .as_ref()
                .map(|a| a.display_name.clone())
                .filter(|n| !n.trim().is_empty()),
            time_zone: account.map(|a| a.time_zone),
            records: snapshot.text,
        })
    }
}
