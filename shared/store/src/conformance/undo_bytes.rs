//! The byte limits of `store`'s `undo_bytes`, on every adapter: a record past
//! `MAX_RECORD_BYTES` or a row past `MAX_ROW_BYTES` is refused and writes nothing; an action
//! that edits one big record many times is counted its size once, not once an edit; an action
//! whose undo would hold more than one row takes is refused at the commit that would take it
//! there; an undo inside the action moves the count by what it restores; and every action that
//! was let through undoes in one go (on DynamoDB, an undo row past 400 KB could not be
//! written).

use crate::{
    ActionCommit, ActorKind, Change, MAX_RECORD_BYTES, Store, StoreError, UndoOutcome, UndoRequest,
    UndoScope,
};
use serde_json::{Value, json};
use transcript::UserId;

const USER: &str = "u-bytes";

/// A record value of about `kb` KB, told apart by `tag`.
fn sized(kb: usize, tag: u32) -> Value {
    json!({"tag": tag, "text": "x".repeat(kb * 1_000)})
}

fn commit(action: &str, changes: Vec<(&str, Option<Value>, Option<Value>)>) -> ActionCommit {
    ActionCommit {
        action_id: action.into(),
        actor: ActorKind::Agent,
        user: UserId::from(USER),
        by_user: true,
        at_ms: 1,
        changes: changes
            .into_iter()
            .map(|(id, before, after)| Change {
                kind: "program".into(),
                id: id.into(),
                owner: UserId::from(USER),
                before,
                after,
            })
            .collect(),
        receipt: None,
        conversation: None,
    }
}

/// The user's undo, as the assistant's undo tool asks it: under the turn's own action id.
async fn undo(store: &dyn Store, action: &str) -> UndoOutcome {
    store
        .undo_last(&UndoRequest {
            user: UserId::from(USER),
            scope: UndoScope::Anywhere,
            action_id: action.into(),
            actor: ActorKind::Agent,
            conversation: None,
            at_ms: 2,
            receipt: None,
        })
        .await
        .unwrap()
}

async fn value(store: &dyn Store, id: &str) -> Option<Value> {
    store.record("program", id).await.unwrap().map(|r| r.value)
}

fn too_large(result: Result<(), StoreError>, what: &str) {
    assert!(
        matches!(&result, Err(StoreError::TooLarge { what: w }) if w.contains(what)),
        "expected TooLarge naming {what:?}: {result:?}"
    );
}

async fn rows(store: &dyn Store) -> usize {
    store.audit_log(&UserId::from(USER)).await.unwrap().len()
}

pub async fn check_action_bytes(store: &dyn Store) {
    // A record past the limit is refused whole.
    let huge = json!({"text": "x".repeat(MAX_RECORD_BYTES)});
    too_large(
        store
            .commit(&commit("huge", vec![("p-huge", None, Some(huge))]))
            .await,
        "program/p-huge",
    );
    assert_eq!(value(store, "p-huge").await, None);
    assert_eq!(rows(store).await, 0);
    // So is a commit whose own row is past it: four 90 KB records at once.
    let wide = (0..4)
        .map(|i| (["w0", "w1", "w2", "w3"][i], None, Some(sized(90, 0))))
        .collect();
    too_large(store.commit(&commit("wide", wide)).await, "row");
    assert_eq!(value(store, "w0").await, None);

    // One 90 KB record made and edited 8 times in one action: counted once, all let through
    // (each edit's row holds it twice: 9 rows of 180 KB, within MAX_UNDO_WRITE_BYTES).
    let mut current = None;
    for tag in 0..9 {
        let next = sized(90, tag);
        store
            .commit(&commit(
                "edits",
                vec![("p-1", current.clone(), Some(next.clone()))],
            ))
            .await
            .unwrap_or_else(|e| panic!("edit {tag}: {e}"));
        current = Some(next);
    }
    // Three more 90 KB records in the same action fit one undo's row; a fourth would not.
    for id in ["p-2", "p-3"] {
        store
            .commit(&commit("edits", vec![(id, None, Some(sized(90, 0)))]))
            .await
            .unwrap();
    }
    let before = rows(store).await;
    too_large(
        store
            .commit(&commit("edits", vec![("p-4", None, Some(sized(90, 0)))]))
            .await,
        "one undo can take back",
    );
    assert_eq!(value(store, "p-4").await, None);
    assert_eq!(rows(store).await, before, "nothing written");
    // The whole action undoes in one go.
    let undone = undo(store, "undo-edits").await;
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, changes } if action_id == "edits" && changes.len() == 3),
        "{undone:?}"
    );
    for id in ["p-1", "p-2", "p-3"] {
        assert_eq!(value(store, id).await, None, "{id} undone");
    }

    // An undo inside an action: the action shrinks a 90 KB record, undoes that (the record is
    // 90 KB again), then edits it and adds records. The count starts afresh from the record as
    // it is: its undo holds 90 KB before and 90 KB after, so two more 90 KB records are one too
    // many.
    let big = sized(90, 1);
    store
        .commit(&commit("seed", vec![("b", None, Some(big.clone()))]))
        .await
        .unwrap();
    store
        .commit(&commit(
            "shrink",
            vec![("b", Some(big.clone()), Some(json!({})))],
        ))
        .await
        .unwrap();
    let undone = undo(store, "shrink").await;
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, .. } if action_id == "shrink"),
        "{undone:?}"
    );
    assert_eq!(value(store, "b").await, Some(big.clone()));
    let edited = sized(90, 2);
    store
        .commit(&commit(
            "shrink",
            vec![("b", Some(big.clone()), Some(edited.clone()))],
        ))
        .await
        .unwrap();
    store
        .commit(&commit("shrink", vec![("c", None, Some(sized(90, 0)))]))
        .await
        .unwrap();
    too_large(
        store
            .commit(&commit("shrink", vec![("d", None, Some(sized(90, 0)))]))
            .await,
        "one undo can take back",
    );
    let undone = undo(store, "undo-shrink").await;
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, changes } if action_id == "shrink" && changes.len() == 2),
        "{undone:?}"
    );
    assert_eq!(value(store, "b").await, Some(big));
    assert_eq!(value(store, "c").await, None);

    // One undo's write carries at most MAX_UNDO_WRITE_BYTES: a 90 KB record edited over and
    // over (its undo's row holding it once) is refused once the rows its undo would mark, with
    // what it restores, would pass 3.8 MB.
    let mut current = None;
    let mut edits = 0;
    let refused = loop {
        let next = sized(90, edits);
        let done = store
            .commit(&commit(
                "often",
                vec![("o-1", current.clone(), Some(next.clone()))],
            ))
            .await;
        if done.is_err() {
            break done;
        }
        current = Some(next);
        edits += 1;
        assert!(edits < 100, "never refused");
    };
    too_large(refused, "a write of");
    assert!((18..=21).contains(&edits), "{edits} commits of 180 KB rows");
    assert_eq!(value(store, "o-1").await, current);

    // Someone else grows the action's records between its commits (another conversation, an
    // MCP client, a form): the action's edits of them count what its undo would then hold.
    for id in ["t1", "t2", "t3", "t4"] {
        store
            .commit(&commit("thin", vec![(id, None, Some(json!({})))]))
            .await
            .unwrap();
        store
            .commit(&commit(
                &format!("grow-{id}"),
                vec![(id, Some(json!({})), Some(sized(90, 0)))],
            ))
            .await
            .unwrap();
    }
    for id in ["t1", "t2", "t3"] {
        store
            .commit(&commit(
                "thin",
                vec![(id, Some(sized(90, 0)), Some(sized(90, 1)))],
            ))
            .await
            .unwrap();
    }
    too_large(
        store
            .commit(&commit(
                "thin",
                vec![("t4", Some(sized(90, 0)), Some(sized(90, 1)))],
            ))
            .await,
        "one undo can take back",
    );
    assert_eq!(value(store, "t4").await, Some(sized(90, 0)));

    // Two commits racing for the action's last room: one gets it.
    for id in ["r1", "r2"] {
        store
            .commit(&commit("race", vec![(id, None, Some(sized(90, 0)))]))
            .await
            .unwrap();
    }
    let (a, b) = (
        commit("race", vec![("r3", None, Some(sized(90, 3)))]),
        commit("race", vec![("r4", None, Some(sized(90, 4)))]),
    );
    let (a, b) = tokio::join!(store.commit(&a), store.commit(&b));
    assert!(
        a.is_ok() != b.is_ok(),
        "exactly one of the racing commits fits: {a:?} {b:?}"
    );
    too_large(if a.is_ok() { b } else { a }, "one undo can take back");
}
