//! An event's program end to end: the real engine and tool runner, the planner's tools behind
//! the confirmation gate on in-memory SQLite, and a scripted model. The program is built by
//! tool calls; once the event is published, a re-plan is held with a description from the
//! database, runs when repeated on a later turn, and undo restores the previous timetable.

use backend::Reply;
use engine::{ConfirmationGate, ConfirmationOptions, EngineOptions, risk_policy};
use planner::{Caller, NewEvent, Planner, SCHEDULE, ScheduleRecord};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::{Account, Accounts, Records, Store};
use store_sqlite::SqliteStore;
use tests::Harness;
use tools::Registry;
use transcript::{Part, Role, UserId};

struct Setup {
    h: Harness,
    store: Arc<SqliteStore>,
    event: String,
}

/// The harness (user-1 in conv-1) with the planner tools behind the confirmation gate and a
/// draft "Spring Open".
async fn setup() -> Setup {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .put_account(&Account::new("user-1", "user-1"))
        .await
        .unwrap();
    let dyn_store: Arc<dyn Store> = store.clone();
    let planner = Arc::new(Planner::new(dyn_store));
    let mut tools = Registry::default();
    planner::register(&mut tools, planner.clone(), &[planner::PURPOSE]).unwrap();
    let policy = {
        let planner = planner.clone();
        risk_policy(move |ctx, tool, args| {
            let planner = planner.clone();
            async move { planner.assess_risk(&ctx, &tool, &args).await }
        })
    };
    let gate =
        ConfirmationGate::new(Arc::new(policy), store.clone()).with_options(ConfirmationOptions {
            ttl: Duration::from_secs(3600),
        });
    let h = Harness::build_on(store.clone(), [], tools, EngineOptions::default(), |e| {
        e.with_confirmation(Arc::new(gate))
    })
    .await;
    let owner = Caller {
        user: UserId::from("user-1"),
        actor: store::ActorKind::User,
        action_id: "setup".into(),
        conversation: Some("conv-1".into()),
        call_key: None,
        grant: tools::Grant::Risky,
    };
    let event = planner
        .create_event(
            &owner,
            NewEvent {
                title: "Spring Open".into(),
                starts_at: "2025-04-12T09:00".into(),
                venue: "Court 1".into(),
                capacity: 200,
            },
        )
        .await
        .unwrap();
    Setup {
        h,
        store,
        event: event.id,
    }
}

impl Setup {
    /// One user turn in which the model makes `call` and then says "ok"; the tool result.
    async fn turn_calling(&self, tool: &str, args: Value) -> Value {
        self.turn_saying("please", tool, args).await
    }

    /// One user turn saying `words`, in which the model makes `call`; the tool result.
    async fn turn_saying(&self, words: &str, tool: &str, args: Value) -> Value {
        self.h.model.push(Reply::tool_call("c1", tool, args));
        self.h.model.push(Reply::text("ok"));
        self.h.turn(words).await;
        let transcript = self.h.transcript().await;
        let tool_message = transcript
            .iter()
            .rev()
            .find(|m| m.role == Role::Tool)
            .unwrap();
        match tool_message.parts.last().unwrap() {
            Part::ToolResult { content, .. } => content.clone(),
            other => panic!("not a tool result: {other:?}"),
        }
    }

    async fn add(&self, args: Value) -> String {
        let mut args = args;
        args["event_id"] = json!(self.event);
        let added = self.turn_calling("add_session", args).await;
        added["session_id"]
            .as_str()
            .expect("a session id")
            .to_owned()
    }

    async fn saved(&self) -> Option<ScheduleRecord> {
        let record = self.store.record(SCHEDULE, &self.event).await.unwrap()?;
        Some(serde_json::from_value(record.value).unwrap())
    }
}

fn held(result: &Value) -> Option<&str> {
    result["error"]
        .as_str()
        .filter(|e| e.starts_with("NOT EXECUTED: needs confirmation"))
}

#[tokio::test]
async fn a_program_built_by_tools_a_held_published_replan_confirmed_later_and_undone() {
    let s = setup().await;
    let event = s.event.clone();
    let rooms = s
        .turn_calling(
            "set_rooms",
            json!({
                "event_id": event,
                "days": [{"start": "09:00", "end": "13:00"}],
                "rooms": [{"name": "Hall", "capacity": 150}, {"name": "Studio", "capacity": 30}],
                "breaks": [{"name": "Coffee", "day": 1, "from": "10:30", "to": "10:45"}]
            }),
        )
        .await;
    assert_eq!(rooms["rooms"], json!(["Hall", "Studio"]), "{rooms}");
    let keynote = s
        .add(json!({"title": "Keynote", "duration": 60, "audience": 120, "track": "Main", "speakers": ["Ada"]}))
        .await;
    let panel = s
        .add(json!({"title": "Panel", "duration": 45, "audience": 100, "track": "Main", "speakers": ["Ada", "Grace"], "after": [keynote]}))
        .await;
    s.add(json!({"title": "Workshop", "duration": 90, "audience": 20, "track": "Hands-on"}))
        .await;

    // A draft's first build runs at once and answers with a headline, not the timetable.
    let built = s
        .turn_calling("build_schedule", json!({"event_id": event}))
        .await;
    assert_eq!(built["sessions"], 3, "{built}");
    assert_eq!(built["finishes"].as_array().unwrap().len(), 1, "{built}");
    assert!(built.get("timetable").is_none(), "{built}");
    let first = s.saved().await.expect("saved");

    let main = s
        .turn_calling("show_schedule", json!({"event_id": event, "track": "Main"}))
        .await;
    let titles: Vec<&str> = main["items"]
        .as_array()
        .unwrap_or_else(|| panic!("{main}"))
        .iter()
        .map(|l| l["what"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Keynote", "Panel"], "{main}");
    assert_eq!(main["items"][0]["day"], 1, "days count from 1: {main}");

    let published = s
        .turn_calling("publish_event", json!({"event_id": event}))
        .await;
    assert_eq!(published["status"], "published", "{published}");

    // Move the keynote to right after the coffee: the panel (after it) moves too.
    let coffee_end = first.timetable.breaks[0].start + 15;
    let to = format!("{:02}:{:02}", coffee_end / 60, coffee_end % 60);
    let args = json!({"event_id": event, "session_id": keynote, "day": 1, "time": to});
    let asked = s.turn_calling("move_session", args.clone()).await;
    let why = held(&asked).unwrap_or_else(|| panic!("held: {asked}"));
    assert!(
        why.contains(&format!(
            "Move \u{201c}Keynote\u{201d} to day 1 at {to}, re-planning the published program of \u{201c}Spring Open\u{201d}: 2 sessions move (\u{201c}Keynote\u{201d}, \u{201c}Panel\u{201d})"
        )),
        "{why}"
    );
    assert_eq!(
        s.saved().await.unwrap(),
        first,
        "nothing changed while held"
    );

    // The user says yes on a later turn, naming what it does; the model repeats the call.
    let moved = s.turn_saying("yes, move it", "move_session", args).await;
    assert_eq!(moved["moved"], 2, "{moved}");
    let after_move = s.saved().await.unwrap();
    assert_eq!(
        after_move.timetable.placed(&keynote).unwrap().start,
        coffee_end
    );
    assert!(
        after_move.timetable.placed(&panel).unwrap().start >= coffee_end + 60,
        "the panel still follows the keynote"
    );

    // Undoing it moves the published program's sessions back, as a re-plan does: it is held
    // too (a manipulated model cannot go around the yes by undoing), then confirmed.
    let asked = s.turn_calling("undo", json!({})).await;
    let why = held(&asked).unwrap_or_else(|| panic!("held: {asked}"));
    assert!(
        why.contains(
            "put the published program of \u{201c}Spring Open\u{201d} back as it was before its \
             last re-plan"
        ),
        "{why}"
    );
    assert_eq!(
        s.saved().await.unwrap(),
        after_move,
        "nothing undone while held"
    );
    let undone = s.turn_calling("undo", json!({})).await;
    assert!(
        undone["result"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Undone"),
        "{undone}"
    );
    assert_eq!(s.saved().await.unwrap(), first);
}

#[tokio::test]
async fn an_impossible_program_is_answered_with_numbers_and_nothing_is_saved() {
    let s = setup().await;
    let event = s.event.clone();
    s.turn_calling(
        "set_rooms",
        json!({"event_id": event, "days": [{"start": "09:00", "end": "12:00"}], "rooms": [{"name": "Studio", "capacity": 30}]}),
    )
    .await;
    s.add(json!({"title": "Keynote", "duration": 60, "audience": 300}))
        .await;
    let refused = s
        .turn_calling("build_schedule", json!({"event_id": event}))
        .await;
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(error.contains("No timetable fits"), "{refused}");
    assert!(error.contains("300"), "{refused}");
    assert!(s.saved().await.is_none());
    let bad_time = s
        .turn_calling(
            "move_session",
            json!({"event_id": event, "session_id": "ss-x", "day": 1, "time": "9h"}),
        )
        .await;
    assert!(bad_time["error"].is_string(), "{bad_time}");
}
