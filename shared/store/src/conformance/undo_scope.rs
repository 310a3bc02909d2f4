//! Undo scoped to a conversation: the audit log carries where each action was taken, a
//! conversation's undo reaches only its own actions (`next_undo` says which, reading only the
//! undo stack), an undo `Anywhere` reaches them all, and each undo's row names who undid.

use crate::{ActionCommit, ActorKind, Change, Store, UndoOutcome, UndoRequest, UndoScope};
use serde_json::{Value, json};
use transcript::{ConversationId, UserId};

fn alice() -> UserId {
    UserId::from("alice")
}

fn in_conversation(id: &str) -> UndoScope {
    UndoScope::Conversation(ConversationId::from(id))
}

/// Alice's action `action` in `conversation` (or outside any), changing `e` from `before` to
/// `after`.
async fn act(
    store: &dyn Store,
    action: &str,
    conversation: Option<&str>,
    e: &str,
    before: Option<Value>,
    after: Option<Value>,
) {
    store
        .commit(&ActionCommit {
            action_id: action.into(),
            actor: ActorKind::Agent,
            user: alice(),
            by_user: true,
            at_ms: 10,
            changes: vec![Change {
                kind: "event".into(),
                id: e.into(),
                owner: alice(),
                before,
                after,
            }],
            receipt: None,
            conversation: conversation.map(ConversationId::from),
        })
        .await
        .unwrap();
}

fn undo(
    scope: UndoScope,
    action: &str,
    actor: ActorKind,
    conversation: Option<&str>,
) -> UndoRequest {
    UndoRequest {
        user: alice(),
        scope,
        action_id: action.into(),
        actor,
        conversation: conversation.map(ConversationId::from),
        at_ms: 20,
        receipt: None,
    }
}

async fn value(store: &dyn Store, id: &str) -> Option<Value> {
    store.record("event", id).await.unwrap().map(|r| r.value)
}

async fn next_actions(store: &dyn Store, scope: &UndoScope) -> Vec<String> {
    store
        .next_undo(&alice(), scope)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.action_id)
        .collect()
}

pub async fn check_undo_scope(store: &dyn Store) {
    act(
        store,
        "a1",
        Some("conv-a"),
        "e1",
        None,
        Some(json!({"t": "a"})),
    )
    .await;
    act(
        store,
        "b1",
        Some("conv-b"),
        "e2",
        None,
        Some(json!({"t": "b"})),
    )
    .await;
    act(
        store,
        "a2",
        Some("conv-a"),
        "e1",
        Some(json!({"t": "a"})),
        Some(json!({"t": "a2"})),
    )
    .await;
    act(store, "w1", None, "e3", None, Some(json!({"t": "web"}))).await;

    let log = store.audit_log(&alice()).await.unwrap();
    let recorded: Vec<(&str, Option<&str>)> = log
        .iter()
        .map(|e| {
            (
                e.action_id.as_str(),
                e.conversation.as_ref().map(|c| c.0.as_str()),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("w1", None),
            ("a2", Some("conv-a")),
            ("b1", Some("conv-b")),
            ("a1", Some("conv-a"))
        ],
        "each audit row keeps the conversation it was taken in"
    );
    assert_eq!(
        next_actions(store, &in_conversation("conv-b")).await,
        ["b1"]
    );
    assert_eq!(
        next_actions(store, &in_conversation("conv-a")).await,
        ["a2"]
    );
    assert_eq!(next_actions(store, &UndoScope::Anywhere).await, ["w1"]);
    assert!(
        next_actions(store, &in_conversation("conv-c"))
            .await
            .is_empty()
    );
    assert_eq!(
        store
            .undo_last(&undo(
                in_conversation("conv-c"),
                "uc",
                ActorKind::Agent,
                Some("conv-c")
            ))
            .await
            .unwrap(),
        UndoOutcome::NothingToUndo,
        "a conversation with no actions of its own undoes nothing, however much is elsewhere"
    );

    // The agent in conversation B undoes B's action only, although A's and the web's are newer.
    let done = store
        .undo_last(&undo(
            in_conversation("conv-b"),
            "ub",
            ActorKind::Agent,
            Some("conv-b"),
        ))
        .await
        .unwrap();
    assert!(
        matches!(&done, UndoOutcome::Undone { action_id, .. } if action_id == "b1"),
        "{done:?}"
    );
    assert_eq!(value(store, "e2").await, None);
    assert_eq!(
        value(store, "e1").await,
        Some(json!({"t": "a2"})),
        "A's change stays"
    );
    assert_eq!(
        value(store, "e3").await,
        Some(json!({"t": "web"})),
        "the web's change stays"
    );
    assert_eq!(
        store
            .undo_last(&undo(
                in_conversation("conv-b"),
                "ub2",
                ActorKind::Agent,
                Some("conv-b")
            ))
            .await
            .unwrap(),
        UndoOutcome::NothingToUndo
    );

    // An MCP client in conversation A takes back A's newest action.
    let done = store
        .undo_last(&undo(
            in_conversation("conv-a"),
            "ua",
            ActorKind::Mcp,
            Some("conv-a"),
        ))
        .await
        .unwrap();
    assert!(
        matches!(&done, UndoOutcome::Undone { action_id, .. } if action_id == "a2"),
        "{done:?}"
    );
    assert_eq!(value(store, "e1").await, Some(json!({"t": "a"})));

    // The user in the web app, asking for it, reaches past conversations: the newest first.
    let done = store
        .undo_last(&undo(UndoScope::Anywhere, "uw", ActorKind::User, None))
        .await
        .unwrap();
    assert!(
        matches!(&done, UndoOutcome::Undone { action_id, .. } if action_id == "w1"),
        "{done:?}"
    );
    assert_eq!(next_actions(store, &UndoScope::Anywhere).await, ["a1"]);

    let log = store.audit_log(&alice()).await.unwrap();
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
            ("uw", Some("w1"), ActorKind::User, None),
            ("ua", Some("a2"), ActorKind::Mcp, Some("conv-a")),
            ("ub", Some("b1"), ActorKind::Agent, Some("conv-b")),
        ],
        "each undo is audited as who undid it, where"
    );
    assert!(
        log.iter()
            .filter(|e| e.reverts.is_some())
            .all(|e| e.by_user && e.undone_by.is_none()),
        "undos are the user's rows, never themselves on a stack"
    );
    assert!(
        next_actions(store, &in_conversation("conv-b"))
            .await
            .is_empty()
    );
}
