//! An event's program and timetable on a real (in-memory) SQLite store: the program records,
//! building with the scheduler and the checker, moving, showing, the ownership gate, the risk
//! of re-planning a published program, and undo restoring the previous timetable.

use planner::{
    Caller, NewEvent, NewSession, Planner, PlannerError, SCHEDULE, ScheduleRecord, SessionChanges,
};
use schedule_types::{Break, Day, Room, Slot, Window};
use serde_json::{Value, json};
use std::sync::Arc;
use store::{Account, AccountStatus, Accounts, Records, Store, UndoScope};
use store_sqlite::SqliteStore;
use tools::{ActionId, Actor, Ctx};
use transcript::{ConversationId, UserId};

struct World {
    store: Arc<SqliteStore>,
    planner: Planner,
}

async fn world() -> World {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    for user in ["alice", "bob"] {
        let account = Account {
            status: AccountStatus::Active,
            ..Account::new(user, user)
        };
        store.put_account(&account).await.unwrap();
    }
    let planner = Planner::new(store.clone() as Arc<dyn Store>);
    World { store, planner }
}

fn ctx(user: &str, action: &str) -> Ctx {
    Ctx {
        user_id: UserId::from(user),
        actor: Actor::Agent,
        action_id: ActionId(action.into()),
        conversation_id: ConversationId::from(format!("conv-{user}")),
        call_key: None,
        grant: tools::Grant::default(),
    }
}

fn caller(user: &str, action: &str) -> Caller {
    Caller::from_ctx(&ctx(user, action))
}

fn here(user: &str) -> UndoScope {
    UndoScope::Conversation(ConversationId::from(format!("conv-{user}")))
}

/// 09:00–13:00 on one day; a big hall and a small room; coffee "around 10:30, 15 min"
/// (between 10:00 and 11:15).
async fn spring_with_rooms(w: &World) -> String {
    spring_titled(w, "Spring Open").await
}

/// [`spring_with_rooms`] under another title (one owner's events may not read alike).
async fn spring_titled(w: &World, title: &str) -> String {
    let alice = caller("alice", "a0");
    let event = w
        .planner
        .create_event(
            &alice,
            NewEvent {
                title: title.into(),
                starts_at: "2025-04-12T09:00".into(),
                venue: "Court 1".into(),
                capacity: 200,
            },
        )
        .await
        .unwrap();
    let room = |name: &str, capacity| Room {
        id: name.into(),
        name: name.into(),
        capacity,
        windows: vec![Window {
            day: 0,
            start: 540,
            end: 780,
        }],
    };
    let coffee = Break {
        id: "b1".into(),
        name: "Coffee".into(),
        day: 0,
        earliest: 600,
        latest_end: 675,
        duration: 15,
    };
    w.planner
        .set_rooms(
            &caller("alice", "a1"),
            &event.id,
            vec![Day {
                start: 540,
                end: 780,
            }],
            vec![room("Hall", 150), room("Studio", 30)],
            vec![coffee],
        )
        .await
        .unwrap();
    event.id
}

fn talk(title: &str, minutes: u32, audience: u32, after: &[&str]) -> NewSession {
    NewSession {
        title: title.into(),
        duration: minutes,
        track: Some("Main".into()),
        speakers: vec![format!("{title} speaker")],
        audience,
        after: after.iter().map(|s| (*s).to_owned()).collect(),
        ..NewSession::default()
    }
}

async fn add(w: &World, event: &str, action: &str, session: NewSession) -> String {
    w.planner
        .add_session(&caller("alice", action), event, session)
        .await
        .unwrap()
        .session_id
        .unwrap()
}

async fn saved(w: &World, event: &str) -> Option<ScheduleRecord> {
    let record = w.store.record(SCHEDULE, event).await.unwrap()?;
    Some(serde_json::from_value(record.value).unwrap())
}

#[tokio::test]
async fn a_program_built_by_calls_gets_a_checked_timetable_with_a_short_headline() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    let keynote = add(&w, &event, "a2", talk("Keynote", 60, 120, &[])).await;
    let panel = add(&w, &event, "a3", talk("Panel", 45, 100, &[&keynote])).await;
    let mut workshop = talk("Workshop", 90, 20, &[]);
    workshop.track = Some("Hands-on".into());
    add(&w, &event, "a4", workshop).await;

    let built = w
        .planner
        .build_schedule(&caller("alice", "a5"), &event)
        .await
        .unwrap();
    assert_eq!(built.sessions, 3);
    assert_eq!(built.added, 3, "a first build places every session");
    assert_eq!(built.moved, 0);
    assert_eq!(built.finishes.len(), 1);
    assert!(built.finishes[0].as_str() <= "13:00", "{built:?}");

    let table = saved(&w, &event).await.expect("the timetable is saved");
    let start = |id: &str| table.timetable.placed(id).unwrap().start;
    assert!(
        start(&panel) >= start(&keynote) + 60,
        "the panel follows the keynote"
    );
    assert_eq!(table.timetable.placed(&keynote).unwrap().room, "Hall");

    let main = w
        .planner
        .show_schedule(&caller("alice", "r1"), &event, None, Some("Main"))
        .await
        .unwrap();
    let titles: Vec<&str> = main.iter().map(|l| l.what.as_str()).collect();
    assert_eq!(titles, ["Keynote", "Panel"]);
    let day = w
        .planner
        .show_schedule(&caller("alice", "r2"), &event, Some(1), None)
        .await
        .unwrap();
    assert_eq!(day.len(), 4, "three sessions and the coffee break: {day:?}");
    assert!(day.iter().any(|l| l.what == "Coffee" && l.room.is_none()));
    let other_day = w
        .planner
        .show_schedule(&caller("alice", "r3"), &event, Some(2), None)
        .await
        .unwrap();
    assert!(other_day.is_empty());
}

#[tokio::test]
async fn an_impossible_program_saves_nothing_and_says_why_in_numbers() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    add(&w, &event, "a2", talk("Keynote", 60, 400, &[])).await;
    let err = w
        .planner
        .build_schedule(&caller("alice", "a3"), &event)
        .await
        .unwrap_err();
    let PlannerError::Rule(sentence) = err else {
        panic!("expected a rule, got {err:?}");
    };
    assert!(sentence.starts_with("No timetable fits"), "{sentence}");
    assert!(
        sentence.contains("400"),
        "the audience is named: {sentence}"
    );
    assert!(saved(&w, &event).await.is_none());
}

#[tokio::test]
async fn bad_program_input_is_refused_with_a_sentence() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    let unknown_room = NewSession {
        fixed_room: Some("Attic".into()),
        ..talk("Keynote", 60, 10, &[])
    };
    let err = w
        .planner
        .add_session(&caller("alice", "a2"), &event, unknown_room)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), "There is no room named Attic.");
    let err = w
        .planner
        .add_session(
            &caller("alice", "a3"),
            &event,
            talk("Panel", 45, 10, &["ss-nope"]),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "There is no session with id ss-nope to come after."
    );
    let err = w
        .planner
        .set_rooms(&caller("alice", "a4"), &event, vec![], vec![], vec![])
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "An event's program needs at least one day."
    );
    let err = w
        .planner
        .show_schedule(&caller("alice", "a5"), &event, None, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "This event has no timetable yet: build it first."
    );
}

#[tokio::test]
async fn another_users_program_reads_as_absent() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    add(&w, &event, "a2", talk("Keynote", 60, 10, &[])).await;
    let bob = caller("bob", "b1");
    let err = w
        .planner
        .add_session(&bob, &event, talk("Intruder", 30, 1, &[]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, PlannerError::NotFound { kind: "event", .. }),
        "{err:?}"
    );
    let err = w.planner.build_schedule(&bob, &event).await.unwrap_err();
    assert!(matches!(err, PlannerError::NotFound { .. }), "{err:?}");
    let err = w
        .planner
        .show_schedule(&bob, &event, None, None)
        .await
        .unwrap_err();
    assert!(
        matches!(err, PlannerError::Rule(_)),
        "no program of bob's: {err:?}"
    );
    assert!(saved(&w, &event).await.is_none());
}

#[tokio::test]
async fn a_rebuild_moves_few_sessions_and_undo_restores_the_previous_timetable() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    let keynote = add(&w, &event, "a2", talk("Keynote", 60, 120, &[])).await;
    add(&w, &event, "a3", talk("Panel", 45, 100, &[&keynote])).await;
    w.planner
        .build_schedule(&caller("alice", "a4"), &event)
        .await
        .unwrap();
    let first = saved(&w, &event).await.unwrap();

    add(&w, &event, "a5", talk("Lightning", 15, 20, &[])).await;
    let again = w
        .planner
        .build_schedule(&caller("alice", "a6"), &event)
        .await
        .unwrap();
    assert_eq!((again.added, again.moved), (1, 0), "{again:?}");
    assert_ne!(saved(&w, &event).await.unwrap(), first);

    let answer = w
        .planner
        .undo(&caller("alice", "a7"), here("alice"))
        .await
        .unwrap();
    assert!(answer.starts_with("Undone"), "{answer}");
    assert_eq!(saved(&w, &event).await.unwrap(), first);
}

#[tokio::test]
async fn moving_a_session_pins_it_and_undo_restores_program_and_timetable() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    let keynote = add(&w, &event, "a2", talk("Keynote", 60, 120, &[])).await;
    let panel = add(&w, &event, "a3", talk("Panel", 45, 100, &[])).await;
    w.planner
        .build_schedule(&caller("alice", "a4"), &event)
        .await
        .unwrap();
    let first = saved(&w, &event).await.unwrap();

    let at = Slot { day: 0, start: 720 };
    w.planner
        .move_session(
            &caller("alice", "a5"),
            &event,
            &panel,
            at,
            Some("Hall".into()),
        )
        .await
        .unwrap();
    let placed = saved(&w, &event).await.unwrap();
    let p = placed.timetable.placed(&panel).unwrap();
    assert_eq!((p.start, p.room.as_str()), (720, "Hall"));
    assert!(placed.timetable.placed(&keynote).is_some());

    let err = w
        .planner
        .move_session(
            &caller("alice", "a6"),
            &event,
            &keynote,
            Slot { day: 0, start: 750 },
            None,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("No timetable fits"), "{err}");
    assert_eq!(
        saved(&w, &event).await.unwrap(),
        placed,
        "a failed move saves nothing"
    );

    w.planner
        .undo(&caller("alice", "a7"), here("alice"))
        .await
        .unwrap();
    assert_eq!(saved(&w, &event).await.unwrap(), first);
    // The pin went with it: editing the panel now does not carry a fixed start.
    let summary = w
        .planner
        .edit_session(
            &caller("alice", "a8"),
            &event,
            &panel,
            SessionChanges {
                title: Some("Open panel".into()),
                ..SessionChanges::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(summary.sessions, 2);
    let record = w
        .store
        .record(planner::PROGRAM, &event)
        .await
        .unwrap()
        .unwrap();
    let pinned = &record.value["program"]["sessions"][1];
    assert_eq!(pinned["title"], "Open panel");
    assert!(pinned["fixed_start"].is_null(), "{pinned}");
}

#[tokio::test]
async fn re_planning_a_published_program_needs_a_yes_described_from_the_database() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    let keynote = add(&w, &event, "a2", talk("Keynote", 60, 120, &[])).await;
    add(&w, &event, "a3", talk("Panel", 45, 100, &[&keynote])).await;
    let alice = ctx("alice", "r");
    let build = json!({"event_id": event});
    // A draft, or a program never built: nothing to hold.
    assert_eq!(
        w.planner
            .assess_risk(&alice, "build_schedule", &build)
            .await,
        None
    );
    w.planner
        .publish_event(&caller("alice", "a4"), &event)
        .await
        .unwrap();
    assert_eq!(
        w.planner
            .assess_risk(&alice, "build_schedule", &build)
            .await,
        None
    );
    w.planner
        .build_schedule(&caller("alice", "a5"), &event)
        .await
        .unwrap();

    assert_eq!(
        w.planner
            .assess_risk(&alice, "build_schedule", &build)
            .await
            .as_deref(),
        Some("Re-plan the published program of \u{201c}Spring Open\u{201d}: no session moves")
    );
    let table = saved(&w, &event).await.unwrap();
    // Right after the coffee break, which pushes the panel (it follows the keynote) too.
    let late = table.timetable.breaks[0].start + 15;
    let time = format!("{:02}:{:02}", late / 60, late % 60);
    let mv = json!({"event_id": event, "session_id": keynote, "day": 1, "time": time});
    assert_eq!(
        w.planner.assess_risk(&alice, "move_session", &mv).await,
        Some(format!(
            "Move \u{201c}Keynote\u{201d} to day 1 at {time}, re-planning the published program of \u{201c}Spring Open\u{201d}: 2 sessions move (\u{201c}Keynote\u{201d}, \u{201c}Panel\u{201d})"
        )),
        "the question says where the pinned session goes"
    );
    // Another user's event is not risky here: the call fails as not found when it runs.
    assert_eq!(
        w.planner
            .assess_risk(&ctx("bob", "b"), "build_schedule", &build)
            .await,
        None
    );
}

#[tokio::test]
async fn an_assistant_on_a_read_grant_cannot_change_the_program_or_build() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    add(&w, &event, "a2", talk("Keynote", 60, 120, &[])).await;
    w.store
        .set_assistant_grant(&UserId::from("alice"), tools::Grant::Read)
        .await
        .unwrap();
    let err = w
        .planner
        .build_schedule(&caller("alice", "a3"), &event)
        .await
        .unwrap_err();
    assert!(matches!(err, PlannerError::NotAllowed(_)), "{err:?}");
    let err = w
        .planner
        .add_session(&caller("alice", "a4"), &event, talk("Panel", 45, 10, &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, PlannerError::NotAllowed(_)), "{err:?}");
    assert!(saved(&w, &event).await.is_none());
}

/// What a published timetable shows is drawn from the program as it is now, so new days,
/// rooms or breaks, a session's new length, or an undo that puts the program back change it at
/// once, with no re-plan: each needs a yes once the event is published and its timetable
/// saved, described from the database, and so does a session's new title there (as an
/// event's does). A speaker edit does not, nor does anything on a draft or before a timetable
/// is saved.
#[tokio::test]
async fn changing_what_a_published_timetable_shows_needs_a_yes() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    let keynote = add(&w, &event, "a2", talk("Keynote", 60, 120, &[])).await;
    let alice = ctx("alice", "r");
    let rooms = json!({"event_id": event, "days": [{"start": "09:00", "end": "10:00"}],
        "rooms": [{"name": "Closet", "capacity": 1}]});
    let longer = json!({"event_id": event, "session_id": keynote, "duration": 720});
    let renamed = json!({"event_id": event, "session_id": keynote, "title": "Opening"});
    let same_length = json!({"event_id": event, "session_id": keynote, "duration": 60});
    let risk = |tool: &'static str, args: Value| {
        let (w, alice) = (&w, &alice);
        async move { w.planner.assess_risk(alice, tool, &args).await }
    };
    w.planner
        .publish_event(&caller("alice", "a3"), &event)
        .await
        .unwrap();
    assert_eq!(
        risk("set_rooms", rooms.clone()).await,
        None,
        "nothing saved yet"
    );
    assert_eq!(risk("edit_session", longer.clone()).await, None);
    w.planner
        .build_schedule(&caller("alice", "a4"), &event)
        .await
        .unwrap();

    assert_eq!(
        risk("set_rooms", rooms.clone()).await.as_deref(),
        Some(
            "Replace the days, rooms and breaks of the published timetable of \u{201c}Spring Open\u{201d} with 1 day (09:00\u{2013}10:00), 1 room (\u{201c}Closet\u{201d} (1 seat)), and no breaks"
        ),
        "a yes is for the whole call: the question says what it sets"
    );
    let more = json!({"event_id": event,
        "days": [{"start": "09:00", "end": "17:00"}, {"start": "09:00", "end": "13:00"}],
        "rooms": [{"name": "Main", "capacity": 200}, {"name": "B", "capacity": 40},
            {"name": "C", "capacity": 30}, {"name": "D", "capacity": 20}],
        "breaks": [{"name": "Lunch", "day": 1, "from": "12:00", "to": "14:00", "duration": 45}]});
    assert_eq!(
        risk("set_rooms", more).await.as_deref(),
        Some(
            "Replace the days, rooms and breaks of the published timetable of \u{201c}Spring Open\u{201d} with 2 days (09:00\u{2013}17:00, 09:00\u{2013}13:00), 4 rooms (\u{201c}Main\u{201d} (200 seats), \u{201c}B\u{201d} (40 seats), \u{201c}C\u{201d} (30 seats), \u{201c}D\u{201d} (20 seats)), and breaks \u{201c}Lunch\u{201d} on day 1 12:00\u{2013}14:00 (45 min)"
        )
    );
    assert_eq!(
        risk("edit_session", longer.clone()).await.as_deref(),
        Some(
            "Change \u{201c}Keynote\u{201d} in the published timetable of \u{201c}Spring Open\u{201d} from 60 to 720 minutes"
        )
    );
    let longer_and_more = json!({"event_id": event, "session_id": keynote, "duration": 90,
        "title": "Opening", "speakers": ["Ada", "Grace", "Edsger", "Barbara"], "room": "Hall"});
    assert_eq!(
        risk("edit_session", longer_and_more).await.as_deref(),
        Some(
            "Change \u{201c}Keynote\u{201d} in the published timetable of \u{201c}Spring Open\u{201d} from 60 to 90 minutes, and also set its title to \u{201c}Opening\u{201d}, its speakers to \u{201c}Ada\u{201d}, \u{201c}Grace\u{201d}, \u{201c}Edsger\u{201d}, \u{201c}Barbara\u{201d}, its room to \u{201c}Hall\u{201d}"
        ),
        "a yes is for the whole call: what rides along with the new length is named too"
    );
    // A session renamed in a published timetable ("CANCELLED") is what people see: held, as
    // an event's rename is; what rides along is named too.
    assert_eq!(
        risk("edit_session", renamed).await.as_deref(),
        Some(
            "Rename \u{201c}Keynote\u{201d} in the published timetable of \u{201c}Spring Open\u{201d} to \u{201c}Opening\u{201d}"
        )
    );
    let renamed_and_more =
        json!({"event_id": event, "session_id": keynote, "title": "Opening", "track": "Side"});
    assert_eq!(
        risk("edit_session", renamed_and_more).await.as_deref(),
        Some(
            "Rename \u{201c}Keynote\u{201d} in the published timetable of \u{201c}Spring Open\u{201d} to \u{201c}Opening\u{201d}, and also set its track to \u{201c}Side\u{201d}"
        )
    );
    // Its track and speakers are shown in the published timetable too.
    let respoken = json!({"event_id": event, "session_id": keynote,
        "speakers": ["Session cancelled – go home"], "track": "CANCELLED"});
    assert_eq!(
        risk("edit_session", respoken).await.as_deref(),
        Some(
            "Change \u{201c}Keynote\u{201d} in the published timetable of \u{201c}Spring Open\u{201d}: set its track to \u{201c}CANCELLED\u{201d}, its speakers to \u{201c}Session cancelled – go home\u{201d}"
        )
    );
    let same_title = json!({"event_id": event, "session_id": keynote, "title": "Keynote"});
    assert_eq!(risk("edit_session", same_title).await, None);
    assert_eq!(risk("edit_session", same_length).await, None);
    assert_eq!(
        w.planner
            .assess_risk(&ctx("bob", "b"), "set_rooms", &rooms)
            .await,
        None,
        "not bob's: it fails as not found when it runs"
    );

    // The program changed in this conversation after the timetable was saved: undoing it
    // changes what the published timetable shows, so it is held too.
    let lightning = talk("Lightning", 15, 20, &[]);
    add(&w, &event, "a5", lightning).await;
    let undo = risk("undo", json!({})).await.unwrap_or_default();
    assert!(
        undo.starts_with("Undo the last change made in this conversation (change #")
            && undo.ends_with(
                "), which would put the program of the published timetable of \u{201c}Spring Open\u{201d} back as it was"
            ),
        "{undo}"
    );
}

/// A speaker's and a track's names are kept as their words with one space between: the
/// scheduler tells speakers apart by name, and "Ada  Lovelace " is the same person as "Ada
/// Lovelace" (not free to be in two rooms at once).
#[tokio::test]
async fn speaker_and_track_names_are_kept_without_stray_spaces() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    add(
        &w,
        &event,
        "a2",
        NewSession {
            speakers: vec![" Ada  Lovelace ".into(), "Grace\tHopper".into()],
            track: Some("  Main ".into()),
            ..talk("Keynote", 60, 100, &[])
        },
    )
    .await;
    let record = w
        .store
        .record(planner::PROGRAM, &event)
        .await
        .unwrap()
        .unwrap();
    let session = &record.value["program"]["sessions"][0];
    assert_eq!(session["speakers"], json!(["Ada Lovelace", "Grace Hopper"]));
    assert_eq!(session["track"], "Main");
}

#[tokio::test]
async fn a_program_holds_at_most_so_many_sessions_and_the_schemas_cap_names_and_lists() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    for n in 0..planner::MAX_SESSIONS {
        add(
            &w,
            &event,
            &format!("s{n}"),
            talk(&format!("Talk {n}"), 5, 1, &[]),
        )
        .await;
    }
    let full = w
        .planner
        .add_session(
            &caller("alice", "one-more"),
            &event,
            talk("One more", 5, 1, &[]),
        )
        .await;
    assert!(
        matches!(&full, Err(PlannerError::Rule(why)) if why.contains("at most")),
        "{full:?}"
    );

    // What a model may send is capped before anything runs.
    let planner = Arc::new(Planner::new(w.store.clone() as Arc<dyn Store>));
    let mut registry = tools::Registry::default();
    planner::register(&mut registry, planner, &[planner::PURPOSE]).unwrap();
    let call = |name: &str, input: Value| tools::ToolCall {
        id: "t1".into(),
        name: name.into(),
        input,
    };
    let refused = |name: &str, input: Value| registry.check(planner::PURPOSE, &call(name, input));
    let session = |extra: Value| {
        let mut input = json!({"event_id": event, "title": "Talk", "duration": 30});
        input
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        input
    };
    assert!(refused("add_session", session(json!({}))).is_none());
    let crowd: Vec<String> = (0..21).map(|n| format!("Speaker {n}")).collect();
    for too_much in [
        json!({"speakers": crowd}),
        json!({"speakers": ["x".repeat(121)]}),
        json!({"room": "r".repeat(81)}),
        json!({"after": vec!["s"; 51]}),
    ] {
        assert!(
            refused("add_session", session(too_much.clone())).is_some(),
            "{too_much}"
        );
    }
    let rooms: Vec<Value> = (0..51)
        .map(|n| json!({"name": format!("Room {n}"), "capacity": 10}))
        .collect();
    let set =
        json!({"event_id": event, "days": [{"start": "09:00", "end": "17:00"}], "rooms": rooms});
    assert!(refused("set_rooms", set).is_some(), "51 rooms");
}

#[tokio::test]
async fn one_message_changes_at_most_what_one_undo_can_take_back() {
    let w = world().await;
    let event = spring_with_rooms(&w).await;
    // A model chaining calls in one message (one action): 32 edits of the program weigh 96.
    for n in 0..store::MAX_ACTION_WEIGHT / 3 {
        let added = w
            .planner
            .add_session(
                &caller("alice", "one-message"),
                &event,
                talk(&format!("Talk {n}"), 5, 1, &[]),
            )
            .await;
        assert!(added.is_ok(), "{n}: {added:?}");
    }
    let past = w
        .planner
        .add_session(
            &caller("alice", "one-message"),
            &event,
            talk("One too many", 5, 1, &[]),
        )
        .await;
    assert!(
        matches!(&past, Err(PlannerError::Rule(why)) if why.contains("as much as one undo can take back")),
        "{past:?}"
    );
    // The next message goes on; one undo takes it back, the next the whole first message.
    add(&w, &event, "next-message", talk("Next", 5, 1, &[])).await;
    for expected in ["next-message", "one-message"] {
        let undone = w
            .store
            .undo_last(&store::UndoRequest {
                user: UserId::from("alice"),
                scope: here("alice"),
                action_id: format!("undo-{expected}"),
                actor: store::ActorKind::User,
                conversation: None,
                at_ms: 9_000,
                receipt: None,
            })
            .await
            .unwrap();
        assert!(
            matches!(&undone, store::UndoOutcome::Undone { action_id, .. } if action_id == expected),
            "{undone:?}"
        );
    }
}

/// The program's size in the store, as one record.
async fn program_bytes(w: &World, event: &str) -> usize {
    let record = w
        .store
        .record(planner::PROGRAM, event)
        .await
        .unwrap()
        .unwrap();
    store::canonical_json(&record.value).len()
}

#[tokio::test]
async fn a_program_past_what_one_record_holds_is_refused_in_words_and_kept_as_it_was() {
    let w = world().await;
    // An ordinary conference at the session limit fits with room to spare.
    let ordinary = spring_with_rooms(&w).await;
    for n in 0..planner::MAX_SESSIONS {
        let session = NewSession {
            title: format!("Session {n:03}: what we learned running the spring league"),
            duration: 30,
            track: Some("Coaching".into()),
            speakers: vec![format!("Speaker {n} Lastname"), "Dana Lee".into()],
            audience: 20,
            ..NewSession::default()
        };
        add(&w, &ordinary, &format!("o{n}"), session).await;
    }
    let bytes = program_bytes(&w, &ordinary).await;
    println!(
        "a program of {} ordinary sessions: {bytes} bytes",
        planner::MAX_SESSIONS
    );
    assert!(bytes < store::MAX_RECORD_BYTES, "{bytes}");

    // A model filling every field to its schema's length reaches the limit long before.
    let stuffed = spring_titled(&w, "Spring Open, stuffed").await;
    let heavy = |n: usize| NewSession {
        title: format!("{n:03}{}", "t".repeat(150)),
        duration: 5,
        track: Some("k".repeat(80)),
        speakers: (0..20)
            .map(|s| format!("{n:03}{s:02}{}", "s".repeat(115)))
            .collect(),
        audience: 1,
        ..NewSession::default()
    };
    let mut added = 0;
    let refusal = loop {
        match w
            .planner
            .add_session(
                &caller("alice", &format!("h{added}")),
                &stuffed,
                heavy(added),
            )
            .await
        {
            Ok(_) => added += 1,
            Err(e) => break e,
        }
        assert!(added < planner::MAX_SESSIONS, "never refused");
    };
    assert!(
        matches!(&refusal, PlannerError::Rule(why) if why.contains(&format!("at most {} KB", store::MAX_RECORD_BYTES / 1_000)) && why.contains("program")),
        "{refusal:?}"
    );
    let kept = program_bytes(&w, &stuffed).await;
    assert!(kept <= store::MAX_RECORD_BYTES, "{kept}");
    let first = w
        .store
        .record(planner::PROGRAM, &stuffed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        first.value["program"]["sessions"].as_array().unwrap().len(),
        added,
        "the refused session is not in the program"
    );
    // Smaller edits still go through: the program is not stuck at its limit.
    let first_id = first.value["program"]["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    w.planner
        .edit_session(
            &caller("alice", "shorter"),
            &stuffed,
            &first_id,
            planner::SessionChanges {
                speakers: Some(vec!["Dana Lee".into()]),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(program_bytes(&w, &stuffed).await < kept);
}
