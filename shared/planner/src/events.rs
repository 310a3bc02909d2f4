//! Event services: create, update, publish, cancel, list, focus, undo.

use crate::service::{Access, Caller, change, new_id};
use crate::{EVENT, Event, EventStatus, Planner, PlannerError};
use serde_json::Value;
use store::{
    Receipt, StoreError, UndoOutcome, UndoReceipt, UndoRequest, UndoScope, reverting_changes,
};

/// The most events one account may hold, whatever their status. Listing them (`list_events`,
/// the timetable page, every turn's context block, this check) reads them all, so without a
/// limit an MCP client or a manipulated model could create events at its request rate for as
/// long as it liked and make every later read cost more (2,000 events are about 600 KB, 150
/// strongly consistent read units on DynamoDB). Checked by reading the list before the write,
/// so requests racing at a limit can pass it by at most as many as run at once; every later
/// one is refused.
pub const MAX_EVENTS_PER_USER: usize = 2_000;

/// The most upcoming events (not cancelled, dated from yesterday on) one account may have: the
/// limit a person meets first, with a way out (cancel some, or wait for them to pass).
pub const MAX_UPCOMING_EVENTS: usize = 1_000;

/// The fields an update may change; `None` keeps the stored value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventChanges {
    pub title: Option<String>,
    pub starts_at: Option<String>,
    pub venue: Option<String>,
    pub capacity: Option<u32>,
}

/// What a new event needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub title: String,
    pub starts_at: String,
    pub venue: String,
    pub capacity: u32,
}

/// The years an event may start in: a date outside them is a typo or a model's invention (and
/// one in the far future would hold a place among the upcoming events for good).
const YEARS: std::ops::RangeInclusive<i16> = 2000..=2200;

/// `starts_at` is a date and time that exists (`YYYY-MM-DDTHH:MM`, the schema's shape: no
/// 13th month, no 25th hour), in [`YEARS`].
fn check_starts_at(starts_at: &str) -> Result<(), PlannerError> {
    let refused = || {
        PlannerError::Rule(format!(
            "starts_at {:?} is not a date and time that exists: write it as YYYY-MM-DDTHH:MM, in the years {} to {}.",
            starts_at.chars().take(40).collect::<String>(),
            YEARS.start(),
            YEARS.end()
        ))
    };
    let shaped = starts_at.len() == 16 && starts_at.as_bytes().get(10) == Some(&b'T');
    match starts_at.parse::<jiff::civil::DateTime>() {
        Ok(at) if shaped && YEARS.contains(&at.year()) => Ok(()),
        _ => Err(refused()),
    }
}

impl Planner {
    /// Create a draft event; it becomes the conversation's active event.
    pub async fn create_event(
        &self,
        caller: &Caller,
        new: NewEvent,
    ) -> Result<Event, PlannerError> {
        if new.title.trim().is_empty() {
            return Err(PlannerError::Rule("An event needs a title.".into()));
        }
        check_starts_at(&new.starts_at)?;
        let event = Event {
            id: new_id("ev"),
            title: new.title.trim().to_owned(),
            starts_at: new.starts_at,
            venue: new.venue,
            capacity: new.capacity,
            status: EventStatus::Draft,
            registered: 0,
        };
        // The focus first: a retry after a crash between the two would answer from the
        // effect's receipt without running this again, and the conversation would stay about
        // the previous event. A focus on an event that was never created (a crash, or a
        // refused write, in between) reads as no focus.
        self.check_may_write(caller).await?;
        self.check_room_for_an_event(caller, &event).await?;
        self.set_focus(caller, &event.id).await?;
        let c = change(EVENT, &event.id, &caller.user, None, Some(&event));
        self.write(Access::Owner(caller), vec![c], &event).await?;
        Ok(event)
    }

    pub async fn update_event(
        &self,
        caller: &Caller,
        event_id: &str,
        changes: EventChanges,
    ) -> Result<Event, PlannerError> {
        let (mut event, before) = self.owned::<Event>(&caller.user, EVENT, event_id).await?;
        if event.status == EventStatus::Cancelled {
            return Err(PlannerError::Rule(format!(
                "{} is cancelled; it cannot be changed.",
                event.title
            )));
        }
        // How it reads in a question before the change (a change that makes it read as
        // another event is refused below).
        let was = alike_key(&event);
        if let Some(title) = changes.title {
            if title.trim().is_empty() {
                return Err(PlannerError::Rule("An event needs a title.".into()));
            }
            event.title = title.trim().to_owned();
        }
        if let Some(capacity) = changes.capacity {
            if capacity < event.registered {
                return Err(PlannerError::Rule(format!(
                    "{} already has {} attendees; the capacity cannot go below that.",
                    event.title, event.registered
                )));
            }
            event.capacity = capacity;
        }
        if let Some(starts_at) = &changes.starts_at {
            check_starts_at(starts_at)?;
        }
        event.starts_at = changes.starts_at.unwrap_or(event.starts_at);
        event.venue = changes.venue.unwrap_or(event.venue);
        if alike_key(&event) != was {
            let events = sorted_events(self.store.records_of(&caller.user, EVENT).await?);
            like_another(&events, &event, Some(&event.id))?;
        }
        let c = change(EVENT, event_id, &caller.user, Some(before), Some(&event));
        self.write(Access::Owner(caller), vec![c], &event).await?;
        Ok(event)
    }

    pub async fn publish_event(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<Event, PlannerError> {
        self.set_status(caller, event_id, EventStatus::Published)
            .await
    }

    pub async fn cancel_event(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<Event, PlannerError> {
        self.set_status(caller, event_id, EventStatus::Cancelled)
            .await
    }

    async fn set_status(
        &self,
        caller: &Caller,
        event_id: &str,
        to: EventStatus,
    ) -> Result<Event, PlannerError> {
        let (mut event, before) = self.owned::<Event>(&caller.user, EVENT, event_id).await?;
        match (event.status, to) {
            (EventStatus::Cancelled, _) => {
                return Err(PlannerError::Rule(format!(
                    "{} is already cancelled.",
                    event.title
                )));
            }
            (EventStatus::Published, EventStatus::Published) => {
                return Err(PlannerError::Rule(format!(
                    "{} is already published.",
                    event.title
                )));
            }
            _ => {}
        }
        event.status = to;
        let c = change(EVENT, event_id, &caller.user, Some(before), Some(&event));
        self.write(Access::Owner(caller), vec![c], &event).await?;
        Ok(event)
    }

    /// The caller's events, soonest first.
    pub async fn list_events(&self, caller: &Caller) -> Result<Vec<Event>, PlannerError> {
        self.list_events_from(caller, None).await
    }

    /// The caller's events on or after the date `from` (`YYYY-MM-DD`; `None`: all), soonest
    /// first.
    pub async fn list_events_from(
        &self,
        caller: &Caller,
        from: Option<&str>,
    ) -> Result<Vec<Event>, PlannerError> {
        let mut events = sorted_events(self.store.records_of(&caller.user, EVENT).await?);
        if let Some(from) = from {
            events.retain(|e| e.starts_at.as_str() >= from);
        }
        Ok(events)
    }

    /// Make `event_id` the conversation's active event (only the caller's own).
    pub async fn focus_event(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<Event, PlannerError> {
        let (event, _) = self.owned::<Event>(&caller.user, EVENT, event_id).await?;
        self.set_focus(caller, &event.id).await?;
        Ok(event)
    }

    async fn set_focus(&self, caller: &Caller, event_id: &str) -> Result<(), PlannerError> {
        if let Some(conversation) = &caller.conversation {
            self.store.set_active(conversation, EVENT, event_id).await?;
        }
        Ok(())
    }

    /// Revert the caller's most recent action within `scope` (all its changes), strictly last
    /// in, first out. The undo is audited as the caller (agent, user, MCP) in the caller's
    /// conversation. Returns a sentence for the user.
    ///
    /// The assistant's `undo` passes [`UndoScope::Conversation`] (its own conversation); the
    /// web app may pass [`UndoScope::Anywhere`] when the user asks for it there.
    pub async fn undo(&self, caller: &Caller, scope: UndoScope) -> Result<String, PlannerError> {
        self.check_may_write(caller).await?;
        let here = matches!(scope, UndoScope::Conversation(_));
        let receipt = match &caller.call_key {
            // A model's call that found nothing to undo undoes nothing: an action that lands
            // after the read is nothing this call (or the gate before it) saw.
            Some(key) => match self.undo_receipt(caller, &scope, key, here).await? {
                Some(receipt) => Some(receipt),
                None => return Ok(undo_answer(&UndoOutcome::NothingToUndo, here)),
            },
            None => None,
        };
        let pinned = receipt.is_some();
        let undone = self
            .store
            .undo_last(&UndoRequest {
                user: caller.user.clone(),
                scope: scope.clone(),
                action_id: caller.action_id.clone(),
                actor: caller.actor,
                conversation: caller.conversation.clone(),
                at_ms: self.now(),
                receipt,
            })
            .await;
        match undone {
            // The stack moved between reading it and undoing (nothing was written). A racing
            // attempt of this same call that recorded its undo stands. Otherwise the action on
            // top is no longer the one this call (and the confirmation gate before it) read:
            // nothing is undone here, and undoing the one beneath unasked could revert a change
            // that needs a person's yes. The model may ask again; its new call is judged anew.
            Err(StoreError::Conflict { .. }) if pinned => {
                let key = caller.call_key.as_deref().unwrap_or_default();
                if self.store.receipt(key).await?.is_some() {
                    return Err(PlannerError::Store(StoreError::Conflict {
                        what: format!("the undo of call {key} is already recorded"),
                    }));
                }
                Err(PlannerError::Changed)
            }
            other => Ok(undo_answer(&other?, here)),
        }
    }

    /// For a model's call: the receipt of the undo about to be made, worded for the rows it
    /// will revert (`None` when there is nothing to undo: nothing will be written).
    async fn undo_receipt(
        &self,
        caller: &Caller,
        scope: &UndoScope,
        call_key: &str,
        here: bool,
    ) -> Result<Option<UndoReceipt>, PlannerError> {
        let rows = self.store.next_undo(&caller.user, scope).await?;
        Ok(receipt_for(&rows, call_key, here))
    }
}

/// The receipt of an undo that reverts exactly `rows` (the top of a stack as read), worded for
/// them; `None` when there are none (nothing to undo).
pub(crate) fn receipt_for(
    rows: &[store::AuditEntry],
    call_key: &str,
    here: bool,
) -> Option<UndoReceipt> {
    let action_id = rows.first()?.action_id.clone();
    let would = UndoOutcome::Undone {
        action_id,
        changes: reverting_changes(rows),
    };
    Some(UndoReceipt {
        rows: rows.iter().map(|r| r.seq).collect(),
        receipt: Receipt {
            call_key: call_key.to_owned(),
            output: Value::String(undo_answer(&would, here)),
        },
    })
}

/// The sentence an undo answers with.
pub(crate) fn undo_answer(outcome: &UndoOutcome, here: bool) -> String {
    match outcome {
        UndoOutcome::Undone { changes, .. } => {
            format!(
                "Undone: the last action ({} change(s)) was reverted.",
                changes.len()
            )
        }
        UndoOutcome::NothingToUndo if here => "There is nothing to undo in this \
            conversation. Changes made elsewhere are not undone from here."
            .into(),
        UndoOutcome::NothingToUndo => "There is nothing to undo.".into(),
        UndoOutcome::ChangedSince { kind, id, .. } => format!(
            "Cannot undo: {kind} {id} was changed since (for example by a registration), \
             so nothing was reverted."
        ),
    }
}

impl Planner {
    /// [`PlannerError::Rule`] when the caller's account has no room for another event
    /// ([`MAX_UPCOMING_EVENTS`], [`MAX_EVENTS_PER_USER`]).
    async fn check_room_for_an_event(
        &self,
        caller: &Caller,
        event: &Event,
    ) -> Result<(), PlannerError> {
        let events = sorted_events(self.store.records_of(&caller.user, EVENT).await?);
        if events.len() >= MAX_EVENTS_PER_USER {
            return Err(PlannerError::Rule(format!(
                "This account holds {} events, the most one account may hold \
                 ({MAX_EVENTS_PER_USER}, cancelled and past ones too). Nothing was created.",
                events.len()
            )));
        }
        let from = recent_date(self.now());
        let upcoming = events
            .iter()
            .filter(|e| e.status != EventStatus::Cancelled && e.starts_at.as_str() >= from.as_str())
            .count();
        if upcoming >= MAX_UPCOMING_EVENTS {
            return Err(PlannerError::Rule(format!(
                "This account has {upcoming} upcoming events that are not cancelled, the most \
                 one account may have ({MAX_UPCOMING_EVENTS}). Nothing was created: cancel \
                 some first, or create it once some have passed."
            )));
        }
        like_another(&events, event, None)?;
        Ok(())
    }
}

/// Refused when another of `events` (not `except`, not cancelled) reads as `event` does in a
/// question: the same title (in any case, spacing or invisible characters), date and venue. A
/// copy of an event (a model's "test copy", published like the real one) would make a
/// cancellation's or a withdrawal's question read the same for either, and a yes meant for the
/// copy could cancel the real one. Events of one title on other dates (a weekly training) are
/// told apart by their date, and stay allowed.
pub(crate) fn like_another(
    events: &[Event],
    event: &Event,
    except: Option<&str>,
) -> Result<(), PlannerError> {
    let wanted = alike_key(event);
    match events.iter().find(|e| {
        Some(e.id.as_str()) != except
            && e.status != EventStatus::Cancelled
            && alike_key(e) == wanted
    }) {
        None => Ok(()),
        Some(other) => Err(PlannerError::Rule(format!(
            "There is an event called {} at {} on {} already ({}); give this one a title, a \
             date or a venue of its own, so the two cannot be mistaken for each other.",
            other.title,
            other.venue,
            other.starts_at,
            other.status.as_str()
        ))),
    }
}

/// An event as a question names it (its title and venue as [`crate::one_line`] shows them,
/// its date), in lower case: two with one key read alike.
fn alike_key(event: &Event) -> (String, String, String) {
    (
        shown_key(&event.title),
        event.starts_at.clone(),
        shown_key(&event.venue),
    )
}

/// `text` as a question shows it ([`crate::one_line`]: cut, quotation marks made single,
/// invisible formatting dropped), also without the marks that change nothing a person sees
/// (variation selectors, the combining grapheme joiner, Hangul fillers, Mongolian variation
/// selectors), in lower case, then as its confusables skeleton (Unicode TR 39, which also
/// normalizes): a Cyrillic "О" reads as a Latin "O", so "Spring Оpen" is "Spring Open".
pub(crate) fn shown_key(text: &str) -> String {
    let seen: String = text
        .chars()
        .filter(|c| {
            !matches!(c,
                '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' | '\u{34f}'
                | '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' | '\u{180b}'..='\u{180d}')
        })
        .collect();
    let lower = crate::one_line(&seen).to_lowercase();
    unicode_security::confusable_detection::skeleton(&lower).collect()
}

/// Yesterday's date in UTC, `YYYY-MM-DD`, at `now_ms`: an event dated from it on has not
/// passed in any time zone (events carry their owner's local date).
pub(crate) fn recent_date(now_ms: i64) -> String {
    let now = jiff::Timestamp::from_millisecond(now_ms).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let yesterday = now
        .checked_sub(jiff::SignedDuration::from_hours(24))
        .unwrap_or(now);
    yesterday.strftime("%Y-%m-%d").to_string()
}

/// The events among `records` (a record that is not one is left out), by start and id.
pub(crate) fn sorted_events(records: Vec<store::Record>) -> Vec<Event> {
    let mut events: Vec<Event> = records
        .into_iter()
        .filter_map(|r| serde_json::from_value(r.value).ok())
        .collect();
    events.sort_by(|a, b| (&a.starts_at, &a.id).cmp(&(&b.starts_at, &b.id)));
    events
}

#[cfg(test)]
mod starts_at_tests {
    use super::check_starts_at;

    #[test]
    fn only_dates_that_exist_in_the_years_events_take_place_are_taken() {
        for ok in [
            "2025-04-12T10:00",
            "2026-12-31T23:59",
            "2000-01-01T00:00",
            "2028-02-29T09:30",
        ] {
            assert!(check_starts_at(ok).is_ok(), "{ok}");
        }
        for bad in [
            "2025-13-45T99:99",
            "2025-02-30T10:00",
            "2027-02-29T10:00",
            "2025-04-12T24:00",
            "0001-01-01T00:00",
            "9999-12-31T23:59",
            "2025-04-12T10:00:00",
            "2025-04-12 10:00",
            "",
        ] {
            let err = check_starts_at(bad).unwrap_err().to_string();
            assert!(err.contains("YYYY-MM-DDTHH:MM"), "{bad}: {err}");
        }
    }
}
