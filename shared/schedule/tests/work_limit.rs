//! The search's work is bounded whatever the program's shape: a program built to be hard stops
//! at the work limit with a checked timetable or a reason in numbers, the same each time, and a
//! usual program never notices the limit.

use schedule::generate::{conference, crowded};
use schedule::{Plan, ReasonKind, WORK_LIMIT, plan, plan_within};
use schedule_check::verify;

/// What one probe or one busy time read past the limit can add before the search sees it.
const SLACK: u64 = 100_000;

#[test]
fn a_program_built_to_be_hard_stops_at_the_work_limit_with_a_checked_timetable() {
    let p = crowded();
    let plan: Plan = plan(&p, None).expect("a timetable found before the limit");
    assert!(
        (WORK_LIMIT..=WORK_LIMIT + SLACK).contains(&plan.stats.work),
        "the limit is what ended it: {} units",
        plan.stats.work
    );
    verify(&p, &plan.timetable).expect("the checker accepts what the search kept");
    assert_eq!(plan.timetable.sessions.len(), 300);
}

#[test]
fn out_of_work_with_no_timetable_says_so_in_numbers_the_same_each_time() {
    let p = crowded();
    let first = plan_within(&p, None, 100_000).unwrap_err();
    assert_eq!(first.reasons.len(), 1, "{first}");
    assert_eq!(first.reasons[0].kind, ReasonKind::TooLarge);
    let sentence = first.to_string();
    assert!(
        sentence.contains("300 sessions across its 31 days, 50 rooms, up to 20 people on one session and 151 sessions for the busiest person"),
        "{sentence}"
    );
    assert_eq!(
        plan_within(&p, None, 100_000).unwrap_err(),
        first,
        "counted, not timed: the same program stops at the same point"
    );
}

#[test]
fn a_usual_program_plans_the_same_under_any_limit_it_does_not_reach() {
    for (n, seed) in [(20, 1), (100, 3), (300, 7)] {
        let p = conference(n, seed);
        let full = plan(&p, None).unwrap();
        assert!(
            full.stats.work < WORK_LIMIT / 10,
            "{n}: {}",
            full.stats.work
        );
        assert_eq!(plan_within(&p, None, full.stats.work).unwrap(), full, "{n}");
        // A re-plan counts both of its searches (kept places, then fresh) against one limit.
        let mut edited = p.clone();
        edited.sessions[n / 2].duration += 15;
        let again = plan(&edited, Some(&full.timetable)).unwrap();
        assert_eq!(
            plan_within(&edited, Some(&full.timetable), again.stats.work).unwrap(),
            again,
            "{n}"
        );
        let short = plan_within(&edited, Some(&full.timetable), again.stats.work / 2);
        assert_ne!(
            short.as_ref().ok(),
            Some(&again),
            "{n}: half the work is not enough"
        );
    }
}
