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

/// As [`add`], into a list whose intervals never overlap (a room's or a speaker's: every place
/// is checked free first), which [`clash_disjoint`] relies on.
fn add_disjoint(list: &mut Vec<(u32, u32)>, iv: (u32, u32)) {
    let k = list.partition_point(|x| *x < iv);
    debug_assert!(
        k == 0 || list[k - 1].1 <= iv.0,
        "{iv:?} overlaps {:?}",
        list[k - 1]
    );
    debug_assert!(
        k == list.len() || iv.1 <= list[k].0,
        "{iv:?} overlaps {:?}",
        list[k]
    );
    list.insert(k, iv);
}

/// [`clash`] without padding on a sorted list of intervals that do not overlap: their ends
/// are sorted too, so only the last one starting before `b` can overlap `[a, b)` and end
/// latest. A binary search, where `clash` reads the whole list.
fn clash_disjoint(list: &[(u32, u32)], a: u32, b: u32) -> Option<u32> {
    let k = list.partition_point(|&(x, _)| x < b);
    list[..k].last().filter(|&&(_, y)| a < y).map(|&(_, y)| y)
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
        add_disjoint(&mut self.room[at.room][at.day as usize], iv);
        for &k in &self.pr.speakers[s] {
            add_disjoint(&mut self.speaker[k][at.day as usize], iv);
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
        self.pr.spend(1);
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
            if self.pr.exhausted() {
                return None;
            }
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
            let people = self.people_busy(s, d);
            for &r in &self.pr.rooms_for[s] {
                let Some(t) = self.earliest_in(&people, r, d, from, dur, until) else {
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

    /// What keeps `s`'s people from a slot on `day`, whichever the room: the breaks, each
    /// speaker's sessions widened by the changeover on both sides, and their unavailable
    /// times, merged into intervals that do not overlap. Built once per day and shared by the
    /// rooms, it blocks exactly the starts [`Self::blocked_until`] blocks for those reasons.
    fn people_busy(&self, s: usize, day: usize) -> Vec<(u32, u32)> {
        let co = self.pr.p.changeover_minutes;
        let mut all = self.breaks[day].clone();
        for &k in &self.pr.speakers[s] {
            let widened = self.speaker[k][day]
                .iter()
                .map(|&(x, y)| (x.saturating_sub(co), y + co));
            all.extend(widened);
            all.extend_from_slice(&self.off[k][day]);
        }
        // Sorted runs one after another: the stable sort merges them rather than sorting anew.
        all.sort();
        self.pr.spend(all.len() as u64 + 1);
        let mut merged: Vec<(u32, u32)> = Vec::with_capacity(all.len());
        for (x, y) in all {
            match merged.last_mut() {
                Some(last) if x <= last.1 => last.1 = last.1.max(y),
                _ => merged.push((x, y)),
            }
        }
        merged
    }

    /// The earliest start in room `r` on day `d` in `[from, until)` where the room and
    /// `people` (see [`Self::people_busy`]) leave `dur` minutes free. Each blocked start jumps
    /// to the end of what blocks it: every start before that end is blocked too.
    fn earliest_in(
        &self,
        people: &[(u32, u32)],
        r: usize,
        d: usize,
        from: u32,
        dur: u32,
        until: u32,
    ) -> Option<u32> {
        for &(a, b) in &self.pr.windows[r][d] {
            let mut t = a.max(from);
            while t + dur <= b && t < until {
                self.pr.spend(1);
                if self.pr.exhausted() {
                    return None;
                }
                let e = t + dur;
                let next = clash_disjoint(&self.room[r][d], t, e).max(clash_disjoint(people, t, e));
                match next {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::conference;
    use crate::rng::Rng;

    /// The earliest slot as the search found it before `people_busy`: each room's day walked
    /// with `blocked_until`, which reads every speaker's list at every start it tries.
    fn walked(st: &State, s: usize, release: u64, spare: u32) -> Option<At> {
        let pr = st.pr;
        let dur = pr.p.sessions[s].duration;
        let first_day = (release / 1440) as usize;
        for d in first_day..pr.p.days.len() {
            let from = if d == first_day {
                (release % 1440) as u32
            } else {
                0
            };
            let mut best: Option<(u32, u32, u32, usize)> = None;
            for &r in &pr.rooms_for[s] {
                let mut found = None;
                'spans: for &(a, b) in &pr.windows[r][d] {
                    let mut t = a.max(from);
                    while t + dur <= b {
                        match st.blocked_until(s, r, d, t) {
                            Some(next) => t = next,
                            None => {
                                found = Some(t);
                                break 'spans;
                            }
                        }
                    }
                }
                let Some(t) = found else { continue };
                let cap = pr.p.rooms[r].capacity;
                let smaller = pr.rooms_for[s]
                    .iter()
                    .filter(|&&o| pr.p.rooms[o].capacity < cap)
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

    /// Seeded conferences (breaks, speakers away for a morning, a 10-minute changeover, eight
    /// people on every session) filled one session at a time, each from a random start; before each placement, the earliest slot of that session and of
    /// another not yet placed, from several releases and with and without sparing big rooms,
    /// is the one the old walk finds.
    #[test]
    fn the_earliest_slot_is_the_one_walking_every_speakers_list_finds() {
        let mut compared = 0;
        for seed in 1..=6 {
            let mut p = conference(60, seed);
            let mut rng = Rng::new(seed);
            // Eight people share every session, one to three each, so their days are full of
            // each other's talks and of gaps between them.
            for session in &mut p.sessions {
                let n = 1 + rng.below(3);
                session.speakers = (0..n).map(|_| format!("p{}", rng.below(8))).collect();
            }
            let pr = Problem::new(&p).unwrap();
            let breaks: Vec<u32> = p.breaks.iter().map(|b| b.earliest).collect();
            let mut st = State::new(&pr, &breaks);
            for s in 0..pr.n() {
                for probe in [s, (s * 7 + 3) % pr.n()] {
                    if st.at[probe].is_some() {
                        continue;
                    }
                    for release in [0, rng.below(p.days.len() as u64 * 1440)] {
                        for spare in [0, 30] {
                            assert_eq!(
                                st.earliest_sparing(probe, release, spare),
                                walked(&st, probe, release, spare),
                                "seed {seed}, session {probe}, release {release}, spare {spare}"
                            );
                            compared += 1;
                        }
                    }
                }
                // Placed from anywhere in the event, so gaps open before and after.
                let release = rng.below(p.days.len() as u64 * 1440);
                if let Some(at) = walked(&st, s, release, 0) {
                    st.place(s, at);
                }
            }
        }
        assert!(compared > 1_000, "{compared}");
    }
}
