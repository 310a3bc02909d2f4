//! What the scheduler returns and the checker inspects.

use serde::{Deserialize, Serialize};

/// Where and when every session and break goes. Session rows follow the program's session
/// order; break rows follow the program's break order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timetable {
    pub sessions: Vec<Placed>,
    pub breaks: Vec<PlacedBreak>,
}

/// One session's place: it runs in `room` on `day` from `start` for its duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    pub session: String,
    pub room: String,
    pub day: u32,
    pub start: u32,
}

/// One break's place: it runs on `day` from `start` for its duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacedBreak {
    pub id: String,
    pub day: u32,
    pub start: u32,
}

impl Timetable {
    pub fn placed(&self, session: &str) -> Option<&Placed> {
        self.sessions.iter().find(|p| p.session == session)
    }
}
