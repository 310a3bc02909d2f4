//! A timetable being built: who and what is busy when, and the earliest free slot for a session.

use crate::index::Problem;

/// Where one session goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct At {
    pub day: u32,
    pub start: u32,
    pub room: usize,
}

/// Minutes since the event's first midnight: orders moments across days.
pub(crate) fn global(day: u32, minute: u32) -> u64 {
    u64::from(day) * 1440 + u64::from(minute)
}

type Busy = Vec<Vec<(u32, u32)>>;

#[derive(Debug, Clone)]
pub(crate) struct State<'a> {
    pub pr: &'a Problem<'a>,
    room: Vec<Busy>,
    speaker: Vec<Busy>,
    off: Vec<Busy>,
    breaks: Busy,
    break_starts: Vec<u32>,
    pub at: Vec<Option<At>>,
}

fn add(list: &mut Vec<(u32, u32)>, iv: (u32, u32)) {
    let k = list.partition_point(|x| *x < iv);
    list.insert(k, iv);
}

/// The end of the latest interval overlapping `[a, b)` when each is widened by `pad` on both
/// sides, or `None` when none does.
fn clash(list: &[(u32, u32)], a: u32, b: u32, pad: u32) -> Option<u32> {
    list.iter()
        .filter(|&&(x, y)| a < y + pad && x < b + pad)
        .map(|&(_, y)| y + pad)
        .max()
}

impl<'a> State<'a> {
    pub(crate) fn new(pr: &'a Problem<'a>, break_starts: &[u32]) -> Self {
        let days = pr.p.days.len();
        let mut off = vec![vec![Vec::new(); days]; pr.speaker_names.len()];
        for u in &pr.p.unavailable {
            if let (Ok(k), true) = (
                pr.speaker_names.binary_search(&u.speaker),
                (u.day as usize) < days,
            ) {
                add(&mut off[k][u.day as usize], (u.start, u.end));
            }
        }
        let mut breaks = vec![Vec::new(); days];
        for (b, &start) in pr.p.breaks.iter().zip(break_starts) {
            add(&mut breaks[b.day as usize], (start, start + b.duration));
        }
        State {
            pr,
            room: vec![vec![Vec::new(); days]; pr.p.rooms.len()],
            speaker: vec![vec![Vec::new(); days]; pr.speaker_names.len()],
            off,
            breaks,
            break_starts: break_starts.to_vec(),
            at: vec![None; pr.n()],
        }
    }

    pub(crate) fn break_starts(&self) -> impl Iterator<Item = u32> + '_ {
        self.break_starts.iter().copied()
    }

    pub(crate) fn place(&mut self, s: usize, at: At) {
        let iv = (at.start, at.start + self.pr.p.sessions[s].duration);
        add(&mut self.room[at.room][at.day as usize], iv);
        for &k in &self.pr.speakers[s] {
            add(&mut self.speaker[k][at.day as usize], iv);
        }
        self.at[s] = Some(at);
    }

    pub(crate) fn remove(&mut self, s: usize) {
        let Some(at) = self.at[s].take() else { return };
        let iv = (at.start, at.start + self.pr.p.sessions[s].duration);
        let drop = |list: &mut Vec<(u32, u32)>| {
            if let Some(k) = list.iter().position(|x| *x == iv) {
                list.remove(k);
            }
        };
        drop(&mut self.room[at.room][at.day as usize]);
        for &k in &self.pr.speakers[s] {
            drop(&mut self.speaker[k][at.day as usize]);
        }
    }

    pub(crate) fn end(&self, s: usize) -> Option<u64> {
        self.at[s].map(|a| global(a.day, a.start + self.pr.p.sessions[s].duration))
    }

    /// Earliest start from which `[t, t + duration)` in `room` on `day` may be free, or `None`
    /// when `t` itself is free of rooms, breaks, speakers and their unavailable times.
    fn blocked_until(&self, s: usize, room: usize, day: usize, t: u32) -> Option<u32> {
        let e = t + self.pr.p.sessions[s].duration;
        let co = self.pr.p.changeover_minutes;
        let mut next = clash(&self.room[room][day], t, e, 0);
        next = next.max(clash(&self.breaks[day], t, e, 0));
        for &k in &self.pr.speakers[s] {
            next = next.max(clash(&self.speaker[k][day], t, e, co));
            next = next.max(clash(&self.off[k][day], t, e, 0));
        }
        next
    }

    /// Whether `s` can go exactly at `at` given everything placed so far (fixed time and room,
    /// seats, windows, overlaps, prerequisites and dependants already placed).
    pub(crate) fn fits(&self, s: usize, at: At) -> bool {
        let sess = &self.pr.p.sessions[s];
        let day = at.day as usize;
        if day >= self.pr.p.days.len() || !self.pr.rooms_for[s].contains(&at.room) {
            return false;
        }
        if let Some(f) = sess.fixed_start
            && (f.day, f.start) != (at.day, at.start)
        {
            return false;
        }
        let e = at.start + sess.duration;
        let inside = self.pr.windows[at.room][day]
            .iter()
            .any(|&(a, b)| a <= at.start && e <= b);
        if !inside || self.blocked_until(s, at.room, day, at.start).is_some() {
            return false;
        }
        let start = global(at.day, at.start);
        let end = global(at.day, e);
        self.pr.preds[s]
            .iter()
            .all(|&j| self.end(j).is_none_or(|pe| pe <= start))
            && self.pr.succs[s]
                .iter()
                .all(|&j| self.at[j].is_none_or(|a| end <= global(a.day, a.start)))
    }

    /// The earliest slot for `s` that starts at or after `release` (global minutes), on the
    /// first day with a slot, in the room seating the fewest that has it, but a room counts as `spare`
    /// minutes later for each room seating fewer that could also hold the session: big rooms
    /// are kept for the sessions only they can hold.
    pub(crate) fn earliest_sparing(&self, s: usize, release: u64, spare: u32) -> Option<At> {
        self.earliest_before(s, release, spare, u64::MAX)
    }

    /// As [`Self::earliest_sparing`], among slots starting before `limit` (global minutes).
    pub(crate) fn earliest_before(
        &self,
        s: usize,
        release: u64,
        spare: u32,
        limit: u64,
    ) -> Option<At> {
        let dur = self.pr.p.sessions[s].duration;
        let first_day = (release / 1440) as usize;
        if self.pr.p.days.is_empty() {
            return None;
        }
        let last_day = (limit / 1440).min(self.pr.p.days.len() as u64 - 1) as usize;
        for d in first_day..=last_day {
            let until = if d == last_day {
                (limit - d as u64 * 1440).min(u64::from(u32::MAX)) as u32
            } else {
                u32::MAX
            };
            let from = if d == first_day {
                (release % 1440) as u32
            } else {
                0
            };
            let mut best: Option<(u32, u32, u32, usize)> = None;
            for &r in &self.pr.rooms_for[s] {
                let Some(t) = self.earliest_in(s, r, d, from, dur, until) else {
                    continue;
                };
                let cap = self.pr.p.rooms[r].capacity;
                let smaller = self.pr.rooms_for[s]
                    .iter()
                    .filter(|&&o| self.pr.p.rooms[o].capacity < cap)
                    .count() as u32;
                let key = (t + spare * smaller, t, cap, r);
                if best.is_none_or(|b| key < b) {
                    best = Some(key);
                }
            }
            if let Some((_, t, _, r)) = best {
                return Some(At {
                    day: d as u32,
                    start: t,
                    room: r,
                });
            }
        }
        None
    }

    fn earliest_in(
        &self,
        s: usize,
        r: usize,
        d: usize,
        from: u32,
        dur: u32,
        until: u32,
    ) -> Option<u32> {
        for &(a, b) in &self.pr.windows[r][d] {
            let mut t = a.max(from);
            while t + dur <= b && t < until {
                match self.blocked_until(s, r, d, t) {
                    Some(next) => t = next,
                    None => return Some(t),
                }
            }
        }
        None
    }

    /// Minutes the rooms seating `seats` are open on all days, and minutes already used there.
    pub(crate) fn room_use(&self, seats: u32) -> (u64, u64) {
        let mut open = 0u64;
        let mut used = 0u64;
        for (r, room) in self.pr.p.rooms.iter().enumerate() {
            if room.capacity < seats {
                continue;
            }
            for (d, spans) in self.pr.windows[r].iter().enumerate() {
                open += spans.iter().map(|(a, b)| u64::from(b - a)).sum::<u64>();
                used += self.room[r][d]
                    .iter()
                    .map(|(a, b)| u64::from(b - a))
                    .sum::<u64>();
                used += self.breaks[d]
                    .iter()
                    .map(|&(x, y)| {
                        spans
                            .iter()
                            .map(|&(a, b)| u64::from(crate::bounds::overlap(a, b, x, y)))
                            .sum::<u64>()
                    })
                    .sum::<u64>();
            }
        }
        (open, used)
    }
}
