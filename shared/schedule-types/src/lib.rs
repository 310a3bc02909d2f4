//! The plain data of an event's program (rooms, sessions, breaks, day bounds) and of a
//! timetable, shared by the scheduler (`schedule`) and its independent checker
//! (`schedule-check`). Serde types and a few lookups only: no constraint logic lives here, so the
//! two implementations that catch each other share nothing but the words.
//!
//! Times are whole minutes from the start of their day (midnight = 0); days are indexed from 0.
//! An interval `[start, end)` includes its start and excludes its end.

mod program;
mod timetable;

pub use program::{Break, Day, Program, Room, Session, Slot, Unavailable, Window};
pub use timetable::{Placed, PlacedBreak, Timetable};
