//! The byte limits (`store`'s `undo_bytes`) against DynamoDB's own: the emulator refuses an
//! item past 400 KB in a transaction as DynamoDB does, and the largest action the limits let
//! through is undone in one go, its undo's row one item.

mod support;

use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use serde_json::json;
use store::{
    ActionCommit, ActorKind, Change, MAX_ROW_BYTES, Records, StoreError, UndoOutcome, UndoRequest,
    UndoScope,
};
use store_dynamodb::DynamoStore;
use support::fresh_store;
use transcript::UserId;

/// The user's undo of their newest action, which must be `reverted` with `changes` records.
async fn undo_all(
    store: &DynamoStore,
    user: &UserId,
    action: &str,
    reverted: &str,
    changes: usize,
) {
    let undone = store
        .undo_last(&UndoRequest {
            user: user.clone(),
            scope: UndoScope::Anywhere,
            action_id: action.into(),
            actor: ActorKind::User,
            conversation: None,
            at_ms: 2,
            receipt: None,
        })
        .await
        .unwrap();
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, changes: c } if action_id == reverted && c.len() == changes),
        "{undone:?}"
    );
}

#[tokio::test]
async fn a_transaction_refuses_an_item_past_400_kb() {
    let store = fresh_store().await;
    let put = |bytes: usize| {
        let put = Put::builder()
            .table_name(store.table())
            .item("pk", AttributeValue::S("AUDIT#x".into()))
            .item("sk", AttributeValue::S(format!("ACT#{bytes}")))
            .item("changes", AttributeValue::S("z".repeat(bytes)))
            .build()
            .unwrap();
        TransactWriteItem::builder().put(put).build()
    };
    let client = support::client();
    let send = |bytes| {
        client
            .transact_write_items()
            .transact_items(put(bytes))
            .send()
    };
    assert!(
        send(400 * 1024).await.is_err(),
        "a 400 KB item must not fit"
    );
    send(MAX_ROW_BYTES + 1_000)
        .await
        .expect("a row at the limit fits");
}

#[tokio::test]
async fn the_largest_action_the_limits_let_through_undoes_in_one_go() {
    let store = fresh_store().await;
    let user = UserId::from("u-max");
    let create = |id: &str, bytes: usize| ActionCommit {
        action_id: "max".into(),
        actor: ActorKind::Agent,
        user: user.clone(),
        by_user: true,
        at_ms: 1,
        changes: vec![Change {
            kind: "program".into(),
            id: id.into(),
            owner: user.clone(),
            before: None,
            after: Some(json!({ "text": "x".repeat(bytes) })),
        }],
        receipt: None,
        conversation: None,
    };
    // 3 × 99.5 KB + 45 KB: about 344 KB, just inside MAX_ROW_BYTES; 10 KB more is not.
    for (id, bytes) in [
        ("p1", 99_500),
        ("p2", 99_500),
        ("p3", 99_500),
        ("p4", 45_000),
    ] {
        store.commit(&create(id, bytes)).await.unwrap();
    }
    let past = store.commit(&create("p5", 10_000)).await;
    assert!(matches!(past, Err(StoreError::TooLarge { .. })), "{past:?}");
    undo_all(&store, &user, "undo-max", "max", 4).await;
    for id in ["p1", "p2", "p3", "p4", "p5"] {
        assert!(store.record("program", id).await.unwrap().is_none(), "{id}");
    }
    let log = store.audit_log(&user).await.unwrap();
    let row = serde_json::to_string(&log[0].changes).unwrap().len();
    assert_eq!(log[0].reverts.as_deref(), Some("max"));
    assert!(
        row > 340_000 && row <= MAX_ROW_BYTES,
        "the undo's row: {row} bytes"
    );
}

#[tokio::test]
async fn the_heaviest_undo_of_edits_restores_big_records_in_one_go() {
    let store = fresh_store().await;
    let user = UserId::from("u-edits");
    let value = |bytes: usize, tag: u32| json!({ "tag": tag, "text": "x".repeat(bytes) });
    let commit = |action: &str, id: &str, before, after| ActionCommit {
        action_id: action.into(),
        actor: ActorKind::Agent,
        user: user.clone(),
        by_user: true,
        at_ms: 1,
        changes: vec![Change {
            kind: "program".into(),
            id: id.into(),
            owner: user.clone(),
            before,
            after,
        }],
        receipt: None,
        conversation: None,
    };
    for (id, bytes) in [("p1", 99_500), ("p2", 75_000)] {
        store
            .commit(&commit("seed", id, None, Some(value(bytes, 0))))
            .await
            .unwrap();
    }
    // Each edit's undo holds the record twice: 199 KB and 150 KB, about 349 KB together.
    for (id, bytes) in [("p1", 99_500), ("p2", 75_000)] {
        let (before, after) = (value(bytes, 0), value(bytes, 1));
        store
            .commit(&commit("edit", id, Some(before), Some(after)))
            .await
            .unwrap();
    }
    undo_all(&store, &user, "undo-edit", "edit", 2).await;
    for (id, bytes) in [("p1", 99_500), ("p2", 75_000)] {
        let record = store.record("program", id).await.unwrap().unwrap();
        assert_eq!(record.value, value(bytes, 0), "{id} restored");
    }
}
