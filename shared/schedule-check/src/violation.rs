//! What the checker reports.

/// The hard constraint a violation breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Constraint {
    /// Each session placed exactly once, nothing placed that isn't in the program.
    EverySessionOnce,
    /// The room exists and seats the expected audience.
    RoomSeats,
    /// Inside the day's bounds and one of the room's open windows.
    RoomOpen,
    /// No two sessions in one room at once.
    RoomOnce,
    /// No person in two places at once, with the changeover between a speaker's sessions.
    PersonOnce,
    /// Not while a speaker is unavailable.
    SpeakerAvailable,
    /// Prerequisites end before their dependants start.
    Order,
    /// Each break placed once inside its span, and no session during a break.
    Breaks,
    /// Fixed times and rooms kept.
    Fixed,
}

/// One broken constraint and the sessions (or breaks) involved, by id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub constraint: Constraint,
    pub ids: Vec<String>,
    /// For the log: what is wrong, in ids and minutes.
    pub detail: String,
}

/// A timetable that must not be saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub violations: Vec<Violation>,
}

impl Rejection {
    /// What the user is told: calm, no internals.
    pub fn sentence(&self) -> &'static str {
        "The new timetable didn't pass its final check, so I haven't saved it and the current one \
         stays as it was. This is a fault on our side and it has been logged."
    }

    /// The constraints broken, each once, in a fixed order.
    pub fn constraints(&self) -> Vec<Constraint> {
        let mut c: Vec<Constraint> = self.violations.iter().map(|v| v.constraint).collect();
        c.sort_unstable();
        c.dedup();
        c
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "timetable rejected by the checker ({} violation(s))",
            self.violations.len()
        )?;
        for v in &self.violations {
            write!(
                f,
                "; {:?} [{}]: {}",
                v.constraint,
                v.ids.join(", "),
                v.detail
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejection {}
