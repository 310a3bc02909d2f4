//! At most [`plans_at_once`] timetable plans run at once across the process, one owner's one
//! at a time, and a plan that finds no place within [`PLAN_WAIT`] is refused: a build then says so, and a risk judgement
//! that needed a dry run holds its call. A test binary of its own: the places are the
//! process's, and another test's plan would take one.

use planner::plan_threads::{PLAN_WAIT, PlansBusy, on_a_plan_thread, plans_at_once};
use planner::{Caller, NewEvent, NewSession, Planner, PlannerError};
use schedule_types::{Day, Room, Window};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use store::{Account, Accounts, Store};
use store_sqlite::SqliteStore;
use tools::{ActionId, Actor, Ctx};

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
    let gave_up =
        tokio::time::timeout(Duration::from_millis(10), on_a_plan_thread("first", work())).await;
    assert!(gave_up.is_err(), "the first caller gave up waiting");
    let started = Instant::now();
    while running.load(Ordering::SeqCst) == 0 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(running.load(Ordering::SeqCst), 1, "its plan runs on");
    let asked = 4 * plans_at_once();
    // Each of another owner (one owner's plans run one at a time: below).
    let plans: Vec<_> = (0..asked)
        .map(|i| {
            let work = work();
            tokio::spawn(async move { on_a_plan_thread(&format!("owner-{i}"), work).await })
        })
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

fn ctx(action: &str) -> Ctx {
    Ctx {
        user_id: "alice".into(),
        actor: Actor::Agent,
        action_id: ActionId(action.into()),
        conversation_id: "conv-alice".into(),
        call_key: None,
        grant: tools::Grant::default(),
    }
}

/// A published event whose one-session program has a saved timetable: re-planning it is judged
/// by a dry run.
async fn published_and_planned() -> (Planner, String) {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .put_account(&Account::new("alice", "Alice"))
        .await
        .unwrap();
    let planner = Planner::new(store as Arc<dyn Store>);
    let event = planned(&planner, "a", "Spring Open", true).await;
    (planner, event)
}

/// An event of alice's whose one-session program has a saved timetable, published if
/// `publish` (its actions' ids begin with `prefix`).
async fn planned(planner: &Planner, prefix: &str, title: &str, publish: bool) -> String {
    let caller = |action: &str| Caller::from_ctx(&ctx(&format!("{prefix}{action}")));
    let event = planner
        .create_event(
            &caller("a0"),
            NewEvent {
                title: title.into(),
                starts_at: "2030-04-12T09:00".into(),
                venue: "Court 1".into(),
                capacity: 200,
            },
        )
        .await
        .unwrap()
        .id;
    let hall = Room {
        id: "hall".into(),
        name: "Hall".into(),
        capacity: 150,
        windows: vec![Window {
            day: 0,
            start: 540,
            end: 780,
        }],
    };
    let day = Day {
        start: 540,
        end: 780,
    };
    planner
        .set_rooms(&caller("a1"), &event, vec![day], vec![hall], vec![])
        .await
        .unwrap();
    let keynote = NewSession {
        title: "Keynote".into(),
        duration: 60,
        audience: 100,
        ..NewSession::default()
    };
    planner
        .add_session(&caller("a2"), &event, keynote)
        .await
        .unwrap();
    if publish {
        planner.publish_event(&caller("a3"), &event).await.unwrap();
    }
    planner.build_schedule(&caller("a4"), &event).await.unwrap();
    event
}

/// Every place taken for longer than a plan may wait: the next plan is refused once the wait
/// is over, and never runs; the places' own plans finish. Meanwhile a build is refused with
/// the busy sentence, and a re-plan's risk judgement, which needs a dry run, holds the call
/// (fails closed) rather than letting it through unjudged. A draft's re-plan is judged at
/// once, with no dry run: nothing people planned around moves, so no plan is made for it.
async fn a_plan_that_finds_no_place_in_time_is_refused() {
    let (planner, event) = published_and_planned().await;
    let draft = planned(&planner, "d", "Autumn Draft", false).await;
    let ran = Arc::new(AtomicU32::new(0));
    let long = |ran: Arc<AtomicU32>| {
        move || {
            // Long past the wait: the build and the judgement first read the store (a loaded
            // machine may take a while), then wait no longer than PLAN_WAIT.
            std::thread::sleep(PLAN_WAIT + Duration::from_secs(3));
            ran.fetch_add(1, Ordering::SeqCst);
        }
    };
    let taken: Vec<_> = (0..plans_at_once())
        .map(|i| {
            let long = long(ran.clone());
            tokio::spawn(async move { on_a_plan_thread(&format!("holder-{i}"), long).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    let plain = on_a_plan_thread("someone", {
        let ran = ran.clone();
        move || ran.fetch_add(100, Ordering::SeqCst)
    });
    let (builder, judge) = (Caller::from_ctx(&ctx("b1")), ctx("b2"));
    let replan = json!({"event_id": event});
    let build = planner.build_schedule(&builder, &event);
    let judged = planner.assess_risk(&judge, "build_schedule", &replan);
    let draft_judged = async {
        let (replan, judge) = (json!({"event_id": draft}), ctx("b3"));
        let judged = planner.assess_risk(&judge, "build_schedule", &replan).await;
        (judged, asked.elapsed())
    };
    let (refused, built, held, (draft_judged, draft_took)) =
        tokio::join!(plain, build, judged, draft_judged);
    assert_eq!(draft_judged, None, "a draft's re-plan needs no yes");
    assert!(
        draft_took < PLAN_WAIT / 2,
        "judged without waiting for a plan: {draft_took:?}"
    );
    assert_eq!(refused, Err(PlansBusy));
    assert!(asked.elapsed() >= PLAN_WAIT - Duration::from_millis(50));
    assert!(matches!(built, Err(PlannerError::Busy)), "{built:?}");
    let held = held.expect("held without its dry run");
    assert!(
        held.starts_with("Run build_schedule now") && held.contains("too busy"),
        "{held}"
    );
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
    one_owners_many_plans_hold_up_anothers_by_one_at_most().await;
}

/// One owner asking for many plans at once (a user's twenty MCP tokens looping builds of a hard
/// program) is one in the queue for a place, not many: another owner's plan, asked after all
/// of theirs, runs after at most one more of them, not after every one.
async fn one_owners_many_plans_hold_up_anothers_by_one_at_most() {
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let work = |who: &'static str| {
        let order = order.clone();
        move || {
            std::thread::sleep(Duration::from_millis(100));
            order.lock().unwrap().push(who);
        }
    };
    // A fixed few: one owner's run one after another, each within the wait.
    let many = 5;
    let theirs: Vec<_> = (0..many)
        .map(|_| {
            let work = work("bob");
            tokio::spawn(async move { on_a_plan_thread("bob", work).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    on_a_plan_thread("ana", work("ana"))
        .await
        .expect("a place in time");
    for plan in theirs {
        plan.await
            .unwrap()
            .expect("bob's own plans wait for each other, in time");
    }
    let order = order.lock().unwrap().clone();
    let ana = order.iter().position(|w| *w == "ana").unwrap();
    assert!(ana <= 2, "ana's plan ran after {ana} of bob's: {order:?}");
}
