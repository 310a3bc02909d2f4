//! An example product domain — events and the people attending them — showing how a product
//! plugs into Bridle safely.
//!
//! - **One service layer** ([`Planner`]) owns all business rules and permissions. Tools are
//!   thin adapters over it ([`register`]), registered at start-up; their schemas never name a
//!   user: who acts comes from [`tools::Ctx`], built from authentication.
//! - **One gate** ([`Planner::owned`]): a record is loaded only if the caller owns it; another
//!   user's id reads exactly like an id that does not exist.
//! - **One transaction helper** (`Planner::write`): every mutation checks the account is
//!   active and the caller owns every record touched, then writes the changes and the audit
//!   row in one atomic [`store::Records::commit`]. That audit row is what `undo` reverts.
//! - A **public entry point** ([`Planner::register_public`]) for a registration form: audited
//!   under the event's owner as actor `public`, not on the owner's undo stack.
//! - **Risk** ([`Planner::assess_risk`]): which calls need the user's confirmation, described
//!   from stored state; the engine's confirmation gate asks it.
//! - The **program** of an event (days, rooms, breaks, sessions) and its saved timetable:
//!   records like the others; the scheduler builds, the independent checker re-checks before
//!   every save, undo restores the previous timetable. [`Planner::timetables`] is the
//!   read a page draws its grid from; every changing tool's output carries `_effects` with
//!   [`REFRESH`], so the page re-reads it.
//! - The **active event** of a conversation and a compact [`snapshot`](Planner::snapshot) for
//!   the per-turn context block.
//!
//! Depends on the store ports, `tools` and `transcript`. Never on the engine, AWS or Lambda.

mod direction;
mod error;
mod events;
mod grid;
mod model;
mod people;
pub mod plan_threads;
mod program;
mod program_tools;
mod risk;
mod service;
mod snapshot;
mod timetable;
mod tools_def;
mod undo_preview;

pub use error::PlannerError;
pub use events::{EventChanges, MAX_EVENTS_PER_USER, MAX_UPCOMING_EVENTS, NewEvent};
pub use grid::{DayGrid, EventGrid, GridBreak, GridSession, REFRESH};
pub use model::{ATTENDEE, Attendee, EVENT, Event, EventStatus};
pub use program::{
    MAX_SESSIONS, NewSession, PROGRAM, ProgramRecord, ProgramSummary, SCHEDULE, ScheduleRecord,
    SessionChanges,
};
pub use risk::one_line;
pub use service::{Caller, Clock, Planner};
pub use snapshot::{EventLine, Snapshot, UserContext};
pub use timetable::{BuildSummary, Line};
pub use tools_def::{PURPOSE, register};
pub use undo_preview::UndoPreview;

/// The tools some of whose calls [`Planner::assess_risk`] may hold for a person's yes (the rest
/// never are): what an MCP client is told is destructive.
pub const MAY_NEED_CONFIRMATION: &[&str] = &[
    "cancel_event",
    "update_event",
    "withdraw_attendee",
    "register_attendee",
    "publish_event",
    "undo",
    "build_schedule",
    "move_session",
    "set_rooms",
    "edit_session",
];
