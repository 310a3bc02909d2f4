//! The local search after construction: it changes the best pass's order a little at a time
//! (mostly the sessions around those that end last) and keeps each change that is no worse,
//! and it tries packing orders (see [`crate::repack`]) for the busiest people.

use crate::bounds::event_minute;
use crate::build::PassInput;
use crate::index::Problem;
use crate::repack::longest_first;
use crate::rng::Rng;
use crate::search::{Score, attempt};
use crate::state::{At, State};

/// How many of the busiest people the packing moves try.
pub(crate) const PACKED: usize = 8;

/// The local search's fixed inputs and its pass count.
pub(crate) struct Walk<'a, 'b> {
    pub pr: &'a Problem<'a>,
    pub breaks: &'b [u32],
    pub none: &'b [Option<At>],
    pub spare: u32,
    pub lower: u32,
    pub passes: u32,
}

/// How the local search compares orders: the score, with (when `crowd` is on) the number of
/// sessions ending last counted just after the makespan, so a move that empties the last slot
/// a little counts as progress even when the makespan is still the same.
type Key = (u32, u32, u32, u32, u32);

impl<'a> Walk<'a, '_> {
    pub(crate) fn done(&self, best: &Option<(Score, State<'a>)>) -> bool {
        best.as_ref()
            .is_some_and(|(b, _)| b.makespan <= self.lower && b.gaps == 0)
    }

    fn run(&mut self, order: &[u64]) -> Option<(Score, State<'a>)> {
        self.passes += 1;
        let input = PassInput {
            break_starts: self.breaks,
            keep: self.none,
            priority: order,
            spare: self.spare,
        };
        attempt(self.pr, &input, None).ok()
    }

    fn key(&self, score: &Score, st: &State, crowd: bool) -> Key {
        let last = if crowd {
            ending_at(self.pr, st, score.makespan)
        } else {
            0
        };
        (
            score.moved,
            score.makespan,
            last,
            score.gaps,
            score.breaks_moved,
        )
    }

    /// A local search on `priority`: a few sessions, mostly around those that end last, go
    /// earlier in the order or swap places with others; an order that is no worse by
    /// [`Walk::key`] becomes the one to change next, and `best` keeps the best by score.
    /// `packs` are tried first, in turn, the same way.
    pub(crate) fn search(
        &mut self,
        priority: &mut Vec<u64>,
        best: &mut Option<(Score, State<'a>)>,
        search: Search<'_>,
        rng: &mut Rng,
    ) {
        let Some((score, st)) = best.as_ref() else {
            return;
        };
        let mut cur = self.key(score, st, search.crowd);
        let mut crit = critical(self.pr, st);
        for k in 0..search.packs.len() + search.rounds as usize {
            if self.done(best) || self.pr.exhausted() {
                break;
            }
            let trial = match search.packs.get(k) {
                Some(group) => longest_first(priority, group, self.pr),
                None => mutate(priority, &crit, rng),
            };
            let Some((score, st)) = self.run(&trial) else {
                continue;
            };
            let key = self.key(&score, &st, search.crowd);
            if key > cur {
                continue;
            }
            if key < cur {
                crit = critical(self.pr, &st);
            }
            cur = key;
            *priority = trial;
            if best.as_ref().is_none_or(|(b, _)| score <= *b) {
                *best = Some((score, st));
            }
        }
    }
}

/// One run of the local search: groups of sessions to pack first, then `rounds` random moves.
pub(crate) struct Search<'g> {
    pub packs: &'g [Vec<usize>],
    pub rounds: u32,
    pub crowd: bool,
}

/// How many sessions end at `makespan` (event minutes).
fn ending_at(pr: &Problem, st: &State, makespan: u32) -> u32 {
    (0..pr.n())
        .filter(|&s| {
            let a = st.at[s].unwrap();
            event_minute(pr.p, a.day, a.start + pr.p.sessions[s].duration) == makespan
        })
        .count() as u32
}

/// The sessions that end last, with those sharing a speaker, a prerequisite link or a room and
/// day with them: moving one of these earlier in the order may end the event sooner.
fn critical(pr: &Problem, st: &State) -> Vec<usize> {
    let p = pr.p;
    let ends: Vec<u32> = (0..pr.n())
        .map(|s| {
            let a = st.at[s].unwrap();
            event_minute(p, a.day, a.start + p.sessions[s].duration)
        })
        .collect();
    let last = ends.iter().copied().max().unwrap_or(0);
    let mut out: Vec<usize> = Vec::new();
    for s in (0..pr.n()).filter(|&s| ends[s] == last) {
        let a = st.at[s].unwrap();
        out.extend((0..pr.n()).filter(|&j| {
            let b = st.at[j].unwrap();
            j == s
                || pr.preds[s].contains(&j)
                || pr.speakers[j].iter().any(|k| pr.speakers[s].contains(k))
                || (b.room == a.room && b.day == a.day)
        }));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// A neighbour of an order: one to three sessions (mostly from `crit`) moved to the front, or
/// swapped with another.
fn mutate(priority: &[u64], crit: &[usize], rng: &mut Rng) -> Vec<u64> {
    let mut out = priority.to_vec();
    let n = out.len() as u64;
    if n < 2 {
        return out;
    }
    let top = out.iter().copied().max().unwrap_or(0);
    for _ in 0..=rng.below(3) {
        let a = if !crit.is_empty() && rng.below(3) > 0 {
            crit[rng.below(crit.len() as u64) as usize]
        } else {
            rng.below(n) as usize
        };
        if rng.below(2) == 0 {
            out[a] = top + 1 + rng.below(16);
        } else {
            let b = rng.below(n) as usize;
            out.swap(a, b);
        }
    }
    out
}
