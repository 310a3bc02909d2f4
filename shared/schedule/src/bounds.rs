//! Event minutes and lower bounds: how early the program could finish at best, and how many
//! minutes a room class or a speaker has, used both for the makespan bound and for explaining
//! infeasibility in numbers.

use schedule_types::{Break, Program};

use crate::index::Problem;

/// Minutes of event time before `(day, minute)`: the days laid end to end, nights removed. The
/// makespan is the largest such value at a session's end.
pub fn event_minute(p: &Program, day: u32, minute: u32) -> u32 {
    let d = day as usize;
    let before: u32 = p.days[..d.min(p.days.len())]
        .iter()
        .map(|x| x.end.saturating_sub(x.start))
        .sum();
    match p.days.get(d) {
        Some(x) => {
            before
                + minute
                    .saturating_sub(x.start)
                    .min(x.end.saturating_sub(x.start))
        }
        None => before,
    }
}

/// Every event minute there is.
pub(crate) fn event_length(p: &Program) -> u32 {
    p.days.iter().map(|x| x.end.saturating_sub(x.start)).sum()
}

/// Spans of one day (minutes of the day) during which something is free, and the day's breaks
/// and other fixed blocks that take time out of them.
#[derive(Debug, Default, Clone)]
pub(crate) struct Supply {
    /// `(day, start, end)` open spans.
    pub open: Vec<(u32, u32, u32)>,
    /// `(day, start, end)` spans always blocked (unavailable times).
    pub blocked: Vec<(u32, u32, u32)>,
}

impl Supply {
    /// Free minutes within the first `m` event minutes: open spans, less blocked ones, less the
    /// least that each break must take out of them.
    pub(crate) fn within(&self, p: &Program, m: u32) -> u64 {
        let mut total = 0u64;
        for &(d, a, b) in &self.open {
            let Some(day) = p.days.get(d as usize) else {
                continue;
            };
            let cut = day.start + m.saturating_sub(event_minute(p, d, day.start));
            let (a, b) = (a, b.min(cut));
            if a >= b {
                continue;
            }
            // Blocked spans merged, so overlapping ones are not taken out twice.
            let mut blocked: Vec<(u32, u32)> = self
                .blocked
                .iter()
                .filter(|x| x.0 == d)
                .map(|&(_, x, y)| (x.max(a), y.min(b)))
                .filter(|(x, y)| x < y)
                .collect();
            blocked.sort_unstable();
            let mut merged: Vec<(u32, u32)> = Vec::new();
            for (x, y) in blocked {
                match merged.last_mut() {
                    Some(last) if x <= last.1 => last.1 = last.1.max(y),
                    _ => merged.push((x, y)),
                }
            }
            let mut free =
                u64::from(b - a) - merged.iter().map(|(x, y)| u64::from(y - x)).sum::<u64>();
            if breaks_disjoint(p, d) {
                for br in p.breaks.iter().filter(|br| br.day == d) {
                    // What a break must take from the span, less what blocked time already took.
                    let already: u32 = merged
                        .iter()
                        .map(|&(x, y)| overlap(x, y, br.earliest, br.latest_end))
                        .sum();
                    free = free
                        .saturating_sub(u64::from(least_overlap(a, b, br).saturating_sub(already)));
                }
            }
            total += free;
        }
        total
    }

    /// The fewest event minutes that hold `need` free minutes, if the whole event does.
    pub(crate) fn earliest_holding(&self, p: &Program, need: u64) -> Option<u32> {
        let (mut lo, mut hi) = (0u32, event_length(p));
        if self.within(p, hi) < need {
            return None;
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.within(p, mid) >= need {
                hi = mid
            } else {
                lo = mid + 1
            }
        }
        Some(lo)
    }
}

pub(crate) fn overlap(a: u32, b: u32, c: u32, d: u32) -> u32 {
    b.min(d).saturating_sub(a.max(c))
}

/// The least a break can overlap `[a, b)`, wherever it is placed in its span.
pub(crate) fn least_overlap(a: u32, b: u32, br: &Break) -> u32 {
    let outside = a
        .saturating_sub(br.earliest)
        .min(br.latest_end.saturating_sub(br.earliest))
        + br.latest_end
            .saturating_sub(b)
            .min(br.latest_end.saturating_sub(br.earliest));
    br.duration.saturating_sub(outside).min(b.saturating_sub(a))
}

/// Whether the day's break spans don't overlap, so their least overlaps can be added up.
fn breaks_disjoint(p: &Program, d: u32) -> bool {
    let mut spans: Vec<(u32, u32)> = p
        .breaks
        .iter()
        .filter(|b| b.day == d)
        .map(|b| (b.earliest, b.latest_end))
        .collect();
    spans.sort_unstable();
    spans.windows(2).all(|w| w[0].1 <= w[1].0)
}

/// Open room time for rooms seating at least `seats`.
pub(crate) fn room_supply(pr: &Problem, seats: u32) -> Supply {
    let mut s = Supply::default();
    for (r, room) in pr.p.rooms.iter().enumerate() {
        if room.capacity < seats {
            continue;
        }
        for (d, spans) in pr.windows[r].iter().enumerate() {
            s.open.extend(spans.iter().map(|&(a, b)| (d as u32, a, b)));
        }
    }
    s
}

/// A speaker's free time: the days, less their unavailable times.
pub(crate) fn speaker_supply(p: &Program, name: &str) -> Supply {
    Supply {
        open: p
            .days
            .iter()
            .enumerate()
            .map(|(d, x)| (d as u32, x.start, x.end))
            .collect(),
        blocked: p
            .unavailable
            .iter()
            .filter(|u| u.speaker == name)
            .map(|u| (u.day, u.start, u.end))
            .collect(),
    }
}

/// Minutes needed by sessions for at least `seats` people, for each distinct audience size,
/// largest first.
pub(crate) fn demand_by_size(p: &Program) -> Vec<(u32, u64)> {
    let mut sizes: Vec<u32> = p.sessions.iter().map(|s| s.audience).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .rev()
        .map(|c| {
            let need = p
                .sessions
                .iter()
                .filter(|s| s.audience >= c)
                .map(|s| u64::from(s.duration))
                .sum();
            (c, need)
        })
        .collect()
}

/// A lower bound on the makespan (event minutes): the longest prerequisite chain, fixed
/// sessions' ends, room time per audience size, and each speaker's load.
pub fn lower_bound(p: &Program) -> u32 {
    match Problem::new(p) {
        Ok(pr) => bound(&pr),
        Err(_) => 0,
    }
}

pub(crate) fn bound(pr: &Problem) -> u32 {
    let p = pr.p;
    let mut lb = 0;
    for (i, s) in p.sessions.iter().enumerate() {
        lb = lb.max(pr.head[i] + s.duration);
        if let Some(f) = s.fixed_start {
            lb = lb.max(event_minute(p, f.day, f.start + s.duration));
        }
    }
    for (c, need) in demand_by_size(p) {
        if let Some(m) = room_supply(pr, c).earliest_holding(p, need) {
            lb = lb.max(m);
        }
    }
    for (k, name) in pr.speaker_names.iter().enumerate() {
        let need: u64 = (0..pr.n())
            .filter(|&i| pr.speakers[i].contains(&k))
            .map(|i| u64::from(p.sessions[i].duration))
            .sum();
        if let Some(m) = speaker_supply(p, name).earliest_holding(p, need) {
            lb = lb.max(m);
        }
    }
    lb
}
