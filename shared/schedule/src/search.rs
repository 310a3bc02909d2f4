//! The search: validate, check necessary conditions, then run a fixed budget of construction
//! passes (the first unperturbed, the rest with seeded perturbations) and keep the best by
//! (moved sessions, makespan, track gaps). When re-planning, passes first keep every previous
//! place that still holds; if none succeeds, the kept places in the way of the session that got
//! stuck are released (its dependants', then its people's, then its rooms'), and so on.

use serde::{Deserialize, Serialize};

use schedule_types::{Placed, PlacedBreak, Program, Timetable};

use crate::bounds::{bound, event_minute};
use crate::build::{PassInput, Stuck, pass};
use crate::explain::{Infeasible, Reason, clock, necessary, span};
use crate::improve::left_justify;
use crate::index::Problem;
use crate::local::{PACKED, Search, Walk};
use crate::repack::{loaded_speakers, sessions_of};
use crate::rng::{Rng, fingerprint};
use crate::state::{At, State};

/// A timetable, what moved against the previous one, and how good it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub timetable: Timetable,
    /// Sessions that had a place in the previous timetable and now have another.
    pub moved: Vec<Move>,
    /// Sessions that had no place before (new in the program).
    pub added: Vec<String>,
    pub stats: Stats,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Move {
    pub session: String,
    pub from: Placed,
    pub to: Placed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Event minutes (see [`crate::event_minute`]) at the end of the last session.
    pub makespan: u32,
    /// No timetable can finish earlier than this.
    pub lower_bound: u32,
    /// Idle minutes between consecutive sessions of a track on a day, summed.
    pub track_gaps: u32,
    /// Construction passes run.
    pub passes: u32,
    /// Units of work the plan took (slots probed, busy times merged, places checked), a
    /// re-plan's comparison with a fresh plan included when that succeeded; at most
    /// [`WORK_LIMIT`] and a little over.
    pub work: u64,
}

/// Schedules `program`; with `previous`, moves as few sessions as it can.
///
/// A re-plan that had to move sessions is also held against a fresh plan, which left free of
/// the kept places sometimes fits the same edit with fewer moves (or, moving as many, ends
/// sooner); the better of the two by the same order (moves, makespan, track gaps) is returned,
/// with its moves listed against `previous`.
pub fn plan(program: &Program, previous: Option<&Timetable>) -> Result<Plan, Infeasible> {
    plan_within(program, previous, WORK_LIMIT)
}

/// [`plan`] within `work_limit` units of work (see [`Stats::work`]) rather than
/// [`WORK_LIMIT`]: past it, the best timetable found so far, or with none a
/// [`ReasonKind::TooLarge`](crate::ReasonKind::TooLarge) reason.
pub fn plan_within(
    program: &Program,
    previous: Option<&Timetable>,
    work_limit: u64,
) -> Result<Plan, Infeasible> {
    let kept = search(program, previous, work_limit)?;
    let Some(previous) = previous.filter(|_| !kept.moved.is_empty()) else {
        return Ok(kept);
    };
    let left = work_limit.saturating_sub(kept.stats.work);
    let Ok(mut fresh) = search(program, None, left) else {
        return Ok(kept);
    };
    (fresh.moved, fresh.added) = changes(previous, &fresh.timetable.sessions);
    fresh.stats.passes += kept.stats.passes;
    fresh.stats.work += kept.stats.work;
    let rank = |p: &Plan| (p.moved.len(), p.stats.makespan, p.stats.track_gaps);
    Ok(if rank(&fresh) < rank(&kept) {
        fresh
    } else {
        // Both searches' work (the fresh one's total counts the kept one's).
        Plan {
            stats: Stats {
                work: fresh.stats.work,
                ..kept.stats
            },
            ..kept
        }
    })
}

/// The search itself: `plan` without the comparison with a fresh plan, within `work_limit`.
fn search(
    program: &Program,
    previous: Option<&Timetable>,
    work_limit: u64,
) -> Result<Plan, Infeasible> {
    let mut pr = Problem::new(program).map_err(|reasons| Infeasible { reasons })?;
    pr.work_limit = work_limit;
    let pr = pr;
    let reasons = necessary(&pr);
    if !reasons.is_empty() {
        return Err(Infeasible { reasons });
    }
    let lower = bound(&pr);
    let prev = previous.map(|t| previous_places(&pr, t));
    let seed = fingerprint(&[
        format!("{program:?}").as_bytes(),
        format!("{previous:?}").as_bytes(),
    ]);
    let mut rng = Rng::new(seed);
    let budget = budget(pr.n());
    let mut best: Option<(Score, State)> = None;
    let mut stuck: Option<Box<Stuck>>;
    let mut passes = 0;
    let none = vec![None; pr.n()];
    let mut boost = vec![0u64; pr.n()];
    let mut best_input: Option<(Vec<u32>, Vec<u64>, u32)> = None;
    let prev_keep = prev.as_ref().map(|(k, _)| k.as_slice());
    // Re-planning keeps every previous place it can; when no pass succeeds, it releases the
    // kept places in the way of the session that got stuck, and tries again, down to none.
    let mut keep: Vec<Option<At>> = prev
        .as_ref()
        .map_or_else(|| none.clone(), |(k, _)| k.clone());
    loop {
        stuck = None;
        let rounds = if keep == none {
            budget
        } else {
            (budget / 4).max(8)
        };
        for k in 0..rounds {
            passes += 1;
            let breaks = break_starts(&pr, prev.as_ref().map(|(_, b)| b.as_slice()), k, &mut rng);
            let priority = priorities(&pr, k, &boost, &mut rng);
            let spare = if k < 4 {
                SPARE[k as usize]
            } else {
                SPARE[rng.below(4) as usize] + rng.below(7) as u32 * 5
            };
            let input = PassInput {
                break_starts: &breaks,
                keep: &keep,
                priority: &priority,
                spare,
            };
            // A pass that ends past the limit still counts when it placed everything: it
            // stopped probing only after its last placement (a session cut short is stuck,
            // and left-justifying leaves a session where it was).
            match attempt(&pr, &input, prev_keep) {
                Ok((score, st)) => {
                    if best.as_ref().is_none_or(|(b, _)| score < *b) {
                        best = Some((score, st));
                        best_input = Some((breaks, priority, spare));
                    }
                    if best
                        .as_ref()
                        .is_some_and(|(b, _)| b.moved == 0 && b.makespan <= lower && b.gaps == 0)
                    {
                        break;
                    }
                }
                Err(s) => {
                    // Squeaky wheel: the session that got stuck goes earlier next time.
                    boost[s.session] += 30;
                    if stuck
                        .as_ref()
                        .is_none_or(|b| placed(&b.state) < placed(&s.state))
                    {
                        stuck = Some(s);
                    }
                }
            }
            if pr.exhausted() {
                break;
            }
        }
        if best.is_some() || keep == none || pr.exhausted() {
            break;
        }
        let s = stuck.as_ref().map_or(0, |b| b.session);
        release(&pr, &mut keep, s);
    }
    // A fresh plan's flexible breaks are tried at each quarter hour of their span, one break at
    // a time, with the best pass's priorities: a lunch moved earlier can end a day sooner.
    if let (None, Some((mut breaks, priority, spare))) = (&prev, best_input) {
        // Each break's share of the trials: its span at every quarter hour when that fits
        // (every usual program), else evenly spread with a longer step, so a later break (the
        // second day's lunch) is tried as well as an earlier one.
        let share = (MAX_BREAK_TRIALS / (program.breaks.len().max(1) as u32)).max(1);
        for (i, b) in program.breaks.iter().enumerate() {
            let places = (b.latest_end.saturating_sub(b.earliest + b.duration)) / 15 + 1;
            let step = 15 * places.div_ceil(share).max(1);
            let mut start = b.earliest;
            while start + b.duration <= b.latest_end && !pr.exhausted() {
                let mut trial = breaks.clone();
                trial[i] = start;
                start += step;
                passes += 1;
                let input = PassInput {
                    break_starts: &trial,
                    keep: &none,
                    priority: &priority,
                    spare,
                };
                if let Ok((score, st)) = attempt(&pr, &input, None)
                    && best.as_ref().is_none_or(|(b, _)| score < *b)
                {
                    best = Some((score, st));
                    breaks = trial;
                }
            }
        }
        // Last, a local search on the best pass's order (see `Walk::search`). Its own
        // generator, so the passes before it are as they were.
        let mut rng = Rng::new(seed ^ 0x006C_6F63_616C);
        let mut priority = priority;
        let mut walk = Walk {
            pr: &pr,
            breaks: &breaks,
            none: &none,
            spare,
            lower,
            passes,
        };
        // Half the passes again for small programs, an eighth for larger ones, where the time
        // goal (100 times faster than CP-SAT at 100 sessions) binds.
        let rounds = if pr.n() <= 50 { budget / 2 } else { budget / 8 };
        let plain = Search {
            packs: &[],
            rounds,
            crowd: false,
        };
        walk.search(&mut priority, &mut best, plain, &mut rng);
        // Then, unless the makespan is already at its bound, packing: each of the busiest
        // people's sessions first in the order, longest first (see `repack`), and a second
        // local search that also counts the sessions ending last, so that a move emptying the
        // last slot a little counts as progress even before the makespan drops.
        if best.as_ref().is_some_and(|(b, _)| b.makespan > lower) {
            let packs: Vec<Vec<usize>> = loaded_speakers(&pr)
                .into_iter()
                .take(PACKED)
                .map(|k| sessions_of(&pr, k))
                .collect();
            // Past 50 sessions the packing orders alone: the random rounds after them found
            // nothing there in seeds 1-7, and the time goal binds.
            let packed = Search {
                packs: &packs,
                rounds: if pr.n() <= 50 { rounds } else { 0 },
                crowd: true,
            };
            walk.search(&mut priority, &mut best, packed, &mut rng);
        }
        passes = walk.passes;
    }
    match (best, stuck) {
        (Some((score, st)), _) => Ok(finish(&pr, &st, &score, previous, lower, passes)),
        (None, Some(stuck)) if !pr.exhausted() => Err(Infeasible {
            reasons: vec![explain_stuck(&pr, &stuck)],
        }),
        (None, _) => Err(Infeasible {
            reasons: vec![Reason::too_large(&pr)],
        }),
    }
}

/// Minutes a bigger room counts as later, by pass: the first pass takes the earliest slot
/// anywhere, later ones increasingly keep big rooms for big audiences.
const SPARE: [u32; 4] = [0, 30, 60, 90];

/// One pass, left-justified and scored.
pub(crate) fn attempt<'a>(
    pr: &'a Problem<'a>,
    input: &PassInput<'_>,
    prev: Option<&[Option<At>]>,
) -> Result<(Score, State<'a>), Box<Stuck<'a>>> {
    let mut st = pass(pr, input)?;
    let movable: Vec<bool> = (0..pr.n())
        .map(|s| pr.p.sessions[s].fixed_start.is_none() && input.keep[s] != st.at[s])
        .collect();
    left_justify(&mut st, &movable, 3);
    Ok((score(pr, &st, prev, input.break_starts), st))
}

/// Frees kept places in the way of `s`: first its dependants' (they set its deadline), else
/// those of people it shares, else those in rooms it could use; else every kept place.
fn release(pr: &Problem, keep: &mut [Option<At>], s: usize) {
    let mut below = vec![false; pr.n()];
    let mut stack = vec![s];
    while let Some(x) = stack.pop() {
        for &j in &pr.succs[x] {
            if !below[j] {
                below[j] = true;
                stack.push(j);
            }
        }
    }
    let rooms: Vec<Option<usize>> = keep.iter().map(|k| k.map(|a| a.room)).collect();
    let tiers: [&dyn Fn(usize) -> bool; 3] = [
        &|j| below[j],
        &|j| j != s && pr.speakers[j].iter().any(|k| pr.speakers[s].contains(k)),
        &|j| rooms[j].is_some_and(|r| pr.rooms_for[s].contains(&r)),
    ];
    for tier in tiers {
        let hit: Vec<usize> = (0..pr.n())
            .filter(|&j| rooms[j].is_some() && tier(j))
            .collect();
        if !hit.is_empty() {
            for j in hit {
                keep[j] = None;
            }
            return;
        }
    }
    keep.iter_mut().for_each(|k| *k = None);
}

/// The most work a plan may do (a re-plan's comparison with a fresh plan included), in the
/// units of [`Stats::work`]. The search keeps the best timetable found when it gets there, and
/// with none, says the program is too large. Without it, a program built to be hard (20
/// speakers on every session from a pool of 40, over 31 days and 50 rooms) kept a core busy
/// for 420 s, where no timeout can stop it.
pub const WORK_LIMIT: u64 = 200_000_000;

/// The most break placements a fresh plan tries (each a full pass), shared out among the
/// breaks. Without a bound their number is the breaks times the quarter hours of their spans:
/// a hundred all-day breaks would be over three thousand passes.
const MAX_BREAK_TRIALS: u32 = 400;

/// Passes per search: more for small programs, fewer for large ones, always the same number
/// for the same size.
fn budget(n: usize) -> u32 {
    (20_000 / n.max(1)).clamp(24, 1000) as u32
}

fn placed(st: &State) -> usize {
    st.at.iter().filter(|a| a.is_some()).count()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Score {
    pub moved: u32,
    pub makespan: u32,
    pub gaps: u32,
    pub breaks_moved: u32,
}

fn score(pr: &Problem, st: &State, prev: Option<&[Option<At>]>, breaks: &[u32]) -> Score {
    let p = pr.p;
    let at: Vec<At> = st.at.iter().map(|a| a.unwrap()).collect();
    let moved = prev.map_or(0, |prev| {
        prev.iter()
            .zip(&at)
            .filter(|(old, new)| old.is_some_and(|o| o != **new))
            .count() as u32
    });
    let makespan = (0..pr.n())
        .map(|s| event_minute(p, at[s].day, at[s].start + p.sessions[s].duration))
        .max()
        .unwrap_or(0);
    let mut rows: Vec<(&str, u32, u32, u32)> = p
        .sessions
        .iter()
        .enumerate()
        .filter_map(|(s, x)| {
            x.track
                .as_deref()
                .map(|t| (t, at[s].day, at[s].start, at[s].start + x.duration))
        })
        .collect();
    rows.sort_unstable();
    let gaps = rows
        .windows(2)
        .filter(|w| w[0].0 == w[1].0 && w[0].1 == w[1].1)
        .map(|w| w[1].2.saturating_sub(w[0].3))
        .sum();
    let breaks_moved = breaks
        .iter()
        .zip(&p.breaks)
        .filter(|(s, b)| **s != centre(b))
        .count() as u32;
    Score {
        moved,
        makespan,
        gaps,
        breaks_moved,
    }
}

/// The previous timetable's places and break starts, where they still name this program's
/// sessions and rooms (the pass re-checks everything else).
fn previous_places(pr: &Problem, t: &Timetable) -> (Vec<Option<At>>, Vec<u32>) {
    let p = pr.p;
    let keep = p
        .sessions
        .iter()
        .map(|s| {
            let old = t.placed(&s.id)?;
            let room = p.rooms.iter().position(|r| r.id == old.room)?;
            Some(At {
                day: old.day,
                start: old.start,
                room,
            })
        })
        .collect();
    let breaks = p
        .breaks
        .iter()
        .map(|b| {
            t.breaks
                .iter()
                .find(|x| {
                    x.id == b.id
                        && x.day == b.day
                        && x.start >= b.earliest
                        && x.start + b.duration <= b.latest_end
                })
                .map_or_else(|| centre(b), |x| x.start)
        })
        .collect();
    (keep, breaks)
}

/// A flexible break's first choice: the middle of its span, on a 5-minute mark.
fn centre(b: &schedule_types::Break) -> u32 {
    let slack = b.latest_end.saturating_sub(b.earliest + b.duration);
    b.earliest + (slack / 2) / 5 * 5
}

fn break_starts(pr: &Problem, prev: Option<&[u32]>, k: u32, rng: &mut Rng) -> Vec<u32> {
    pr.p.breaks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let slack = b.latest_end.saturating_sub(b.earliest + b.duration);
            if let Some(v) = prev {
                // Re-planning: a break that still fits its span stays where it was.
                v[i]
            } else if k == 0 || slack == 0 || rng.below(3) == 0 {
                centre(b)
            } else {
                b.earliest + (rng.below(u64::from(slack / 5) + 1) as u32) * 5
            }
        })
        .collect()
}

/// Higher first: the longest chain of dependants, then scarce rooms, then long sessions; later
/// passes add seeded noise of up to an hour to the chain length and shuffle the ties, and a
/// session that got a pass stuck is boosted in the passes after.
fn priorities(pr: &Problem, k: u32, boost: &[u64], rng: &mut Rng) -> Vec<u64> {
    let amp = u64::from(k.min(12)) * 5;
    // Minutes of priority per room a session can't use: big audiences go first.
    let scarce_weight = if k == 0 { 0 } else { rng.below(4) * 10 };
    let rooms = pr.p.rooms.len() as u64;
    (0..pr.n())
        .map(|s| {
            let noise = if k == 0 { 0 } else { rng.below(amp + 1) };
            let unusable = rooms - pr.rooms_for[s].len() as u64;
            let chain = u64::from(pr.tail[s]) + noise + boost[s] + scarce_weight * unusable;
            let scarce = 64u64.saturating_sub(pr.rooms_for[s].len() as u64);
            let tie = if k == 0 { 0 } else { rng.below(16) };
            (chain << 24)
                | (scarce << 16)
                | (u64::from(pr.p.sessions[s].duration.min(255)) << 8)
                | tie
        })
        .collect()
}

fn finish(
    pr: &Problem,
    st: &State,
    score: &Score,
    previous: Option<&Timetable>,
    lower: u32,
    passes: u32,
) -> Plan {
    let p = pr.p;
    let sessions: Vec<Placed> = p
        .sessions
        .iter()
        .enumerate()
        .map(|(s, x)| {
            let a = st.at[s].unwrap();
            Placed {
                session: x.id.clone(),
                room: p.rooms[a.room].id.clone(),
                day: a.day,
                start: a.start,
            }
        })
        .collect();
    let breaks = p
        .breaks
        .iter()
        .zip(st.break_starts())
        .map(|(b, start)| PlacedBreak {
            id: b.id.clone(),
            day: b.day,
            start,
        })
        .collect();
    let (moved, added) = previous.map_or_else(Default::default, |prev| changes(prev, &sessions));
    let stats = Stats {
        makespan: score.makespan,
        lower_bound: lower,
        track_gaps: score.gaps,
        passes,
        work: pr.work.get(),
    };
    Plan {
        timetable: Timetable { sessions, breaks },
        moved,
        added,
        stats,
    }
}

/// The sessions placed elsewhere than in `previous`, and those it did not have.
fn changes(previous: &Timetable, sessions: &[Placed]) -> (Vec<Move>, Vec<String>) {
    let mut moved = Vec::new();
    let mut added = Vec::new();
    for now in sessions {
        match previous.placed(&now.session) {
            Some(old) if old != now => moved.push(Move {
                session: now.session.clone(),
                from: old.clone(),
                to: now.clone(),
            }),
            Some(_) => {}
            None => added.push(now.session.clone()),
        }
    }
    (moved, added)
}

/// The best failed pass's stuck session, in numbers: its size and length against what the
/// rooms seating it have left.
fn explain_stuck(pr: &Problem, stuck: &Stuck) -> Reason {
    let s = &pr.p.sessions[stuck.session];
    let (open, used) = stuck.state.room_use(s.audience);
    let after = if s.after.is_empty() {
        String::new()
    } else {
        " after the sessions it must follow".to_string()
    };
    let fixed = match s.fixed_start {
        Some(f) => format!(" at its fixed time (day {} {})", f.day + 1, clock(f.start)),
        None => String::new(),
    };
    let sentence = format!(
        "Couldn't find a place for “{}” ({}, {} people){fixed}{after}: rooms seating {} are open {} in all and {} of that is already taken by other sessions and breaks, with no free {} stretch that also suits its speakers. Add a room, shorten or drop a session, or loosen a fixed time.",
        s.title,
        span(u64::from(s.duration)),
        s.audience,
        s.audience,
        span(open),
        span(used),
        span(u64::from(s.duration)),
    );
    Reason::no_slot(sentence, s)
}
