//! One construction pass: breaks, then fixed sessions, then the previous timetable's places
//! that still hold, then every other session in priority order at its earliest feasible slot.

use crate::index::Problem;
use crate::state::{At, State, global};

/// What a pass is told: where breaks go, which places to keep, and each session's priority
/// (higher goes first among those whose prerequisites are placed).
#[derive(Debug)]
pub(crate) struct PassInput<'x> {
    pub break_starts: &'x [u32],
    pub keep: &'x [Option<At>],
    pub priority: &'x [u64],
    /// Minutes a bigger room counts as later than a smaller one (see `State::earliest_sparing`).
    pub spare: u32,
}

/// A pass that could not place `session`; `state` is as far as it got.
#[derive(Debug)]
pub(crate) struct Stuck<'a> {
    pub session: usize,
    pub state: State<'a>,
}

pub(crate) fn pass<'a>(
    pr: &'a Problem<'a>,
    input: &PassInput<'_>,
) -> Result<State<'a>, Box<Stuck<'a>>> {
    let p = pr.p;
    let mut st = State::new(pr, input.break_starts);
    for (s, sess) in p.sessions.iter().enumerate() {
        let Some(f) = sess.fixed_start else { continue };
        let mut rooms: Vec<usize> = pr.rooms_for[s].clone();
        rooms.sort_by_key(|&r| {
            (
                input.keep[s].map(|k| k.room) != Some(r),
                p.rooms[r].capacity,
                r,
            )
        });
        let found = rooms
            .into_iter()
            .map(|room| At {
                day: f.day,
                start: f.start,
                room,
            })
            .find(|&at| st.fits(s, at));
        match found {
            Some(at) => st.place(s, at),
            None => {
                return Err(Box::new(Stuck {
                    session: s,
                    state: st,
                }));
            }
        }
    }
    let mut kept: Vec<(At, usize)> = input
        .keep
        .iter()
        .enumerate()
        .filter(|(s, _)| st.at[*s].is_none())
        .filter_map(|(s, k)| k.map(|at| (at, s)))
        .collect();
    kept.sort_unstable_by_key(|(at, s)| (at.day, at.start, *s));
    for (at, s) in kept {
        if st.fits(s, at) {
            st.place(s, at);
        }
    }
    let latest = latest_ends(pr, &st);
    let mut waiting: Vec<usize> = (0..pr.n())
        .map(|s| pr.preds[s].iter().filter(|&&j| st.at[j].is_none()).count())
        .collect();
    let mut ready: Vec<usize> = (0..pr.n())
        .filter(|&s| st.at[s].is_none() && waiting[s] == 0)
        .collect();
    let release = |st: &State, s: usize| {
        pr.preds[s]
            .iter()
            .filter_map(|&j| st.end(j))
            .max()
            .unwrap_or(0)
    };
    while !ready.is_empty() {
        let k = (0..ready.len())
            .max_by_key(|&k| (input.priority[ready[k]], std::cmp::Reverse(ready[k])))
            .unwrap();
        let s = ready.swap_remove(k);
        let found = st.earliest_sparing(s, release(&st, s), input.spare);
        let end_ok = |at: At| global(at.day, at.start + p.sessions[s].duration) <= latest[s];
        let at = match found {
            Some(at) if end_ok(at) => at,
            _ => {
                return Err(Box::new(Stuck {
                    session: s,
                    state: st,
                }));
            }
        };
        st.place(s, at);
        for &j in &pr.succs[s] {
            waiting[j] -= 1;
            if waiting[j] == 0 && st.at[j].is_none() {
                ready.push(j);
            }
        }
    }
    Ok(st)
}

/// For each unplaced session, the latest global minute it may end so that dependants already
/// placed (fixed or kept) can still start on time.
fn latest_ends(pr: &Problem, st: &State) -> Vec<u64> {
    let mut latest = vec![u64::MAX; pr.n()];
    let mut done = vec![false; pr.n()];
    fn visit(s: usize, pr: &Problem, st: &State, latest: &mut [u64], done: &mut [bool]) -> u64 {
        if done[s] {
            return latest[s];
        }
        let mut l = u64::MAX;
        for &j in &pr.succs[s] {
            let by = match st.at[j] {
                Some(a) => global(a.day, a.start),
                None => visit(j, pr, st, latest, done)
                    .saturating_sub(u64::from(pr.p.sessions[j].duration)),
            };
            l = l.min(by);
        }
        latest[s] = l;
        done[s] = true;
        l
    }
    for s in 0..pr.n() {
        visit(s, pr, st, &mut latest, &mut done);
    }
    latest
}
