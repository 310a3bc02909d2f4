//! Why no timetable exists, in numbers a person can act on. Each check here is a necessary
//! condition: when one fails, no timetable can exist, and the sentence says by how much.

use serde::{Deserialize, Serialize};

use schedule_types::{Break, Program, Session};

use crate::bounds::{demand_by_size, event_length, least_overlap, room_supply, speaker_supply};
use crate::index::Problem;

/// The program can't be scheduled (or, with [`ReasonKind::TooLarge`], not within the work
/// limit); each reason says why, in numbers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Infeasible {
    pub reasons: Vec<Reason>,
}

/// One reason, with the sessions it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    pub kind: ReasonKind,
    /// A sentence for the organiser: what is short, by how much, and what would fix it.
    pub sentence: String,
    pub sessions: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    DuplicateId,
    UnknownSession,
    UnknownRoom,
    BadBreak,
    DependencyCycle,
    NoRoomLargeEnough,
    SessionTooLong,
    RoomHoursShort,
    SpeakerOverbooked,
    ChainTooLong,
    FixedClash,
    NoSlot,
    /// The search ran out of work (see `WORK_LIMIT`) before it found any timetable.
    TooLarge,
}

impl std::fmt::Display for Infeasible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines: Vec<&str> = self.reasons.iter().map(|r| r.sentence.as_str()).collect();
        f.write_str(&lines.join(" "))
    }
}

/// "2.5 h", "45 min".
pub(crate) fn span(minutes: u64) -> String {
    if minutes < 60 {
        format!("{minutes} min")
    } else if minutes.is_multiple_of(60) {
        format!("{} h", minutes / 60)
    } else {
        format!("{:.1} h", minutes as f64 / 60.0)
    }
}

/// "09:30".
pub(crate) fn clock(minute: u32) -> String {
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

fn quoted(s: &Session) -> String {
    format!("“{}”", s.title)
}

fn days_phrase(p: &Program) -> String {
    match p.days.len() {
        1 => "in its one day".to_string(),
        n => format!("across its {n} days"),
    }
}

impl Reason {
    fn new(kind: ReasonKind, sentence: String, sessions: Vec<String>) -> Self {
        Reason {
            kind,
            sentence,
            sessions,
        }
    }

    pub(crate) fn duplicate(what: &str, id: &str) -> Self {
        let s = format!("Two {what}s share the id {id}: give each its own id.");
        Self::new(ReasonKind::DuplicateId, s, Vec::new())
    }

    pub(crate) fn unknown_session(s: &Session, missing: &str) -> Self {
        let t = format!(
            "{} must come after session {missing}, which isn't in the program: remove that link or add the session.",
            quoted(s)
        );
        Self::new(ReasonKind::UnknownSession, t, vec![s.id.clone()])
    }

    pub(crate) fn self_dependency(s: &Session) -> Self {
        let t = format!(
            "{} is listed as coming after itself: remove that link.",
            quoted(s)
        );
        Self::new(ReasonKind::DependencyCycle, t, vec![s.id.clone()])
    }

    pub(crate) fn unknown_room(s: &Session, room: &str) -> Self {
        let t = format!(
            "{} is fixed to room {room}, which isn't in the program: pick another room or add it.",
            quoted(s)
        );
        Self::new(ReasonKind::UnknownRoom, t, vec![s.id.clone()])
    }

    pub(crate) fn bad_break(p: &Program, b: &Break) -> Self {
        let t = if b.day as usize >= p.days.len() {
            format!(
                "The break “{}” is on day {}, but the event has {} day(s): move it.",
                b.name,
                b.day + 1,
                p.days.len()
            )
        } else {
            format!(
                "The break “{}” lasts {} but must fit between {} and {} ({}): widen the span or shorten it.",
                b.name,
                span(u64::from(b.duration)),
                clock(b.earliest),
                clock(b.latest_end),
                span(u64::from(b.latest_end.saturating_sub(b.earliest)))
            )
        };
        Self::new(ReasonKind::BadBreak, t, Vec::new())
    }

    pub(crate) fn cycle(p: &Program, cycle: &[usize]) -> Self {
        let mut names: Vec<String> = cycle.iter().map(|&i| quoted(&p.sessions[i])).collect();
        names.push(names[0].clone());
        let t = format!(
            "These sessions wait for each other in a circle ({}), so none can go first: remove one of those 'after' links.",
            names.join(" → ")
        );
        let ids = cycle.iter().map(|&i| p.sessions[i].id.clone()).collect();
        Self::new(ReasonKind::DependencyCycle, t, ids)
    }

    pub(crate) fn no_slot(sentence: String, session: &Session) -> Self {
        Self::new(ReasonKind::NoSlot, sentence, vec![session.id.clone()])
    }

    pub(crate) fn fixed_clash(sentence: String, sessions: Vec<String>) -> Self {
        Self::new(ReasonKind::FixedClash, sentence, sessions)
    }

    /// The search stopped at its work limit with no timetable yet: the program's size, and
    /// what makes it hard, in numbers.
    pub(crate) fn too_large(pr: &Problem) -> Self {
        let p = pr.p;
        let mut load = vec![0usize; pr.speaker_names.len()];
        for k in pr.speakers.iter().flatten() {
            load[*k] += 1;
        }
        let busiest = load.iter().copied().max().unwrap_or(0);
        let most_speakers = pr.speakers.iter().map(Vec::len).max().unwrap_or(0);
        let t = format!(
            "This program is too hard to plan in one go: {} sessions {}, {} rooms, up to {most_speakers} people on one session and {busiest} sessions for the busiest person. Fewer people per session, or splitting the event, would help.",
            p.sessions.len(),
            days_phrase(p),
            p.rooms.len(),
        );
        Self::new(ReasonKind::TooLarge, t, Vec::new())
    }
}

/// Every necessary condition that fails, in numbers.
pub(crate) fn necessary(pr: &Problem) -> Vec<Reason> {
    let p = pr.p;
    let mut out = Vec::new();
    let total = event_length(p);
    for (i, s) in p.sessions.iter().enumerate() {
        if pr.rooms_for[i].is_empty() {
            out.push(too_big(p, s));
            continue;
        }
        let longest = pr.rooms_for[i]
            .iter()
            .flat_map(|&r| longest_stretches(pr, r))
            .max()
            .unwrap_or(0);
        if s.duration > longest {
            let t = format!(
                "{} lasts {} but the longest open stretch of a room that seats {} (breaks taken out) is {}: shorten it by {} or open a room longer.",
                quoted(s),
                span(u64::from(s.duration)),
                s.audience,
                span(u64::from(longest)),
                span(u64::from(s.duration - longest))
            );
            out.push(Reason::new(
                ReasonKind::SessionTooLong,
                t,
                vec![s.id.clone()],
            ));
        }
        // Without prerequisites, that's the too-long case above.
        if pr.head[i] > 0 && pr.head[i] + s.duration > total {
            let t = format!(
                "{} and the sessions it must follow need {} one after another, but the event has {} {}: drop an 'after' link or shorten one of them.",
                quoted(s),
                span(u64::from(pr.head[i] + s.duration)),
                span(u64::from(total)),
                days_phrase(p)
            );
            out.push(Reason::new(ReasonKind::ChainTooLong, t, vec![s.id.clone()]));
        }
    }
    for (seats, need) in demand_by_size(p) {
        let have = room_supply(pr, seats).within(p, total);
        if need > have && pr.p.rooms.iter().any(|r| r.capacity >= seats) {
            let t = format!(
                "Short by {} of room time {}: sessions for {} or more people need {}, but rooms seating that many are open {} after breaks. Add a room or shorten sessions.",
                span(need - have),
                days_phrase(p),
                seats,
                span(need),
                span(have)
            );
            let ids = p
                .sessions
                .iter()
                .filter(|s| s.audience >= seats)
                .map(|s| s.id.clone())
                .collect();
            out.push(Reason::new(ReasonKind::RoomHoursShort, t, ids));
            break;
        }
    }
    for (k, name) in pr.speaker_names.iter().enumerate() {
        let theirs: Vec<usize> = (0..pr.n())
            .filter(|&i| pr.speakers[i].contains(&k))
            .collect();
        let need: u64 = theirs
            .iter()
            .map(|&i| u64::from(p.sessions[i].duration))
            .sum();
        let have = speaker_supply(p, name).within(p, total);
        if need > have {
            let t = format!(
                "{name} is booked for {} of sessions but has only {} free {} (after breaks and unavailable times): give a session to someone else or shorten them.",
                span(need),
                span(have),
                days_phrase(p)
            );
            let ids = theirs.iter().map(|&i| p.sessions[i].id.clone()).collect();
            out.push(Reason::new(ReasonKind::SpeakerOverbooked, t, ids));
        }
    }
    out.extend(crate::explain_fixed::fixed_clashes(pr));
    out
}

fn too_big(p: &Program, s: &Session) -> Reason {
    let t = match s.fixed_room.as_deref().and_then(|r| p.room(r)) {
        Some(room) => format!(
            "{} expects {} people but its room {} seats {}: move it to a bigger room or cap the audience at {}.",
            quoted(s),
            s.audience,
            room.name,
            room.capacity,
            room.capacity
        ),
        None => {
            let max = p.rooms.iter().map(|r| r.capacity).max().unwrap_or(0);
            format!(
                "{} expects {} people but the largest room seats {}: find a bigger room or cap the audience at {}.",
                quoted(s),
                s.audience,
                max,
                max
            )
        }
    };
    Reason::new(ReasonKind::NoRoomLargeEnough, t, vec![s.id.clone()])
}

/// A room's open stretches, each less the least its day's breaks must take from it.
fn longest_stretches(pr: &Problem, r: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for (d, spans) in pr.windows[r].iter().enumerate() {
        for &(a, b) in spans {
            // A break inside the stretch cuts it; the longer piece is what a session can use.
            let mut pieces = vec![(a, b)];
            for br in pr.p.breaks.iter().filter(|br| br.day as usize == d) {
                if least_overlap(a, b, br) == 0 {
                    continue;
                }
                let fixed = br.latest_end == br.earliest + br.duration;
                pieces = pieces
                    .into_iter()
                    .flat_map(|(x, y)| {
                        if fixed {
                            vec![(x, y.min(br.earliest)), (x.max(br.latest_end), y)]
                        } else {
                            // Placed at either end of its span, the break leaves at most this.
                            vec![
                                (x, y.min(br.latest_end - br.duration)),
                                (x.max(br.earliest + br.duration), y),
                            ]
                        }
                    })
                    .filter(|(x, y)| x < y)
                    .collect();
                // Each flexible break splits every piece in two, so without this the pieces
                // double per break (2^20 of them for twenty breaks in a day). Their ends come
                // from the breaks' bounds, so at most (2k + 1)² of them differ.
                pieces.sort_unstable();
                pieces.dedup();
            }
            out.extend(pieces.iter().map(|(x, y)| y - x));
        }
    }
    out
}
