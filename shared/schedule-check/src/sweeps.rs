//! One sweep per hard constraint over the finished timetable.

use std::collections::BTreeMap;

use schedule_types::{Program, Room, Session, Timetable};

use crate::minutes::Minutes;
use crate::violation::{Constraint, Violation};

/// A placed session with what the sweeps need resolved.
struct Row<'a> {
    s: &'a Session,
    room: Option<&'a Room>,
    room_id: &'a str,
    day: u32,
    start: u32,
    end: u32,
}

fn v(constraint: Constraint, ids: &[&str], detail: String) -> Violation {
    Violation {
        constraint,
        ids: ids.iter().map(|s| s.to_string()).collect(),
        detail,
    }
}

pub(crate) fn all(p: &Program, t: &Timetable) -> Vec<Violation> {
    let mut out = Vec::new();
    let rows = resolve(p, t, &mut out);
    seats(&rows, &mut out);
    open(p, &rows, &mut out);
    room_once(&rows, &mut out);
    person_once(p, &rows, &mut out);
    away(p, &rows, &mut out);
    order(&rows, &mut out);
    breaks(p, t, &rows, &mut out);
    fixed(&rows, &mut out);
    out
}

/// Every session once; the rows of the ones that are.
fn resolve<'a>(p: &'a Program, t: &'a Timetable, out: &mut Vec<Violation>) -> Vec<Row<'a>> {
    let sessions: BTreeMap<&str, &Session> =
        p.sessions.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut count: BTreeMap<&str, usize> = sessions.keys().map(|k| (*k, 0)).collect();
    let mut rows = Vec::new();
    for pl in &t.sessions {
        let Some(s) = sessions.get(pl.session.as_str()) else {
            out.push(v(
                Constraint::EverySessionOnce,
                &[&pl.session],
                "placed but not in the program".into(),
            ));
            continue;
        };
        *count.get_mut(pl.session.as_str()).unwrap() += 1;
        rows.push(Row {
            s,
            room: p.rooms.iter().find(|r| r.id == pl.room),
            room_id: &pl.room,
            day: pl.day,
            start: pl.start,
            end: pl.start.saturating_add(s.duration),
        });
    }
    for (id, n) in count {
        if n != 1 {
            out.push(v(
                Constraint::EverySessionOnce,
                &[id],
                format!("placed {n} times"),
            ));
        }
    }
    rows
}

fn seats(rows: &[Row], out: &mut Vec<Violation>) {
    for r in rows {
        match r.room {
            None => out.push(v(
                Constraint::RoomSeats,
                &[&r.s.id],
                format!("room {} is not in the program", r.room_id),
            )),
            Some(room) if room.capacity < r.s.audience => out.push(v(
                Constraint::RoomSeats,
                &[&r.s.id],
                format!(
                    "audience {} in room {} seating {}",
                    r.s.audience, room.id, room.capacity
                ),
            )),
            Some(_) => {}
        }
    }
}

/// Inside the day's bounds and one open window of the room: every minute must be open.
fn open(p: &Program, rows: &[Row], out: &mut Vec<Violation>) {
    for r in rows {
        let Some(room) = r.room else { continue };
        let Some(day) = p.days.get(r.day as usize) else {
            out.push(v(
                Constraint::RoomOpen,
                &[&r.s.id],
                format!("day {} is not in the program", r.day),
            ));
            continue;
        };
        // Windows are checked one at a time: two touching windows don't make one long one.
        let inside = room.windows.iter().filter(|w| w.day == r.day).any(|w| {
            let mut m = Minutes::none();
            m.mark(w.start.max(day.start), w.end.min(day.end));
            m.all(r.start, r.end)
        });
        if !inside {
            out.push(v(
                Constraint::RoomOpen,
                &[&r.s.id],
                format!(
                    "day {} {}..{} is outside the day or room {}'s windows",
                    r.day, r.start, r.end, room.id
                ),
            ));
        }
    }
}

/// Sorted by room, day and start: a session starting before the latest end so far overlaps.
fn room_once(rows: &[Row], out: &mut Vec<Violation>) {
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by_key(|r| (r.room_id, r.day, r.start, r.end));
    let mut last: Option<&Row> = None;
    for r in sorted {
        if let Some(l) = last
            && l.room_id == r.room_id
            && l.day == r.day
        {
            if r.start < l.end {
                out.push(v(
                    Constraint::RoomOnce,
                    &[&l.s.id, &r.s.id],
                    format!("both in room {} on day {}", r.room_id, r.day),
                ));
            }
            if l.end >= r.end {
                continue;
            }
        }
        last = Some(r);
    }
}

/// Sorted by person, day and start: the next session must start at least the changeover after
/// the latest end so far.
fn person_once(p: &Program, rows: &[Row], out: &mut Vec<Violation>) {
    let mut per: Vec<(&str, u32, u32, u32, &str)> = Vec::new();
    for r in rows {
        let mut names: Vec<&str> = r.s.speakers.iter().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        per.extend(
            names
                .into_iter()
                .map(|n| (n, r.day, r.start, r.end, r.s.id.as_str())),
        );
    }
    per.sort_unstable();
    let gap = p.changeover_minutes;
    for w in 0..per.len() {
        let (name, day, start, _, id) = per[w];
        let latest = per[..w]
            .iter()
            .rev()
            .take_while(|x| x.0 == name && x.1 == day)
            .max_by_key(|x| x.3);
        if let Some(prev) = latest
            && start < prev.3.saturating_add(gap)
        {
            out.push(v(
                Constraint::PersonOnce,
                &[prev.4, id],
                format!(
                    "{name} on day {day}: starts {start}, previous ends {} (+{gap} changeover)",
                    prev.3
                ),
            ));
        }
    }
}

fn away(p: &Program, rows: &[Row], out: &mut Vec<Violation>) {
    let mut maps: BTreeMap<(&str, u32), Minutes> = BTreeMap::new();
    for u in &p.unavailable {
        maps.entry((u.speaker.as_str(), u.day))
            .or_insert_with(Minutes::none)
            .mark(u.start, u.end);
    }
    for r in rows {
        for name in &r.s.speakers {
            if maps
                .get(&(name.as_str(), r.day))
                .is_some_and(|m| m.any(r.start, r.end))
            {
                out.push(v(
                    Constraint::SpeakerAvailable,
                    &[&r.s.id],
                    format!("{name} is unavailable then"),
                ));
            }
        }
    }
}

fn order(rows: &[Row], out: &mut Vec<Violation>) {
    let by_id: BTreeMap<&str, &Row> = rows.iter().map(|r| (r.s.id.as_str(), r)).collect();
    for r in rows {
        for before in &r.s.after {
            match by_id.get(before.as_str()) {
                None => out.push(v(
                    Constraint::Order,
                    &[before, &r.s.id],
                    "prerequisite not placed".into(),
                )),
                Some(b) if (b.day, b.end) > (r.day, r.start) => out.push(v(
                    Constraint::Order,
                    &[before, &r.s.id],
                    format!(
                        "prerequisite ends day {} {}, dependant starts day {} {}",
                        b.day, b.end, r.day, r.start
                    ),
                )),
                Some(_) => {}
            }
        }
    }
}

fn breaks(p: &Program, t: &Timetable, rows: &[Row], out: &mut Vec<Violation>) {
    let mut maps: BTreeMap<u32, Minutes> = BTreeMap::new();
    for b in &p.breaks {
        let placed: Vec<_> = t.breaks.iter().filter(|x| x.id == b.id).collect();
        let [one] = placed.as_slice() else {
            out.push(v(
                Constraint::Breaks,
                &[&b.id],
                format!("break placed {} times", placed.len()),
            ));
            continue;
        };
        let end = one.start.saturating_add(b.duration);
        if one.day != b.day || one.start < b.earliest || end > b.latest_end {
            out.push(v(
                Constraint::Breaks,
                &[&b.id],
                format!(
                    "break at day {} {}..{} is outside its span",
                    one.day, one.start, end
                ),
            ));
        }
        maps.entry(one.day)
            .or_insert_with(Minutes::none)
            .mark(one.start, end);
    }
    for x in &t.breaks {
        if !p.breaks.iter().any(|b| b.id == x.id) {
            out.push(v(
                Constraint::Breaks,
                &[&x.id],
                "placed but not in the program".into(),
            ));
        }
    }
    for r in rows {
        if maps.get(&r.day).is_some_and(|m| m.any(r.start, r.end)) {
            out.push(v(
                Constraint::Breaks,
                &[&r.s.id],
                format!("runs into a break on day {}", r.day),
            ));
        }
    }
}

fn fixed(rows: &[Row], out: &mut Vec<Violation>) {
    for r in rows {
        if let Some(f) = r.s.fixed_start
            && (f.day, f.start) != (r.day, r.start)
        {
            out.push(v(
                Constraint::Fixed,
                &[&r.s.id],
                format!(
                    "fixed to day {} {}, placed day {} {}",
                    f.day, f.start, r.day, r.start
                ),
            ));
        }
        if let Some(room) = &r.s.fixed_room
            && room != r.room_id
        {
            out.push(v(
                Constraint::Fixed,
                &[&r.s.id],
                format!("fixed to room {room}, placed in {}", r.room_id),
            ));
        }
    }
}
