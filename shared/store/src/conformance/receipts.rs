//! Tool-call receipts: a commit's or an undo's receipt is written with its effect, atomically,
//! once per key.

use crate::{
    ActionCommit, ActorKind, AuditEntry, Change, Receipt, Store, StoreError, UndoOutcome,
    UndoReceipt, UndoRequest, UndoScope,
};
use serde_json::{Value, json};
use transcript::UserId;

fn creating(action: &str, id: &str, receipt: Option<Receipt>) -> ActionCommit {
    ActionCommit {
        action_id: action.into(),
        actor: ActorKind::Agent,
        user: UserId::from("u-receipts"),
        by_user: true,
        at_ms: 1,
        changes: vec![Change {
            kind: "event".into(),
            id: id.into(),
            owner: UserId::from("u-receipts"),
            before: None,
            after: Some(json!({"title": id})),
        }],
        receipt,
        conversation: None,
    }
}

fn receipt(key: &str, output: Value) -> Option<Receipt> {
    Some(Receipt {
        call_key: key.into(),
        output,
    })
}

pub async fn check_receipts(store: &dyn Store) {
    let key = "c1#3#toolu_1";
    assert_eq!(store.receipt(key).await.unwrap(), None);
    // An output of any shape comes back as it went in (keys unsorted, nested, large).
    let output = json!({"z": 1, "a": [true, null, {"y": "é", "b": 2.5}], "big": "x".repeat(5_000)});
    store
        .commit(&creating("a1", "e1", receipt(key, output.clone())))
        .await
        .unwrap();
    assert_eq!(store.receipt(key).await.unwrap(), Some(output.clone()));

    // A second commit with the same receipt (a racing attempt of the same call) writes nothing.
    let again = store
        .commit(&creating("a1", "e2", receipt(key, json!({"other": true}))))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    assert_eq!(store.record("event", "e2").await.unwrap(), None);
    assert_eq!(store.receipt(key).await.unwrap(), Some(output));
    let log = store.audit_log(&UserId::from("u-receipts")).await.unwrap();
    assert_eq!(log.len(), 1, "the refused commit left no audit row");

    // A commit refused for a stale `before` leaves no receipt either.
    let stale = ActionCommit {
        changes: vec![Change {
            kind: "event".into(),
            id: "e1".into(),
            owner: UserId::from("u-receipts"),
            before: Some(json!({"title": "not what is stored"})),
            after: None,
        }],
        ..creating(
            "a2",
            "e1",
            receipt("c1#3#toolu_2", json!({"deleted": "e1"})),
        )
    };
    assert!(matches!(
        store.commit(&stale).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.receipt("c1#3#toolu_2").await.unwrap(), None);

    // A commit without a receipt (a user's own button, a public form) needs none.
    store.commit(&creating("a3", "e3", None)).await.unwrap();
    assert!(store.record("event", "e3").await.unwrap().is_some());
}

fn undo_by_call(user: &UserId, receipt: Option<UndoReceipt>) -> UndoRequest {
    UndoRequest {
        user: user.clone(),
        scope: UndoScope::Anywhere,
        action_id: "undo-1".into(),
        actor: ActorKind::Agent,
        conversation: None,
        at_ms: 5,
        receipt,
    }
}

fn pinned(rows: &[AuditEntry], output: &str) -> Option<UndoReceipt> {
    Some(UndoReceipt {
        rows: rows.iter().map(|r| r.seq).collect(),
        receipt: Receipt {
            call_key: "c1#9#toolu_undo".into(),
            output: json!(output),
        },
    })
}

/// An undo made by a tool call writes its receipt with the undo, only for the rows its answer
/// describes, and once.
pub async fn check_undo_receipts(store: &dyn Store) {
    let user = UserId::from("u-receipts");
    store.commit(&creating("a1", "u1", None)).await.unwrap();
    store.commit(&creating("a2", "u2", None)).await.unwrap();
    let top = store.next_undo(&user, &UndoScope::Anywhere).await.unwrap();
    assert_eq!(top.len(), 1);
    assert_eq!(top[0].action_id, "a2");

    // Pinned to rows that are not the top of the stack: refused, nothing written.
    let elsewhere = vec![AuditEntry {
        seq: 999,
        ..top[0].clone()
    }];
    let moved = store
        .undo_last(&undo_by_call(&user, pinned(&elsewhere, "wrong")))
        .await;
    assert!(
        matches!(moved, Err(StoreError::Conflict { .. })),
        "{moved:?}"
    );
    assert!(store.record("event", "u2").await.unwrap().is_some());
    assert_eq!(store.receipt("c1#9#toolu_undo").await.unwrap(), None);

    // Pinned to the top: undone, with its receipt.
    let undone = store
        .undo_last(&undo_by_call(&user, pinned(&top, "Undone.")))
        .await
        .unwrap();
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, .. } if action_id == "a2"),
        "{undone:?}"
    );
    assert_eq!(store.record("event", "u2").await.unwrap(), None);
    assert_eq!(
        store.receipt("c1#9#toolu_undo").await.unwrap(),
        Some(json!("Undone."))
    );

    // A later attempt of the same call still pinned to the rows it undid (it read the stack
    // before the undo landed): refused, nothing written. (When such an attempt's transaction
    // itself races the undo, DynamoDB names the receipt first: `undo.rs` `why_refused`.)
    let late = store
        .undo_last(&undo_by_call(&user, pinned(&top, "Undone late.")))
        .await;
    assert!(matches!(late, Err(StoreError::Conflict { .. })), "{late:?}");

    // The same call again (a racing attempt, pinned to the new top): refused; a1 stays.
    let next = store.next_undo(&user, &UndoScope::Anywhere).await.unwrap();
    assert_eq!(next[0].action_id, "a1");
    let again = store
        .undo_last(&undo_by_call(&user, pinned(&next, "Undone again.")))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
    assert!(store.record("event", "u1").await.unwrap().is_some());
    assert_eq!(
        store.receipt("c1#9#toolu_undo").await.unwrap(),
        Some(json!("Undone."))
    );
}
