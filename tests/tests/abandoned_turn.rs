//! Giving a turn up for good (its job failed on every attempt) closes it in the transcript so
//! the next turn is coherent. A call of the open answer that ran keeps what it did — its
//! recorded result, or its answer from the receipt its effect was committed with (the attempt
//! died between the two) — and only a call that never ran is "not executed": else the model
//! would read that a change it made was not made, and make it again.

use backend::ScriptedModel;
use engine::{Abandoned, Engine, EngineOptions};
use serde_json::json;
use std::sync::Arc;
use store::{
    ActionCommit, ActorKind, Change, ConversationStore, MessageStore, Receipt, Records, ToolResults,
};
use store_sqlite::SqliteStore;
use tools::{ActionId, Registry};
use transcript::{CallRecord, Conversation, ConversationId, Message, Part, Role, Usage};

const ACTION: &str = "web:c1.m1";

fn row(id: &ConversationId, position: u64, role: Role, parts: Vec<Part>) -> Message {
    Message {
        conversation_id: id.clone(),
        segment: 0,
        position,
        role,
        parts,
        call: (role == Role::Assistant).then(|| CallRecord {
            backend: "scripted".into(),
            model: "m".into(),
            stop_reason: Some(transcript::StopReason::ToolUse),
            error: None,
            usage: Usage::default(),
            latency_ms: 1,
            tools_offered: vec!["create_event".into()],
        }),
        action_id: Some(ACTION.into()),
        created_at_ms: 1,
    }
}

fn asks(id: &str, title: &str) -> Part {
    Part::ToolUse {
        id: id.into(),
        name: "create_event".into(),
        input: json!({"title": title}),
    }
}

/// An engine with no model or tools on SQLite, and ann's empty web conversation.
async fn setup() -> (Arc<SqliteStore>, Engine, ConversationId) {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let engine = Engine::new(
        Arc::new(ScriptedModel::new(vec![])),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    );
    let id = ConversationId::from("web:c1");
    store
        .create_conversation(&Conversation::new(id.clone(), "ann", "web", "chat"))
        .await
        .unwrap();
    (store, engine, id)
}

#[tokio::test]
async fn a_given_up_turn_keeps_what_its_calls_did() {
    let (store, engine, id) = setup().await;
    // The turn as the engine left it: the message, then an answer asking for three calls.
    // The first ran and its result was recorded; the second's effect was committed with its
    // receipt, and the attempt died before its result was recorded; the third never ran.
    store
        .append_message(&row(&id, 0, Role::User, vec![Part::text("three events")]))
        .await
        .unwrap();
    let answer = vec![asks("a", "A"), asks("b", "B"), asks("c", "C")];
    store
        .append_message(&row(&id, 1, Role::Assistant, answer))
        .await
        .unwrap();
    let ran = Part::ToolResult {
        tool_use_id: "a".into(),
        content: json!({"id": "ev-a"}),
        is_error: false,
    };
    store.put_tool_result(&id, 1, "a", &ran).await.unwrap();
    store
        .commit(&ActionCommit {
            action_id: ACTION.into(),
            actor: ActorKind::Agent,
            user: "ann".into(),
            by_user: true,
            at_ms: 1,
            changes: vec![Change {
                kind: "event".into(),
                id: "ev-b".into(),
                owner: "ann".into(),
                before: None,
                after: Some(json!({"title": "B"})),
            }],
            receipt: Some(Receipt {
                call_key: format!("{id}#1#b"),
                output: json!({"id": "ev-b"}),
            }),
            conversation: Some(id.clone()),
        })
        .await
        .unwrap();

    let closed = engine
        .close_abandoned_turn(&id, &ActionId(ACTION.into()), "Sorry, that failed.", None)
        .await
        .unwrap();
    assert_eq!(closed, Abandoned::Closed);
    let rows = store.messages(&id, 0).await.unwrap();
    assert_eq!(rows.len(), 4, "{rows:?}");
    assert_eq!(rows[2].role, Role::Tool);
    assert_eq!(
        rows[2].parts,
        [
            ran,
            Part::ToolResult {
                tool_use_id: "b".into(),
                content: json!({"id": "ev-b"}),
                is_error: false,
            },
            Part::ToolResult {
                tool_use_id: "c".into(),
                content: json!({"error": "NOT EXECUTED: processing this message failed and was given up."}),
                is_error: true,
            },
        ]
    );
    assert_eq!(rows[3].text(), "Sorry, that failed.");
    // Closed once: giving it up again writes nothing.
    let again = engine
        .close_abandoned_turn(&id, &ActionId(ACTION.into()), "Sorry, that failed.", None)
        .await
        .unwrap();
    assert_eq!(again, Abandoned::Finished { latest: true });
    assert_eq!(store.messages(&id, 0).await.unwrap().len(), 4);
    // Once a later message has begun its turn, the closed one is no longer the latest.
    let mut later = row(&id, 4, Role::User, vec![Part::text("and a fourth")]);
    later.action_id = Some("web:c1.m2".into());
    store.append_message(&later).await.unwrap();
    let after = engine
        .close_abandoned_turn(&id, &ActionId(ACTION.into()), "Sorry, that failed.", None)
        .await
        .unwrap();
    assert_eq!(after, Abandoned::Finished { latest: false });
}

/// A turn left after its tool results (it needs no closing for the next turn to be coherent)
/// whose give-up comes after a later message began its turn (that job took the conversation's
/// lease as this one's last attempt gave it back) writes nothing: its line would land inside
/// the later turn, which had begun after this one's rows.
#[tokio::test]
async fn a_give_up_after_a_later_turn_began_writes_nothing_into_it() {
    let (store, engine, id) = setup().await;
    let result = Part::ToolResult {
        tool_use_id: "a".into(),
        content: json!({"id": "ev-a"}),
        is_error: false,
    };
    for message in [
        row(&id, 0, Role::User, vec![Part::text("one event")]),
        row(&id, 1, Role::Assistant, vec![asks("a", "A")]),
        row(&id, 2, Role::Tool, vec![result]),
    ] {
        store.append_message(&message).await.unwrap();
    }
    // The later turn is under way: its answer asks for a call.
    for mut message in [
        row(&id, 3, Role::User, vec![Part::text("and another")]),
        row(&id, 4, Role::Assistant, vec![asks("b", "B")]),
    ] {
        message.action_id = Some("web:c1.m2".into());
        store.append_message(&message).await.unwrap();
    }

    let closed = engine
        .close_abandoned_turn(&id, &ActionId(ACTION.into()), "Sorry, that failed.", None)
        .await
        .unwrap();
    assert_eq!(closed, Abandoned::Overtaken);
    assert_eq!(
        store.messages(&id, 0).await.unwrap().len(),
        5,
        "nothing written"
    );
}
