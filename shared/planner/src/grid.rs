//! The timetables of a person's events as a page draws them: per event and day, the rooms as
//! columns, each placed session with its start, end, track and speakers, and the breaks that
//! run across every room. Read only, from the person's own records (`Records::records_of`
//! with the owner), so another user's events never appear — on either store.

use crate::program::{PROGRAM, ProgramRecord, SCHEDULE, ScheduleRecord};
use crate::timetable::clock;
use crate::{EVENT, Event, EventStatus, Planner, PlannerError};
use schedule_types::{Program, Timetable};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use transcript::UserId;

/// The `_effects` refresh name of a planner change (a web page re-reads its timetables).
pub const REFRESH: &str = "planner";

/// One event's timetable, day by day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventGrid {
    pub event_id: String,
    pub title: String,
    pub starts_at: String,
    pub status: EventStatus,
    /// A timetable has been built and saved.
    pub built: bool,
    /// Sessions of the program the saved timetable does not place (added since the build).
    pub unplaced: usize,
    pub days: Vec<DayGrid>,
}

/// One day: its bounds (stretched to what is placed on it), its rooms in the program's order,
/// the sessions in them and the breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DayGrid {
    /// 1 for the first day, as people count.
    pub day: u32,
    pub start: String,
    pub end: String,
    pub start_minute: u32,
    pub end_minute: u32,
    pub rooms: Vec<String>,
    pub sessions: Vec<GridSession>,
    pub breaks: Vec<GridBreak>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GridSession {
    pub session_id: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub track: Option<String>,
    pub speakers: Vec<String>,
    /// The room's name (one of the day's `rooms`).
    pub room: String,
    pub start: String,
    pub end: String,
    pub start_minute: u32,
    pub end_minute: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GridBreak {
    pub name: String,
    pub start: String,
    pub end: String,
    pub start_minute: u32,
    pub end_minute: u32,
}

impl Planner {
    /// The timetables of `user`'s events, soonest first; an event without a program has no
    /// days. Only `user`'s own records are read.
    pub async fn timetables(&self, user: &UserId) -> Result<Vec<EventGrid>, PlannerError> {
        let programs: HashMap<String, ProgramRecord> = self
            .all_of::<ProgramRecord>(user, PROGRAM)
            .await?
            .into_iter()
            .map(|p| (p.event_id.clone(), p))
            .collect();
        let schedules: HashMap<String, ScheduleRecord> = self
            .all_of::<ScheduleRecord>(user, SCHEDULE)
            .await?
            .into_iter()
            .map(|s| (s.event_id.clone(), s))
            .collect();
        let mut events = self.all_of::<Event>(user, EVENT).await?;
        events.sort_by(|a, b| (&a.starts_at, &a.id).cmp(&(&b.starts_at, &b.id)));
        Ok(events
            .into_iter()
            .map(|event| {
                let program = programs.get(&event.id).map(|p| &p.program);
                let timetable = schedules.get(&event.id).map(|s| &s.timetable);
                grid(event, program, timetable)
            })
            .collect())
    }

    /// Every readable record of `kind` owned by `user` (an unreadable one is skipped, as
    /// `list_events` does).
    async fn all_of<T: DeserializeOwned>(
        &self,
        user: &UserId,
        kind: &str,
    ) -> Result<Vec<T>, PlannerError> {
        Ok(self
            .store
            .records_of(user, kind)
            .await?
            .into_iter()
            .filter(|r| &r.owner == user)
            .filter_map(|r| serde_json::from_value(r.value).ok())
            .collect())
    }
}

fn grid(event: Event, program: Option<&Program>, timetable: Option<&Timetable>) -> EventGrid {
    let empty = Timetable {
        sessions: Vec::new(),
        breaks: Vec::new(),
    };
    let days = program.map_or_else(Vec::new, |p| day_grids(p, timetable.unwrap_or(&empty)));
    let placed = |id: &str| timetable.is_some_and(|t| t.sessions.iter().any(|s| s.session == id));
    EventGrid {
        event_id: event.id,
        title: event.title,
        starts_at: event.starts_at,
        status: event.status,
        built: timetable.is_some(),
        unplaced: program.map_or(0, |p| p.sessions.iter().filter(|s| !placed(&s.id)).count()),
        days,
    }
}

fn day_grids(program: &Program, timetable: &Timetable) -> Vec<DayGrid> {
    let room_name = |id: &str| {
        program
            .room(id)
            .map_or_else(|| id.to_owned(), |r| r.name.clone())
    };
    (0u32..)
        .zip(&program.days)
        .map(|(day, bounds)| {
            let mut sessions: Vec<GridSession> = timetable
                .sessions
                .iter()
                .filter(|p| p.day == day)
                .filter_map(|p| {
                    let s = program.session(&p.session)?;
                    let end = p.start + s.duration;
                    Some(GridSession {
                        session_id: s.id.clone(),
                        title: s.title.clone(),
                        track: s.track.clone(),
                        speakers: s.speakers.clone(),
                        room: room_name(&p.room),
                        start: clock(p.start),
                        end: clock(end),
                        start_minute: p.start,
                        end_minute: end,
                    })
                })
                .collect();
            sessions.sort_by(|a, b| (a.start_minute, &a.room).cmp(&(b.start_minute, &b.room)));
            let mut breaks: Vec<GridBreak> = timetable
                .breaks
                .iter()
                .filter(|b| b.day == day)
                .filter_map(|b| {
                    let def = program.breaks.iter().find(|d| d.id == b.id)?;
                    let end = b.start + def.duration;
                    Some(GridBreak {
                        name: def.name.clone(),
                        start: clock(b.start),
                        end: clock(end),
                        start_minute: b.start,
                        end_minute: end,
                    })
                })
                .collect();
            breaks.sort_by_key(|b| b.start_minute);
            let starts = sessions.iter().map(|s| s.start_minute);
            let ends = sessions.iter().map(|s| s.end_minute);
            let start = starts
                .chain(breaks.iter().map(|b| b.start_minute))
                .fold(bounds.start, u32::min);
            let end = ends
                .chain(breaks.iter().map(|b| b.end_minute))
                .fold(bounds.end, u32::max);
            DayGrid {
                day: day + 1,
                start: clock(start),
                end: clock(end),
                start_minute: start,
                end_minute: end,
                rooms: program.rooms.iter().map(|r| r.name.clone()).collect(),
                sessions,
                breaks,
            }
        })
        .collect()
}

/// A planner tool's output with the `_effects` that make a page re-read its timetables and
/// show `event_id`, the event the call changed, if known (the tool runner strips them before
/// the model sees the output, so the model's bytes are those of the bare output, as a receipt
/// answers them).
pub(crate) fn with_refresh(output: serde_json::Value, event_id: Option<&str>) -> serde_json::Value {
    use serde_json::{Value, json};
    let mut object = match output {
        Value::Object(map) => map,
        Value::Array(items) => json!({ "items": items })
            .as_object()
            .cloned()
            .unwrap_or_default(),
        other => json!({ "result": other })
            .as_object()
            .cloned()
            .unwrap_or_default(),
    };
    let mut effects = json!({ "refresh": [REFRESH] });
    if let Some(id) = event_id {
        effects["event_id"] = json!(id);
    }
    object.insert("_effects".into(), effects);
    Value::Object(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The model sees the same bytes with or without the refresh: the runner strips it and
    /// wraps a list or a scalar as it always does.
    #[test]
    fn the_refresh_leaves_what_the_model_sees_unchanged() {
        for output in [json!({"a": 1}), json!([1, 2]), json!("Undid it.")] {
            let with = with_refresh(output.clone(), Some("ev-1"));
            assert_eq!(
                with["_effects"],
                json!({"refresh": ["planner"], "event_id": "ev-1"})
            );
            let mut stripped = with.clone();
            stripped.as_object_mut().unwrap().remove("_effects");
            let wrapped = match output {
                serde_json::Value::Object(_) => output,
                serde_json::Value::Array(items) => json!({ "items": items }),
                other => json!({ "result": other }),
            };
            assert_eq!(stripped, wrapped);
        }
    }
}
