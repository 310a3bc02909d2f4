//! The independent checker: given a program and a finished timetable, it sweeps the timetable
//! once per hard constraint and lists every violation. It shares only the plain data types
//! (`schedule-types`) with the scheduler and must never depend on the `schedule` crate: two
//! implementations written differently catch each other's bugs.
//!
//! Where the scheduler reasons about intervals, this crate marks minutes: a room's open
//! minutes, a day's break minutes and a speaker's away minutes are bitmaps, and overlaps are
//! found by sorting and sweeping. A timetable it rejects must not be saved: log
//! [`Rejection`]'s `Display` (ids and constraints, no personal data beyond ids) as a bug and
//! show the user [`Rejection::sentence`].

mod minutes;
mod sweeps;
mod violation;

pub use violation::{Constraint, Rejection, Violation};

use schedule_types::{Program, Timetable};

/// Every hard constraint, checked on the finished timetable; `Err` lists each violation.
pub fn verify(program: &Program, timetable: &Timetable) -> Result<(), Rejection> {
    let violations = sweeps::all(program, timetable);
    if violations.is_empty() {
        Ok(())
    } else {
        Err(Rejection { violations })
    }
}
