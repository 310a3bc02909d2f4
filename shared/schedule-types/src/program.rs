//! What a planner gathers from its records: the program to schedule.

use serde::{Deserialize, Serialize};

/// An event's program: everything the scheduler needs, nothing it must look up elsewhere.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// The event's days, by index: day `i` is `days[i]`.
    pub days: Vec<Day>,
    pub rooms: Vec<Room>,
    pub sessions: Vec<Session>,
    /// Breaks and lunch: nobody is in a session while one runs.
    #[serde(default)]
    pub breaks: Vec<Break>,
    /// Times a speaker cannot be scheduled (travel, another commitment).
    #[serde(default)]
    pub unavailable: Vec<Unavailable>,
    /// Minimum minutes between the end of a speaker's session and the start of their next one
    /// on the same day.
    #[serde(default)]
    pub changeover_minutes: u32,
}

/// A day's bounds: sessions and breaks stay inside `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Day {
    pub start: u32,
    pub end: u32,
}

/// A room and when it can be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Room {
    pub id: String,
    pub name: String,
    /// Seats.
    pub capacity: u32,
    /// When the room is open; a session lies wholly inside one window.
    pub windows: Vec<Window>,
}

/// A span of one day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub day: u32,
    pub start: u32,
    pub end: u32,
}

/// A session to place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub id: String,
    pub title: String,
    /// Minutes.
    pub duration: u32,
    #[serde(default)]
    pub track: Option<String>,
    /// Everyone who must be there: a person is in one place at a time.
    #[serde(default)]
    pub speakers: Vec<String>,
    /// Expected audience: the room must seat at least this many.
    #[serde(default)]
    pub audience: u32,
    /// A time the session must start at.
    #[serde(default)]
    pub fixed_start: Option<Slot>,
    /// The room (id) the session must be in.
    #[serde(default)]
    pub fixed_room: Option<String>,
    /// Sessions (ids) that must finish before this one starts.
    #[serde(default)]
    pub after: Vec<String>,
}

/// A moment: a day and a minute of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Slot {
    pub day: u32,
    pub start: u32,
}

/// A break or lunch: `duration` minutes placed inside `[earliest, latest_end)` of its day. A
/// fixed break has `latest_end - earliest == duration`; "around noon, 45 min" is a wider span.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Break {
    pub id: String,
    pub name: String,
    pub day: u32,
    pub earliest: u32,
    pub latest_end: u32,
    pub duration: u32,
}

/// A speaker cannot be scheduled in `[start, end)` of `day`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unavailable {
    pub speaker: String,
    pub day: u32,
    pub start: u32,
    pub end: u32,
}

impl Program {
    pub fn session(&self, id: &str) -> Option<&Session> {
        self.sessions.iter().find(|s| s.id == id)
    }

    pub fn room(&self, id: &str) -> Option<&Room> {
        self.rooms.iter().find(|r| r.id == id)
    }
}
