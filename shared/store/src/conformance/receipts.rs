//! Tool-call receipts: a commit's receipt is written with its effect, atomically, once per key.

use crate::{ActionCommit, ActorKind, Change, Receipt, Store, StoreError};
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
