//! Building a timetable runs the scheduler off the async threads: a program built to be hard
//! (the program tools' caps, 20 people on every session) takes seconds of CPU, and while it
//! runs, other work on the same runtime goes on. The test runs on a current-thread runtime,
//! where a plan on the async thread would stop everything else until it ended.

use planner::{Caller, NewEvent, NewSession, Planner, PlannerError};
use schedule_types::{Break, Day, Room, Window};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use store::{Account, AccountStatus, Accounts, Store};
use store_sqlite::SqliteStore;
use tools::{ActionId, Actor, Ctx};
use transcript::{ConversationId, UserId};

fn caller(action: &str) -> Caller {
    Caller::from_ctx(&Ctx {
        user_id: UserId::from("alice"),
        actor: Actor::Agent,
        action_id: ActionId(action.into()),
        conversation_id: ConversationId::from("conv-alice"),
        call_key: None,
        grant: tools::Grant::default(),
    })
}

/// 31 whole days, 50 rooms, 100 all-day five-minute breaks and 300 sessions of 20 speakers
/// drawn from 40 people: all within what the tools accept.
async fn hard_event(planner: &Planner) -> String {
    let event = planner
        .create_event(
            &caller("a0"),
            NewEvent {
                title: "Everyone everywhere".into(),
                starts_at: "2025-04-12T09:00".into(),
                venue: "Hall".into(),
                capacity: 400,
            },
        )
        .await
        .unwrap();
    let days = 31u32;
    let rooms = (0..50u32)
        .map(|r| Room {
            id: format!("Room {r}"),
            name: format!("Room {r}"),
            capacity: 10 + r * 7,
            windows: (0..days)
                .map(|day| Window {
                    day,
                    start: 0,
                    end: 1440,
                })
                .collect(),
        })
        .collect();
    let breaks = (0..100u32)
        .map(|b| Break {
            id: format!("b{b}"),
            name: "Pause".into(),
            day: b % days,
            earliest: 0,
            latest_end: 1440,
            duration: 5,
        })
        .collect();
    let whole_days = (0..days)
        .map(|_| Day {
            start: 0,
            end: 1440,
        })
        .collect();
    planner
        .set_rooms(&caller("a1"), &event.id, whole_days, rooms, breaks)
        .await
        .unwrap();
    for i in 0..300usize {
        let session = NewSession {
            title: format!("Talk {i}"),
            duration: 30 + (i % 4) as u32 * 15,
            speakers: (0..20)
                .map(|k| format!("p{}", (i * 7 + k * 13) % 40))
                .collect(),
            audience: 5 + (i % 50) as u32 * 5,
            ..NewSession::default()
        };
        planner
            .add_session(&caller(&format!("s{i}")), &event.id, session)
            .await
            .unwrap();
    }
    event.id
}

#[tokio::test]
async fn other_work_goes_on_while_a_hard_program_is_planned() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let account = Account {
        status: AccountStatus::Active,
        ..Account::new("alice", "alice")
    };
    store.put_account(&account).await.unwrap();
    let planner = Planner::new(store as Arc<dyn Store>);
    let event = hard_event(&planner).await;

    let ticks = Arc::new(AtomicU32::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let before = ticks.load(Ordering::Relaxed);
    let started = Instant::now();
    let built = planner.build_schedule(&caller("build"), &event).await;
    let took = started.elapsed();
    let during = ticks.load(Ordering::Relaxed) - before;
    ticker.abort();

    // Whatever the search kept within its work limit, checked and saved; or, with nothing
    // found in time, a sentence. Never minutes of CPU.
    match &built {
        Ok(summary) => assert_eq!(summary.sessions, 300),
        Err(PlannerError::Rule(why)) => assert!(why.contains("too hard to plan"), "{why}"),
        Err(other) => panic!("{other:?}"),
    }
    assert!(
        took > Duration::from_millis(200),
        "the plan must take long enough to matter here: {took:?}"
    );
    // A tick every 5 ms at best; a busy machine may give far fewer, but the plan on this
    // thread would give none at all.
    assert!(
        during >= 20,
        "the runtime went on for {during} ticks in {took:?} of planning"
    );
}
