//! Undo is scoped to the conversation it is asked in, and audited as whoever undid it.
//!
//! The planner's own tools through the real registry, on SQLite and on DynamoDB in moto: the
//! assistant's `undo` in one conversation never reverts a change made in another; an MCP client
//! undoes as `mcp`; the user in the web app may reach further, explicitly. Then the real engine
//! with the confirmation gate on SQLite: a model that chains `undo` four times after a held
//! `cancel_event` reverts nothing of another conversation, and its own conversation's undo of a
//! registration waits for a yes.

use backend::Reply;
use engine::{ConfirmationGate, ConfirmationOptions, EngineOptions, risk_policy};
use planner::{Caller, EventStatus, NewEvent, Planner};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::{Account, Accounts, ActorKind, Store, UndoScope};
use store_sqlite::SqliteStore;
use tests::Harness;
use tests::crash_store::{Crash, CrashAt, CrashStore};
use tests::moto::dynamo_store;
use tools::{ActionId, Actor, Ctx, Registry, ToolCall};
use transcript::{ConversationId, Part, Role, UserId};

const USER: &str = "user-1";

fn ctx(conversation: &str, action: &str, actor: Actor) -> Ctx {
    Ctx {
        user_id: UserId::from(USER),
        actor,
        action_id: ActionId(action.into()),
        conversation_id: ConversationId::from(conversation),
        call_key: None,
        grant: tools::Grant::default(),
    }
}

fn spring() -> NewEvent {
    NewEvent {
        title: "Spring Open".into(),
        starts_at: "2025-04-12T10:00".into(),
        venue: "Court 1".into(),
        capacity: 10,
    }
}

struct World {
    store: Arc<dyn Store>,
    planner: Arc<Planner>,
    tools: Registry,
}

async fn world(store: Arc<dyn Store>) -> World {
    store.put_account(&Account::new(USER, "Ana")).await.unwrap();
    let planner = Arc::new(Planner::new(store.clone()));
    let mut tools = Registry::default();
    planner::register(&mut tools, planner.clone(), &[planner::PURPOSE]).unwrap();
    World {
        store,
        planner,
        tools,
    }
}

impl World {
    /// One tool call as the model makes it; the result the model would see.
    async fn call(&self, ctx: &Ctx, tool: &str, input: Value) -> Value {
        let call = ToolCall {
            id: format!("{}-{tool}", ctx.action_id),
            name: tool.into(),
            input,
        };
        match self.tools.run(ctx, planner::PURPOSE, &call).await.part {
            Part::ToolResult { content, .. } => content,
            other => panic!("not a tool result: {other:?}"),
        }
    }

    async fn title(&self, id: &str) -> Option<String> {
        let record = self.store.record(planner::EVENT, id).await.unwrap()?;
        Some(record.value["title"].as_str().unwrap().to_owned())
    }
}

async fn undo_stays_in_its_conversation(store: Arc<dyn Store>) {
    let w = world(store).await;
    let in_a = |action: &str| ctx("conv-a", action, Actor::Agent);
    let in_b = |action: &str| ctx("conv-b", action, Actor::Agent);
    let made = w
        .call(
            &in_a("a1"),
            "create_event",
            json!({"title": "Spring Open", "starts_at": "2025-04-12T10:00", "venue": "Court 1", "capacity": 10}),
        )
        .await;
    let spring_id = made["id"].as_str().unwrap().to_owned();
    let made = w
        .call(
            &in_b("b1"),
            "create_event",
            json!({"title": "Summer Cup", "starts_at": "2025-07-01T09:00", "venue": "Hall", "capacity": 3}),
        )
        .await;
    let summer_id = made["id"].as_str().unwrap().to_owned();
    // Conversation A's rename is the user's newest change of all.
    w.call(
        &in_a("a2"),
        "update_event",
        json!({"event_id": spring_id, "title": "Spring Open Cup"}),
    )
    .await;

    // In B the assistant undoes B's own change, and then finds nothing more to undo.
    let undone = w.call(&in_b("b2"), "undo", json!({})).await;
    assert!(
        undone["result"].as_str().unwrap().starts_with("Undone"),
        "{undone}"
    );
    assert_eq!(w.title(&summer_id).await, None, "B's event is gone");
    assert_eq!(
        w.title(&spring_id).await.as_deref(),
        Some("Spring Open Cup"),
        "A's rename stays"
    );
    let nothing = w.call(&in_b("b3"), "undo", json!({})).await;
    assert!(
        nothing["result"]
            .as_str()
            .unwrap()
            .starts_with("There is nothing to undo in this conversation"),
        "{nothing}"
    );
    assert_eq!(
        w.title(&spring_id).await.as_deref(),
        Some("Spring Open Cup")
    );

    // An MCP client working in A undoes A's rename, as `mcp`.
    w.call(&ctx("conv-a", "m1", Actor::Mcp), "undo", json!({}))
        .await;
    assert_eq!(w.title(&spring_id).await.as_deref(), Some("Spring Open"));

    // The user in the web app, asking for it explicitly, may reach any conversation's change.
    let web = Caller {
        user: UserId::from(USER),
        actor: ActorKind::User,
        action_id: "w1".into(),
        conversation: None,
        call_key: None,
        grant: tools::Grant::Risky,
    };
    let sentence = w.planner.undo(&web, UndoScope::Anywhere).await.unwrap();
    assert!(sentence.starts_with("Undone"), "{sentence}");
    assert_eq!(
        w.title(&spring_id).await,
        None,
        "A's creation, undone from the web"
    );

    let log = w.store.audit_log(&UserId::from(USER)).await.unwrap();
    let undos: Vec<(&str, Option<&str>, ActorKind, Option<&str>)> = log
        .iter()
        .filter(|e| e.reverts.is_some())
        .map(|e| {
            (
                e.action_id.as_str(),
                e.reverts.as_deref(),
                e.actor,
                e.conversation.as_ref().map(|c| c.0.as_str()),
            )
        })
        .collect();
    assert_eq!(
        undos,
        [
            ("w1", Some("a1"), ActorKind::User, None),
            ("m1", Some("a2"), ActorKind::Mcp, Some("conv-a")),
            ("b2", Some("b1"), ActorKind::Agent, Some("conv-b")),
        ],
        "the audit says who undid what, and where"
    );
}

#[tokio::test]
async fn undo_stays_in_its_conversation_on_sqlite() {
    undo_stays_in_its_conversation(Arc::new(SqliteStore::open_in_memory().unwrap())).await;
}

#[tokio::test]
async fn undo_stays_in_its_conversation_on_dynamodb() {
    undo_stays_in_its_conversation(dynamo_store("undo-scope").await).await;
}

/// A model's undo reverts the action it read, or nothing. When another undo takes that action
/// first (two undoers of one stack: a lapsed lease), the model's undo does not go on to the
/// action beneath, which nobody judged: here the publishing of an event, whose undo would need
/// a person's yes.
#[tokio::test]
async fn an_undo_that_lost_its_action_reverts_nothing_beneath_it() {
    let flaky = Arc::new(tests::FlakyStore::new(Arc::new(
        SqliteStore::open_in_memory().unwrap(),
    )));
    let w = world(flaky.clone()).await;
    let here = |action: &str| ctx("conv-1", action, Actor::Agent);
    let made = w
        .call(
            &here("a1"),
            "create_event",
            json!({"title": "Spring Open", "starts_at": "2025-04-12T10:00", "venue": "Court 1", "capacity": 10}),
        )
        .await;
    let spring = made["id"].as_str().unwrap().to_owned();
    w.call(&here("a2"), "publish_event", json!({"event_id": spring}))
        .await;
    // The newest action is harmless to undo: a draft made, then taken away.
    let draft = w
        .call(
            &here("a3"),
            "create_event",
            json!({"title": "Autumn Cup", "starts_at": "2025-10-01T10:00", "venue": "Hall", "capacity": 5}),
        )
        .await;
    let autumn = draft["id"].as_str().unwrap().to_owned();

    flaky.undo_elsewhere_first();
    let undo = Ctx {
        call_key: Some("conv-1:7:undo-1".into()),
        ..here("a4")
    };
    let answer = w.call(&undo, "undo", json!({})).await;
    assert_eq!(
        answer["error"], "That changed in the meantime; look again and retry.",
        "{answer}"
    );
    assert_eq!(
        w.title(&autumn).await,
        None,
        "the other undo took the draft"
    );
    let status = w
        .store
        .record(planner::EVENT, &spring)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        status.value["status"], "published",
        "the event beneath stays published: its undo was never judged"
    );
}

/// The harness (user-1 in conv-1) with the planner behind the confirmation gate.
async fn gated() -> (Harness, Arc<Planner>) {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store.put_account(&Account::new(USER, "Ana")).await.unwrap();
    let planner = Arc::new(Planner::new(store.clone() as Arc<dyn Store>));
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
    let h = Harness::build_on(store, [], tools, EngineOptions::default(), |e| {
        e.with_confirmation(Arc::new(gate))
    })
    .await;
    (h, planner)
}

/// Every tool result of the current segment with an id starting with `prefix`, as text.
async fn results(h: &Harness, prefix: &str) -> Vec<String> {
    h.transcript()
        .await
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            Part::ToolResult {
                tool_use_id,
                content,
                ..
            } if tool_use_id.starts_with(prefix) => Some(content.to_string()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_model_chaining_undo_after_a_held_cancel_reverts_nothing_of_another_conversation() {
    let (h, planner) = gated().await;
    // Another conversation of the same user: a published event with two attendees.
    let in_a = |action: &str| Caller::from_ctx(&ctx("conv-a", action, Actor::Agent));
    let event = planner.create_event(&in_a("a1"), spring()).await.unwrap();
    planner.publish_event(&in_a("a2"), &event.id).await.unwrap();
    for (name, email) in [
        ("Dana Lee", "dana@example.com"),
        ("Sam Roe", "sam@example.com"),
    ] {
        planner
            .register_attendee(&in_a(name), &event.id, name, email)
            .await
            .unwrap();
    }
    // conv-a's records as it left them (with `registered` people on its event).
    let untouched = |planner: Arc<Planner>, event: String, draft: String, registered: u32| async move {
        let events = planner.list_events(&elsewhere_reader()).await.unwrap();
        let spring = events
            .iter()
            .find(|e| e.id == event)
            .expect("Spring Open exists");
        assert_eq!(
            (spring.status, spring.registered),
            (EventStatus::Published, registered),
            "conv-a's event is still published with its attendees"
        );
        assert!(
            events.iter().any(|e| e.id == draft),
            "conv-a's draft exists"
        );
    };

    // This conversation: the model registers Kim (fine to do; undoing it withdraws her).
    h.model.push(Reply::tool_call(
        "r1",
        "register_attendee",
        json!({"event_id": event.id, "name": "Kim Park", "email": "kim@example.com"}),
    ));
    h.model.push(Reply::text("Kim is in."));
    h.turn("register Kim Park, kim@example.com").await;
    // Then, in the other conversation, the user's newest change of all: a new draft (undoing a
    // draft's creation needs no confirmation, so an unscoped undo would just delete it).
    let draft = planner
        .create_event(
            &in_a("a5"),
            NewEvent {
                title: "Autumn Fair".into(),
                ..spring()
            },
        )
        .await
        .unwrap();

    // A manipulated model: the cancellation is held, so it tries undo four times in one answer.
    h.model.push(Reply::tool_call(
        "c1",
        "cancel_event",
        json!({"event_id": event.id}),
    ));
    h.model.push(
        Reply::new()
            .call("u1", "undo", json!({}))
            .call("u2", "undo", json!({}))
            .call("u3", "undo", json!({}))
            .call("u4", "undo", json!({}))
            .stop(transcript::StopReason::ToolUse),
    );
    h.model.push(Reply::text("All done."));
    h.turn("cancel the spring open").await;
    let cancel = results(&h, "c1").await;
    assert!(cancel[0].contains("needs confirmation"), "{cancel:?}");
    let undos = results(&h, "u").await;
    assert_eq!(undos.len(), 4);
    for r in &undos {
        assert!(
            r.contains("needs confirmation") && r.contains("withdraw Kim Park"),
            "this conversation's undo is held, described from its own action: {r}"
        );
        assert!(!r.contains("Autumn Fair") && !r.contains("Dana"), "{r}");
    }
    untouched(planner.clone(), event.id.clone(), draft.id.clone(), 3).await;
    let attendees = planner
        .list_attendees(&elsewhere_reader(), &event.id)
        .await
        .unwrap();
    assert_eq!(
        attendees.len(),
        3,
        "Kim is still registered: nothing was confirmed"
    );

    // Confirmed on the next message, the undo takes back this conversation's registration only;
    // a further undo finds nothing more here.
    h.model.push(
        Reply::new()
            .call("y1", "undo", json!({}))
            .stop(transcript::StopReason::ToolUse),
    );
    h.model.push(
        Reply::new()
            .call("y2", "undo", json!({}))
            .stop(transcript::StopReason::ToolUse),
    );
    h.model.push(Reply::text("Undone."));
    h.turn("yes").await;
    let confirmed = results(&h, "y").await;
    assert!(confirmed[0].contains("Undone"), "{confirmed:?}");
    assert!(
        confirmed[1].contains("nothing to undo in this conversation"),
        "{confirmed:?}"
    );
    let attendees = planner
        .list_attendees(&elsewhere_reader(), &event.id)
        .await
        .unwrap();
    let names: Vec<&str> = attendees.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(!names.contains(&"Kim Park"), "{names:?}");
    untouched(planner, event.id, draft.id, 2).await;
}

/// A reader of user-1's records (reads are not audited).
fn elsewhere_reader() -> Caller {
    Caller::from_ctx(&ctx("conv-read", "read", Actor::User))
}

#[tokio::test]
async fn an_undo_whose_effect_cannot_be_read_is_held() {
    let sqlite: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    sqlite
        .put_account(&Account::new(USER, "Ana"))
        .await
        .unwrap();
    let store = Arc::new(CrashStore::new(sqlite, Crash::at(CrashAt::Before(1))));
    let planner = Planner::new(store.clone());
    let here = ctx("conv-1", "a1", Actor::Agent);
    assert_eq!(
        planner.assess_risk(&here, "undo", &json!({})).await,
        None,
        "nothing to undo here: nothing to confirm"
    );
    // The store goes away (the first write never happens, and nothing after it works).
    let lost = planner
        .create_event(&Caller::from_ctx(&here), spring())
        .await;
    assert!(lost.is_err() && store.crash.is_dead());
    let held = planner.assess_risk(&here, "undo", &json!({})).await;
    assert_eq!(
        held.as_deref(),
        Some("Undo the last change made in this conversation"),
        "what an undo would revert cannot be read, so it waits for a yes"
    );
}
