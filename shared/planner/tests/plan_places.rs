//! At most [`plans_at_once`] timetable plans run at once across the process, and a plan that
//! finds no place within [`PLAN_WAIT`] is refused. A test binary of its own: the places are the
//! process's, and another test's plan would take one.

use planner::plan_threads::{PLAN_WAIT, PlansBusy, on_a_plan_thread, plans_at_once};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// However many plans are asked for at once (turns and MCP tokens building or dry-running),
/// at most [`plans_at_once`] run; the rest wait their turn and all finish. A caller that gives
/// up waiting frees nothing that still runs: the place is the thread's until its plan ends.
async fn at_most_the_plan_places_run_at_once() {
    let running = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let finished = Arc::new(AtomicU32::new(0));
    let work = || {
        let (running, most, finished) = (running.clone(), most.clone(), finished.clone());
        move || {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(60));
            running.fetch_sub(1, Ordering::SeqCst);
            finished.fetch_add(1, Ordering::SeqCst);
        }
    };
    // The first caller gets a place, then gives up waiting while its plan still runs.
    let gave_up = tokio::time::timeout(Duration::from_millis(10), on_a_plan_thread(work())).await;
    assert!(gave_up.is_err(), "the first caller gave up waiting");
    let started = Instant::now();
    while running.load(Ordering::SeqCst) == 0 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(running.load(Ordering::SeqCst), 1, "its plan runs on");
    let asked = 4 * plans_at_once();
    let plans: Vec<_> = (0..asked)
        .map(|_| tokio::spawn(on_a_plan_thread(work())))
        .collect();
    for plan in plans {
        plan.await.unwrap().expect("a place came free in time");
    }
    let most = most.load(Ordering::SeqCst) as usize;
    assert!(most >= 1 && most <= plans_at_once(), "{most} at once");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        finished.load(Ordering::SeqCst) as usize,
        asked + 1,
        "all ran to their end"
    );
    assert!(plans_at_once() < std::thread::available_parallelism().unwrap().get().max(2));
}

/// Every place taken for longer than a plan may wait: the next plan is refused once the wait
/// is over, and never runs; the places' own plans finish.
async fn a_plan_that_finds_no_place_in_time_is_refused() {
    let ran = Arc::new(AtomicU32::new(0));
    let long = |ran: Arc<AtomicU32>| {
        move || {
            std::thread::sleep(PLAN_WAIT + Duration::from_millis(800));
            ran.fetch_add(1, Ordering::SeqCst);
        }
    };
    let taken: Vec<_> = (0..plans_at_once())
        .map(|_| tokio::spawn(on_a_plan_thread(long(ran.clone()))))
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    let refused = on_a_plan_thread({
        let ran = ran.clone();
        move || ran.fetch_add(100, Ordering::SeqCst)
    })
    .await;
    assert_eq!(refused, Err(PlansBusy));
    assert!(asked.elapsed() >= PLAN_WAIT - Duration::from_millis(50));
    for plan in taken {
        plan.await.unwrap().unwrap();
    }
    assert_eq!(
        ran.load(Ordering::SeqCst) as usize,
        plans_at_once(),
        "the refused plan never ran"
    );
}

/// The two in turn: the places are the process's, so they must not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_places_bound_and_refuse() {
    at_most_the_plan_places_run_at_once().await;
    a_plan_that_finds_no_place_in_time_is_refused().await;
}
