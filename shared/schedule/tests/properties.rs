//! Properties over generated conferences (`schedule::generate::conference`): every timetable
//! the scheduler returns passes the independent checker, the checker rejects hand-broken ones,
//! the output is the same byte for byte, re-planning an unchanged program moves nothing, and
//! impossible programs get reasons in numbers, never a panic.

use proptest::prelude::*;
use schedule::generate::conference;
use schedule::plan;
use schedule_check::{Constraint, verify};
use schedule_types::{Program, Timetable, Unavailable};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 12,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_timetable_passes_the_checker(n in 2usize..32, seed in any::<u64>()) {
        let p = conference(n, seed);
        match plan(&p, None) {
            Ok(plan) => {
                if let Err(r) = verify(&p, &plan.timetable) {
                    panic!("{r}");
                }
                prop_assert!(plan.stats.makespan >= plan.stats.lower_bound);
                prop_assert!(plan.moved.is_empty() && plan.added.is_empty());
            }
            // The generator can draw an overbooked speaker; then there must be a reason.
            Err(e) => prop_assert!(!e.reasons.is_empty()),
        }
    }

    #[test]
    fn same_input_same_bytes(n in 2usize..32, seed in any::<u64>()) {
        let p = conference(n, seed);
        let a = serde_json::to_string(&plan(&p, None)).unwrap();
        let b = serde_json::to_string(&plan(&p.clone(), None)).unwrap();
        prop_assert_eq!(a, b);
    }

    #[test]
    fn replanning_an_unchanged_program_moves_nothing(n in 2usize..32, seed in any::<u64>()) {
        let p = conference(n, seed);
        if let Ok(first) = plan(&p, None) {
            let again = plan(&p, Some(&first.timetable)).unwrap();
            prop_assert!(again.moved.is_empty(), "{:?}", again.moved);
            prop_assert_eq!(again.timetable, first.timetable);
        }
    }

    #[test]
    fn the_checker_rejects_each_broken_rule(n in 4usize..32, seed in any::<u64>(), pick in any::<prop::sample::Index>()) {
        let p = conference(n, seed);
        let Ok(good) = plan(&p, None) else { return Ok(()) };
        let t = good.timetable;
        let i = pick.index(n);
        for (rule, (bp, bt)) in broken(&p, &t, i) {
            let r = verify(&bp, &bt).expect_err("a broken timetable must be rejected");
            prop_assert!(r.constraints().contains(&rule), "{:?} not among {}", rule, r);
        }
    }

    #[test]
    fn impossible_programs_are_explained_in_numbers(n in 2usize..40, seed in any::<u64>(), how in 0usize..5) {
        let mut p = conference(n, seed);
        let last = p.sessions.len() - 1;
        match how {
            0 => p.sessions[last].audience = 10_000,
            1 => {
                let first = p.sessions[0].id.clone();
                let last_id = p.sessions[last].id.clone();
                p.sessions[0].after.push(last_id);
                p.sessions[last].after.push(first);
            }
            2 => {
                // Talks for a small audience, added until they need more room time than all the
                // rooms have.
                let supply: u32 = p.rooms.iter().flat_map(|r| &r.windows).map(|w| w.end - w.start).sum();
                for k in 0..supply / 60 + 1 {
                    p.sessions.push(extra(format!("extra-{k}"), vec![]));
                }
            }
            3 => {
                // One speaker with more talks than the event has hours.
                let hours: u32 = p.days.iter().map(|d| d.end - d.start).sum();
                for k in 0..hours / 60 + 1 {
                    p.sessions.push(extra(format!("sam-{k}"), vec!["Sam".into()]));
                }
            }
            _ => p.sessions[last].duration = 600,
        }
        let e = plan(&p, None).expect_err("this program can't be scheduled");
        prop_assert!(!e.reasons.is_empty());
        for r in &e.reasons {
            prop_assert!(r.sentence.chars().any(|c| c.is_ascii_digit()), "no numbers in: {}", r.sentence);
        }
    }
}

fn extra(id: String, speakers: Vec<String>) -> schedule_types::Session {
    schedule_types::Session {
        title: format!("Extra {id}"),
        id,
        duration: 60,
        track: None,
        speakers,
        audience: 1,
        fixed_start: None,
        fixed_room: None,
        after: vec![],
    }
}

/// The good timetable broken in one rule at a time (some rules need an edit of the program to
/// break, e.g. a new prerequisite), with the rule each breaks.
fn broken(p: &Program, t: &Timetable, i: usize) -> Vec<(Constraint, (Program, Timetable))> {
    let mut out = Vec::new();
    let s = &p.sessions[i];
    let at = t.sessions[i].clone();

    let mut bt = t.clone();
    bt.sessions.remove(i);
    out.push((Constraint::EverySessionOnce, (p.clone(), bt)));

    let mut bp = p.clone();
    let room = bp.rooms.iter_mut().find(|r| r.id == at.room).unwrap();
    room.capacity = s.audience.saturating_sub(1);
    if s.audience > 0 {
        out.push((Constraint::RoomSeats, (bp, t.clone())));
    }

    let mut bt = t.clone();
    bt.sessions[i].start = p.days[at.day as usize].end - s.duration + 5;
    out.push((Constraint::RoomOpen, (p.clone(), bt)));

    // Another session put exactly on this one's slot, in its room.
    let j = (i + 1) % p.sessions.len();
    let mut bt = t.clone();
    bt.sessions[j].room = at.room.clone();
    bt.sessions[j].day = at.day;
    bt.sessions[j].start = at.start;
    out.push((Constraint::RoomOnce, (p.clone(), bt)));

    // The same person in this session and in another at the same time.
    let mut bp = p.clone();
    let mut bt = t.clone();
    bp.sessions[j].speakers.push("Everywhere Ed".into());
    bp.sessions[i].speakers.push("Everywhere Ed".into());
    bt.sessions[j].day = at.day;
    bt.sessions[j].start = at.start;
    out.push((Constraint::PersonOnce, (bp, bt)));

    let mut bp = p.clone();
    bp.sessions[i].speakers.push("Away Al".into());
    bp.unavailable.push(Unavailable {
        speaker: "Away Al".into(),
        day: at.day,
        start: at.start,
        end: at.start + 1,
    });
    out.push((Constraint::SpeakerAvailable, (bp, t.clone())));

    // A new prerequisite that ends after this session starts: the latest-ending other session.
    let k = (0..p.sessions.len())
        .filter(|&k| k != i)
        .max_by_key(|&k| {
            (
                t.sessions[k].day,
                t.sessions[k].start + p.sessions[k].duration,
            )
        })
        .unwrap();
    let (kd, ke) = (
        t.sessions[k].day,
        t.sessions[k].start + p.sessions[k].duration,
    );
    if (kd, ke) > (at.day, at.start) {
        let mut bp = p.clone();
        bp.sessions[i].after.push(p.sessions[k].id.clone());
        out.push((Constraint::Order, (bp, t.clone())));
    }

    if let Some(b) = t.breaks.first() {
        let mut bt = t.clone();
        bt.sessions[i].day = b.day;
        bt.sessions[i].start = b.start;
        out.push((Constraint::Breaks, (p.clone(), bt)));
    }

    // Keynotes are fixed at 09:00 in the big room.
    let mut bt = t.clone();
    bt.sessions[0].start += 5;
    out.push((Constraint::Fixed, (p.clone(), bt)));
    out
}

#[test]
fn generated_conferences_are_mostly_feasible() {
    // The properties above skip infeasible draws; make sure they are rare, so they test much.
    let ok = (0..16u64)
        .filter(|&seed| plan(&conference(12, seed), None).is_ok())
        .count();
    assert!(ok >= 14, "only {ok} of 16 were feasible");
}
