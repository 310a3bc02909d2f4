//! The program of an event, as planner records: one `program` record per event (its days,
//! rooms, breaks and sessions) and one `schedule` record (the last saved timetable). Both are
//! keyed by the event's id and owned by the event's owner, so the ownership gate, the audited
//! commit and undo work on them as on events.

use crate::service::{Access, Caller, change, new_id};
use crate::{EVENT, Event, EventStatus, Planner, PlannerError};
use schedule_types::{Break, Day, Program, Room, Session, Slot, Timetable};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Record kind of an event's program (id: the event's id).
pub const PROGRAM: &str = "program";
/// Record kind of an event's saved timetable (id: the event's id).
pub const SCHEDULE: &str = "schedule";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramRecord {
    pub event_id: String,
    pub program: Program,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRecord {
    pub event_id: String,
    pub timetable: Timetable,
}

/// A new session; ids in `after` name other sessions of the same program.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewSession {
    pub title: String,
    pub duration: u32,
    pub track: Option<String>,
    pub speakers: Vec<String>,
    pub audience: u32,
    pub fixed_start: Option<Slot>,
    pub fixed_room: Option<String>,
    pub after: Vec<String>,
}

/// What an edit may change; `None` keeps the stored value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionChanges {
    pub title: Option<String>,
    pub duration: Option<u32>,
    pub track: Option<String>,
    pub speakers: Option<Vec<String>>,
    pub audience: Option<u32>,
    pub fixed_start: Option<Slot>,
    pub fixed_room: Option<String>,
    pub after: Option<Vec<String>>,
}

/// A short answer about a program: what it holds now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProgramSummary {
    pub event_id: String,
    pub days: usize,
    pub rooms: Vec<String>,
    pub sessions: usize,
    pub breaks: usize,
    /// The session just added or edited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The stored program of an event (and its stored value), if any.
pub(crate) type Stored<T> = Option<(T, Value)>;

impl Planner {
    /// The caller's event, refused if cancelled.
    pub(crate) async fn open_event(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<Event, PlannerError> {
        let (event, _) = self.owned::<Event>(&caller.user, EVENT, event_id).await?;
        if event.status == EventStatus::Cancelled {
            return Err(PlannerError::Rule(format!(
                "{} is cancelled; its program cannot be changed.",
                event.title
            )));
        }
        Ok(event)
    }

    /// A record of the caller's that may be absent: absent (or another's) is `None`.
    pub(crate) async fn maybe<T: serde::de::DeserializeOwned>(
        &self,
        caller: &Caller,
        kind: &'static str,
        id: &str,
    ) -> Result<Stored<T>, PlannerError> {
        match self.owned::<T>(&caller.user, kind, id).await {
            Ok(found) => Ok(Some(found)),
            Err(PlannerError::NotFound { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// Set an event's days, rooms and breaks (its sessions stay).
    pub async fn set_rooms(
        &self,
        caller: &Caller,
        event_id: &str,
        days: Vec<Day>,
        rooms: Vec<Room>,
        breaks: Vec<Break>,
    ) -> Result<ProgramSummary, PlannerError> {
        self.open_event(caller, event_id).await?;
        check_layout(&days, &rooms, &breaks)?;
        let stored = self
            .maybe::<ProgramRecord>(caller, PROGRAM, event_id)
            .await?;
        let (mut record, before) = split(stored, event_id);
        record.program.days = days;
        record.program.rooms = rooms;
        record.program.breaks = breaks;
        self.save_program(caller, record, before, None).await
    }

    /// Add a session to an event's program.
    pub async fn add_session(
        &self,
        caller: &Caller,
        event_id: &str,
        new: NewSession,
    ) -> Result<ProgramSummary, PlannerError> {
        self.open_event(caller, event_id).await?;
        let stored = self
            .maybe::<ProgramRecord>(caller, PROGRAM, event_id)
            .await?;
        let (mut record, before) = split(stored, event_id);
        let session = Session {
            id: new_id("ss"),
            title: new.title.trim().to_owned(),
            duration: new.duration,
            track: new.track.map(|t| one_name(&t)),
            speakers: new.speakers.iter().map(|s| one_name(s)).collect(),
            audience: new.audience,
            fixed_start: new.fixed_start,
            fixed_room: new.fixed_room,
            after: new.after,
        };
        check_session(&record.program, &session)?;
        if record.program.sessions.len() >= MAX_SESSIONS {
            return Err(rule(format!(
                "An event's program holds at most {MAX_SESSIONS} sessions; this one is full."
            )));
        }
        let id = session.id.clone();
        record.program.sessions.push(session);
        self.save_program(caller, record, before, Some(id)).await
    }

    /// Change a session of an event's program.
    pub async fn edit_session(
        &self,
        caller: &Caller,
        event_id: &str,
        session_id: &str,
        changes: SessionChanges,
    ) -> Result<ProgramSummary, PlannerError> {
        self.open_event(caller, event_id).await?;
        let (mut record, before) = self.program_of(caller, event_id).await?;
        let Some(session) = record
            .program
            .sessions
            .iter_mut()
            .find(|s| s.id == session_id)
        else {
            return Err(PlannerError::Rule(format!(
                "This program has no session with id {session_id}."
            )));
        };
        apply(session, changes);
        let edited = session.clone();
        check_session(&record.program, &edited)?;
        self.save_program(caller, record, Some(before), Some(edited.id))
            .await
    }

    /// The program of an event, or a rule saying there is none yet.
    pub(crate) async fn program_of(
        &self,
        caller: &Caller,
        event_id: &str,
    ) -> Result<(ProgramRecord, Value), PlannerError> {
        self.maybe::<ProgramRecord>(caller, PROGRAM, event_id)
            .await?
            .ok_or_else(|| {
                PlannerError::Rule(
                    "This event has no program yet: set its rooms and add sessions first.".into(),
                )
            })
    }

    async fn save_program(
        &self,
        caller: &Caller,
        record: ProgramRecord,
        before: Option<Value>,
        session_id: Option<String>,
    ) -> Result<ProgramSummary, PlannerError> {
        let summary = ProgramSummary {
            event_id: record.event_id.clone(),
            days: record.program.days.len(),
            rooms: record
                .program
                .rooms
                .iter()
                .map(|r| r.name.clone())
                .collect(),
            sessions: record.program.sessions.len(),
            breaks: record.program.breaks.len(),
            session_id,
        };
        let c = change(
            PROGRAM,
            &record.event_id,
            &caller.user,
            before,
            Some(&record),
        );
        self.write(Access::Owner(caller), vec![c], &summary).await?;
        Ok(summary)
    }
}

fn split(stored: Stored<ProgramRecord>, event_id: &str) -> (ProgramRecord, Option<Value>) {
    match stored {
        Some((record, value)) => (record, Some(value)),
        None => (
            ProgramRecord {
                event_id: event_id.to_owned(),
                program: Program {
                    days: Vec::new(),
                    rooms: Vec::new(),
                    sessions: Vec::new(),
                    breaks: Vec::new(),
                    unavailable: Vec::new(),
                    changeover_minutes: 0,
                },
            },
            None,
        ),
    }
}

/// A speaker's or a track's name as it is kept: its words with one space between them. The
/// scheduler and its checker tell speakers apart by name, so "Ada Lovelace " and "Ada  Lovelace"
/// are one person, who must not be put in two rooms at once.
pub(crate) fn one_name(name: &str) -> String {
    name.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `program` as the scheduler and its checker read it: every speaker's name as [`one_name`]
/// keeps it (a program saved before names were kept so, or an import, may hold "Ada Lovelace "
/// beside "Ada Lovelace"), blank names left out.
pub(crate) fn as_planned(program: &Program) -> Program {
    let mut program = program.clone();
    for session in &mut program.sessions {
        session.speakers = session
            .speakers
            .iter()
            .map(|s| one_name(s))
            .filter(|s| !s.is_empty())
            .collect();
    }
    for away in &mut program.unavailable {
        away.speaker = one_name(&away.speaker);
    }
    program
}

fn apply(session: &mut Session, c: SessionChanges) {
    if let Some(title) = c.title {
        session.title = title.trim().to_owned();
    }
    session.duration = c.duration.unwrap_or(session.duration);
    if c.track.is_some() {
        session.track = c.track.map(|t| one_name(&t));
    }
    session.speakers = c
        .speakers
        .map_or(std::mem::take(&mut session.speakers), |names| {
            names.iter().map(|s| one_name(s)).collect()
        });
    session.audience = c.audience.unwrap_or(session.audience);
    if c.fixed_start.is_some() {
        session.fixed_start = c.fixed_start;
    }
    if c.fixed_room.is_some() {
        session.fixed_room = c.fixed_room;
    }
    session.after = c.after.unwrap_or(std::mem::take(&mut session.after));
}

fn rule(sentence: String) -> PlannerError {
    PlannerError::Rule(sentence)
}

fn check_layout(days: &[Day], rooms: &[Room], breaks: &[Break]) -> Result<(), PlannerError> {
    if days.is_empty() {
        return Err(rule("An event's program needs at least one day.".into()));
    }
    if let Some(i) = days
        .iter()
        .position(|d| d.start >= d.end || d.end > 24 * 60)
    {
        return Err(rule(format!(
            "Day {} ends before it starts; give its start and end as HH:MM.",
            i + 1
        )));
    }
    for (i, room) in rooms.iter().enumerate() {
        if room.name.trim().is_empty() || room.capacity == 0 {
            return Err(rule("Each room needs a name and at least one seat.".into()));
        }
        if rooms[..i].iter().any(|r| r.id == room.id) {
            return Err(rule(format!("There are two rooms named {}.", room.name)));
        }
    }
    if let Some(b) = breaks
        .iter()
        .find(|b| b.day as usize >= days.len() || b.earliest + b.duration > b.latest_end)
    {
        return Err(rule(format!(
            "The break {} does not fit its span (or its day is not one of the event's days).",
            b.name
        )));
    }
    Ok(())
}

/// The most sessions one event's program holds. The program is one record, rewritten (and
/// kept before and after for undo) by every edit and read whole by every plan, so its size is
/// what every later call pays for; a conference's program fits many times over.
pub const MAX_SESSIONS: usize = 300;

fn check_session(program: &Program, s: &Session) -> Result<(), PlannerError> {
    if s.title.is_empty() || s.duration == 0 {
        return Err(rule("A session needs a title and a duration.".into()));
    }
    if let Some(room) = s
        .fixed_room
        .as_deref()
        .filter(|r| program.room(r).is_none())
    {
        return Err(rule(format!("There is no room named {room}.")));
    }
    if let Some(missing) = s.after.iter().find(|a| program.session(a).is_none()) {
        return Err(rule(format!(
            "There is no session with id {missing} to come after."
        )));
    }
    Ok(())
}

#[cfg(test)]
mod name_tests {
    use super::one_name;

    /// A program saved before names were kept so is planned and checked as if they were: one
    /// speaker is one person, and a blank name is no one.
    #[test]
    fn a_program_is_planned_with_its_names_as_they_are_kept() {
        use schedule_types::{Program, Session};
        let session = |id: &str, speakers: &[&str]| Session {
            id: id.into(),
            title: id.into(),
            duration: 30,
            track: None,
            speakers: speakers.iter().map(|s| (*s).to_owned()).collect(),
            audience: 10,
            fixed_start: None,
            fixed_room: None,
            after: Vec::new(),
        };
        let mut program: Program = serde_json::from_value(serde_json::json!({
            "days": [], "rooms": [], "sessions": [], "breaks": []
        }))
        .unwrap();
        program.sessions = vec![
            session("a", &["Ada Lovelace ", " "]),
            session("b", &["Ada  Lovelace"]),
        ];
        let planned = super::as_planned(&program);
        assert_eq!(planned.sessions[0].speakers, ["Ada Lovelace"]);
        assert_eq!(planned.sessions[1].speakers, ["Ada Lovelace"]);
    }

    #[test]
    fn a_name_is_its_words_with_one_space_between() {
        assert_eq!(one_name(" Ada  Lovelace\t"), "Ada Lovelace");
        assert_eq!(one_name("Ada Lovelace"), "Ada Lovelace");
    }
}
