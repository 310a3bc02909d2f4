//! The scheduler: a pure function from an event's program (and, when re-planning, the previous
//! timetable) to a timetable, or to reasons in numbers why none exists. No I/O, no async, no
//! clock; its only randomness is a small generator seeded from the input, so the same input
//! gives the same output, byte for byte. It must not depend on the checker (`schedule-check`),
//! which re-verifies every timetable it returns with code written apart from this one.
//!
//! Hard constraints: a person is in one place at a time, with `changeover_minutes` between a
//! speaker's sessions on a day; rooms seat the audience; sessions lie inside a room window and
//! the day's bounds; prerequisites finish before their dependants start; nothing runs during a
//! break; fixed times and rooms are kept; speakers' unavailable times are respected.
//!
//! Objective, in order: feasible; fewest moved sessions against the previous timetable; earliest
//! finish (in event minutes, see [`event_minute`]); fewest idle minutes between a track's
//! sessions on a day.
//!
//! How: a serial schedule-generation pass places sessions one at a time, in priority order
//! (longest chain of dependants first, then the scarcest rooms, then the longest), each at its
//! earliest feasible start in the smallest room that seats it. Then a fixed budget of further
//! passes with seeded perturbations of the priorities and of flexible breaks, and with big
//! rooms increasingly kept for big audiences, each followed by left-justification
//! (every session lifted and put back at its earliest slot), keeps the best. Last, a fresh
//! plan's flexible breaks are tried at each quarter hour of their span, one at a time, and a
//! local search changes the best pass's order a little at a time (mostly the sessions around
//! those that end last), keeping each change that scores no worse. If the makespan is still
//! above its bound, packing follows: each of the busiest people's sessions go first in the
//! order, longest first, so they fill the stretches between fixed breaks (90 minutes, then 60,
//! then 45 + 45 + 45) rather than leaving a short talk alone in a long stretch, and a second
//! local search also counts the sessions that end last as progress.
//!
//! Bounded: slots probed, busy times merged and places checked count as work, and past
//! [`WORK_LIMIT`] the search stops with the best timetable found so far, or with none, a
//! [`ReasonKind::TooLarge`] reason in numbers. Counted rather than timed, so the same input
//! still gives the same output. A session's people (their sessions, unavailable times and the
//! breaks) are merged once per day and shared by every room it could use.

mod bounds;
mod build;
mod explain;
mod explain_fixed;
pub mod generate;
mod improve;
mod index;
mod local;
mod repack;
mod rng;
mod search;
mod state;

pub use bounds::{event_minute, lower_bound};
pub use explain::{Infeasible, Reason, ReasonKind};
pub use search::{Move, Plan, Stats, WORK_LIMIT, plan, plan_within};
