//! The program turned into indices: speakers, rooms that can hold each session, prerequisite
//! links and chain lengths. References that don't resolve become reasons, not panics.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use schedule_types::Program;

use crate::explain::Reason;

/// A program with its names resolved to indices.
#[derive(Debug)]
pub(crate) struct Problem<'a> {
    pub p: &'a Program,
    /// Per session: indices of its speakers.
    pub speakers: Vec<Vec<usize>>,
    pub speaker_names: Vec<String>,
    /// Per session: rooms that seat its audience and agree with its fixed room.
    pub rooms_for: Vec<Vec<usize>>,
    pub preds: Vec<Vec<usize>>,
    pub succs: Vec<Vec<usize>>,
    /// Per session: minutes of the longest chain of prerequisites before it.
    pub head: Vec<u32>,
    /// Per session: minutes of the longest chain from its start to the last dependant's end.
    pub tail: Vec<u32>,
    /// Per room, per day: open spans clipped to the day's bounds, sorted.
    pub windows: Vec<Vec<Vec<(u32, u32)>>>,
    /// Work done so far (slots probed, busy times read), against `work_limit`: the search
    /// stops once past it, so a plan's CPU is bounded whatever the program's shape, and the
    /// same program always stops at the same point.
    pub work: Cell<u64>,
    pub work_limit: u64,
}

impl<'a> Problem<'a> {
    pub(crate) fn new(p: &'a Program) -> Result<Self, Vec<Reason>> {
        let mut reasons = Vec::new();
        let by_id = unique_ids(
            p.sessions.iter().map(|s| s.id.as_str()),
            "session",
            &mut reasons,
        );
        let room_ids = unique_ids(p.rooms.iter().map(|r| r.id.as_str()), "room", &mut reasons);

        let mut names = BTreeSet::new();
        for s in &p.sessions {
            names.extend(s.speakers.iter().cloned());
        }
        let speaker_names: Vec<String> = names.into_iter().collect();
        let speakers = p
            .sessions
            .iter()
            .map(|s| {
                let mut v: Vec<usize> = s
                    .speakers
                    .iter()
                    .map(|n| speaker_names.binary_search(n).unwrap())
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            })
            .collect();

        let mut preds = vec![Vec::new(); p.sessions.len()];
        let mut succs = vec![Vec::new(); p.sessions.len()];
        let mut rooms_for = Vec::with_capacity(p.sessions.len());
        for (i, s) in p.sessions.iter().enumerate() {
            for a in &s.after {
                match by_id.get(a.as_str()) {
                    Some(&j) if j != i => {
                        if !preds[i].contains(&j) {
                            preds[i].push(j);
                            succs[j].push(i);
                        }
                    }
                    Some(_) => reasons.push(Reason::self_dependency(s)),
                    None => reasons.push(Reason::unknown_session(s, a)),
                }
            }
            if let Some(r) = &s.fixed_room
                && !room_ids.contains_key(r.as_str())
            {
                reasons.push(Reason::unknown_room(s, r));
            }
            let fits: Vec<usize> = p
                .rooms
                .iter()
                .enumerate()
                .filter(|(_, r)| r.capacity >= s.audience)
                .filter(|(_, r)| s.fixed_room.as_ref().is_none_or(|f| *f == r.id))
                .map(|(k, _)| k)
                .collect();
            rooms_for.push(fits);
        }
        for b in &p.breaks {
            if b.latest_end < b.earliest.saturating_add(b.duration)
                || b.day as usize >= p.days.len()
            {
                reasons.push(Reason::bad_break(p, b));
            }
        }

        let windows = p
            .rooms
            .iter()
            .map(|r| {
                (0..p.days.len())
                    .map(|d| {
                        let day = p.days[d];
                        let mut v: Vec<(u32, u32)> = r
                            .windows
                            .iter()
                            .filter(|w| w.day as usize == d)
                            .map(|w| (w.start.max(day.start), w.end.min(day.end)))
                            .filter(|(a, b)| a < b)
                            .collect();
                        v.sort_unstable();
                        v
                    })
                    .collect()
            })
            .collect();

        let order = match topological(&preds, &succs) {
            Ok(order) => order,
            Err(cycle) => {
                reasons.push(Reason::cycle(p, &cycle));
                Vec::new()
            }
        };
        if !reasons.is_empty() {
            return Err(reasons);
        }
        let dur: Vec<u32> = p.sessions.iter().map(|s| s.duration).collect();
        let mut head = vec![0u32; dur.len()];
        for &i in &order {
            head[i] = preds[i]
                .iter()
                .map(|&j| head[j] + dur[j])
                .max()
                .unwrap_or(0);
        }
        let mut tail = vec![0u32; dur.len()];
        for &i in order.iter().rev() {
            tail[i] = dur[i] + succs[i].iter().map(|&j| tail[j]).max().unwrap_or(0);
        }
        Ok(Problem {
            p,
            speakers,
            speaker_names,
            rooms_for,
            preds,
            succs,
            head,
            tail,
            windows,
            work: Cell::new(0),
            work_limit: u64::MAX,
        })
    }

    /// Counts `units` of work against the limit.
    pub(crate) fn spend(&self, units: u64) {
        self.work.set(self.work.get().saturating_add(units));
    }

    /// Past the work limit: the search stops and keeps what it has.
    pub(crate) fn exhausted(&self) -> bool {
        self.work.get() > self.work_limit
    }

    pub(crate) fn n(&self) -> usize {
        self.p.sessions.len()
    }
}

fn unique_ids<'s>(
    ids: impl Iterator<Item = &'s str>,
    what: &str,
    reasons: &mut Vec<Reason>,
) -> BTreeMap<&'s str, usize> {
    let mut map = BTreeMap::new();
    for (i, id) in ids.enumerate() {
        if map.insert(id, i).is_some() {
            reasons.push(Reason::duplicate(what, id));
        }
    }
    map
}

/// Kahn's order, or one cycle (as session indices) when there is none.
fn topological(preds: &[Vec<usize>], succs: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let n = preds.len();
    let mut indeg: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).rev().collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        order.push(i);
        for &j in &succs[i] {
            indeg[j] -= 1;
            if indeg[j] == 0 {
                ready.push(j);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Walk back along unresolved prerequisites until a session repeats: that loop is a cycle.
    let mut at = (0..n).find(|&i| indeg[i] > 0).unwrap();
    let mut seen = vec![usize::MAX; n];
    let mut path = Vec::new();
    while seen[at] == usize::MAX {
        seen[at] = path.len();
        path.push(at);
        at = *preds[at].iter().find(|&&j| indeg[j] > 0).unwrap();
    }
    let mut cycle = path.split_off(seen[at]);
    cycle.reverse();
    Err(cycle)
}
