//! The records of the domain, as stored (JSON values in `store::Records`).

use serde::{Deserialize, Serialize};

/// Record kind of events.
pub const EVENT: &str = "event";
/// Record kind of attendees.
pub const ATTENDEE: &str = "attendee";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventStatus {
    Draft,
    Published,
    Cancelled,
}

impl EventStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            EventStatus::Draft => "draft",
            EventStatus::Published => "published",
            EventStatus::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub id: String,
    pub title: String,
    /// Local date and time, `YYYY-MM-DDTHH:MM`, in the owner's time zone.
    pub starts_at: String,
    pub venue: String,
    pub capacity: u32,
    pub status: EventStatus,
    /// How many attendees are registered; kept with every registration and withdrawal, so the
    /// capacity holds under concurrent registrations (the event's own `before` guards it).
    pub registered: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attendee {
    pub id: String,
    pub event_id: String,
    pub name: String,
    pub email: String,
}
