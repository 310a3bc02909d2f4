//! The conformance checks for [`Records`](crate::Records) (commits, audit, undo),
//! [`Confirmations`](crate::Confirmations) and [`ActiveRecords`](crate::ActiveRecords). Run through
//! [`conformance_tests!`](crate::conformance_tests) like the rest of the suite.

use crate::{
    ActionCommit, ActorKind, Change, Pending, Store, StoreError, UndoOutcome, UndoRequest,
    UndoScope,
};
use serde_json::{Value, json};
use transcript::{ConversationId, UserId};

fn user(name: &str) -> UserId {
    UserId::from(name)
}

fn change(
    kind: &str,
    id: &str,
    owner: &str,
    before: Option<Value>,
    after: Option<Value>,
) -> Change {
    Change {
        kind: kind.into(),
        id: id.into(),
        owner: user(owner),
        before,
        after,
    }
}

fn commit(action: &str, owner: &str, at_ms: i64, changes: Vec<Change>) -> ActionCommit {
    ActionCommit {
        action_id: action.into(),
        actor: ActorKind::Agent,
        user: user(owner),
        by_user: true,
        at_ms,
        changes,
        receipt: None,
        conversation: None,
    }
}

/// An undo by the user, reaching all their actions, outside any conversation.
fn undo(user: &UserId, action: &str, at_ms: i64) -> UndoRequest {
    UndoRequest {
        user: user.clone(),
        scope: UndoScope::Anywhere,
        action_id: action.into(),
        actor: ActorKind::User,
        conversation: None,
        at_ms,
        receipt: None,
    }
}

/// A public party's commit on `owner`'s records: audited under the owner, not on their stack.
fn public(action: &str, owner: &str, at_ms: i64, changes: Vec<Change>) -> ActionCommit {
    ActionCommit {
        actor: ActorKind::Public,
        by_user: false,
        ..commit(action, owner, at_ms, changes)
    }
}

async fn value(store: &dyn Store, kind: &str, id: &str) -> Option<Value> {
    store.record(kind, id).await.unwrap().map(|r| r.value)
}

fn is_conflict(result: Result<(), StoreError>) -> bool {
    matches!(result, Err(StoreError::Conflict { .. }))
}

/// A commit writes every record and one audit row; reads see values, owners and kinds apart.
pub async fn check_records_commit_and_read(store: &dyn Store) {
    assert_eq!(store.record("event", "e1").await.unwrap(), None);
    let spring = json!({"title": "Spring Open", "tags": ["a", {"z": 1, "y": null}], "n": 1.5});
    store
        .commit(&commit(
            "act-1",
            "alice",
            1_000,
            vec![
                change("event", "e1", "alice", None, Some(spring.clone())),
                change(
                    "event",
                    "e2",
                    "alice",
                    None,
                    Some(json!({"title": "Summer"})),
                ),
                change(
                    "attendee",
                    "a1",
                    "alice",
                    None,
                    Some(json!({"name": "Dana Lee"})),
                ),
            ],
        ))
        .await
        .unwrap();
    store
        .commit(&commit(
            "act-2",
            "bob",
            1_001,
            vec![change(
                "event",
                "e3",
                "bob",
                None,
                Some(json!({"title": "Bob's"})),
            )],
        ))
        .await
        .unwrap();

    let e1 = store
        .record("event", "e1")
        .await
        .unwrap()
        .expect("e1 stored");
    assert_eq!((e1.kind.as_str(), e1.id.as_str()), ("event", "e1"));
    assert_eq!(e1.owner, user("alice"));
    assert_eq!(e1.value, spring, "the value reads back equal");
    assert_eq!(
        store.record("attendee", "e1").await.unwrap(),
        None,
        "kinds are apart"
    );

    let ids = |records: Vec<crate::Record>| records.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.records_of(&user("alice"), "event").await.unwrap()),
        ["e1", "e2"]
    );
    assert_eq!(
        ids(store.records_of(&user("alice"), "attendee").await.unwrap()),
        ["a1"]
    );
    assert_eq!(
        ids(store.records_of(&user("bob"), "event").await.unwrap()),
        ["e3"]
    );
    assert!(
        store
            .records_of(&user("carol"), "event")
            .await
            .unwrap()
            .is_empty()
    );

    let log = store.audit_log(&user("alice")).await.unwrap();
    assert_eq!(log.len(), 1, "one audit row per commit: {log:?}");
    let row = &log[0];
    assert_eq!(row.action_id, "act-1");
    assert_eq!(row.actor, ActorKind::Agent);
    assert_eq!(row.user, user("alice"));
    assert!(row.by_user && row.on_undo_stack());
    assert_eq!(row.at_ms, 1_000);
    assert_eq!(row.changes.len(), 3);
    assert_eq!(row.changes[0].after, Some(spring));
    assert_eq!((row.reverts.clone(), row.undone_by.clone()), (None, None));

    // Update and delete with the right `before`, whatever the key order it was built in.
    let reordered: Value = serde_json::from_str(
        r#"{"tags": ["a", {"y": null, "z": 1}], "n": 1.5, "title": "Spring Open"}"#,
    )
    .unwrap();
    store
        .commit(&commit(
            "act-3",
            "alice",
            1_002,
            vec![
                change(
                    "event",
                    "e1",
                    "alice",
                    Some(reordered),
                    Some(json!({"title": "Spring Open 2"})),
                ),
                change(
                    "event",
                    "e2",
                    "alice",
                    Some(json!({"title": "Summer"})),
                    None,
                ),
            ],
        ))
        .await
        .unwrap();
    assert_eq!(
        value(store, "event", "e1").await,
        Some(json!({"title": "Spring Open 2"}))
    );
    assert_eq!(value(store, "event", "e2").await, None, "deleted");
    assert_eq!(
        ids(store.records_of(&user("alice"), "event").await.unwrap()),
        ["e1"]
    );
    let log = store.audit_log(&user("alice")).await.unwrap();
    let seqs: Vec<(u64, &str)> = log.iter().map(|e| (e.seq, e.action_id.as_str())).collect();
    assert_eq!(
        seqs,
        [(2, "act-3"), (1, "act-1")],
        "newest first, numbered per user"
    );
}

/// A stale `before`, a create over an existing record, an update of a missing one or a wrong
/// owner: `Conflict`, and nothing of the commit is written, audit row included.
pub async fn check_records_conflict_writes_nothing(store: &dyn Store) {
    store
        .commit(&commit(
            "act-1",
            "alice",
            1,
            vec![change("event", "e1", "alice", None, Some(json!({"v": 1})))],
        ))
        .await
        .unwrap();
    let cases = [
        (
            "stale before",
            change(
                "event",
                "e1",
                "alice",
                Some(json!({"v": 0})),
                Some(json!({"v": 2})),
            ),
        ),
        (
            "create over existing",
            change("event", "e1", "alice", None, Some(json!({"v": 2}))),
        ),
        (
            "update of missing",
            change(
                "event",
                "nope",
                "alice",
                Some(json!({"v": 1})),
                Some(json!({"v": 2})),
            ),
        ),
        (
            "delete of missing",
            change("event", "nope", "alice", Some(json!({"v": 1})), None),
        ),
        (
            "someone else's record",
            change(
                "event",
                "e1",
                "mallory",
                Some(json!({"v": 1})),
                Some(json!({"v": 2})),
            ),
        ),
    ];
    for (case, bad) in cases {
        let good = change("event", "fresh", "alice", None, Some(json!({"v": 9})));
        let result = store
            .commit(&commit("act-x", "alice", 2, vec![good, bad]))
            .await;
        assert!(is_conflict(result.clone_result()), "{case}: {result:?}");
        assert_eq!(
            value(store, "event", "fresh").await,
            None,
            "{case}: the good change is not written"
        );
        assert_eq!(
            value(store, "event", "e1").await,
            Some(json!({"v": 1})),
            "{case}"
        );
    }
    assert_eq!(
        store.audit_log(&user("alice")).await.unwrap().len(),
        1,
        "no audit row for refused commits"
    );

    let invalid = [
        commit("act-y", "alice", 3, vec![]),
        commit(
            "act-y",
            "alice",
            3,
            vec![change("event", "z", "alice", None, None)],
        ),
        commit(
            "act-y",
            "alice",
            3,
            vec![
                change("event", "z", "alice", None, Some(json!(1))),
                change("event", "z", "alice", Some(json!(1)), Some(json!(2))),
            ],
        ),
    ];
    for bad in invalid {
        let result = store.commit(&bad).await;
        assert!(
            matches!(result, Err(StoreError::Invalid { .. })),
            "{bad:?}: {result:?}"
        );
    }
    assert_eq!(value(store, "event", "z").await, None);
}

trait CloneResult {
    fn clone_result(&self) -> Result<(), StoreError>;
}

impl CloneResult for Result<(), StoreError> {
    fn clone_result(&self) -> Result<(), StoreError> {
        match self {
            Ok(()) => Ok(()),
            Err(StoreError::Conflict { what }) => Err(StoreError::Conflict { what: what.clone() }),
            Err(other) => Err(StoreError::Invalid {
                what: other.to_string(),
            }),
        }
    }
}

/// Undo is strictly last in, first out, per user; an action of several commits is reverted
/// whole; an empty stack says so.
pub async fn check_undo_lifo(store: &dyn Store) {
    let alice = user("alice");
    store
        .commit(&commit(
            "a1",
            "alice",
            10,
            vec![change(
                "event",
                "e1",
                "alice",
                None,
                Some(json!({"t": "one"})),
            )],
        ))
        .await
        .unwrap();
    store
        .commit(&commit(
            "a2",
            "alice",
            20,
            vec![change(
                "event",
                "e1",
                "alice",
                Some(json!({"t": "one"})),
                Some(json!({"t": "two"})),
            )],
        ))
        .await
        .unwrap();
    // a3: two commits of one action (one user turn), touching e1 twice and creating e2.
    store
        .commit(&commit(
            "a3",
            "alice",
            30,
            vec![change(
                "event",
                "e1",
                "alice",
                Some(json!({"t": "two"})),
                Some(json!({"t": "three"})),
            )],
        ))
        .await
        .unwrap();
    store
        .commit(&commit(
            "a3",
            "alice",
            30,
            vec![
                change(
                    "event",
                    "e1",
                    "alice",
                    Some(json!({"t": "three"})),
                    Some(json!({"t": "four"})),
                ),
                change("event", "e2", "alice", None, Some(json!({"t": "new"}))),
            ],
        ))
        .await
        .unwrap();
    // Bob's action is newer but on his own stack.
    store
        .commit(&commit(
            "b1",
            "bob",
            40,
            vec![change(
                "event",
                "b1",
                "bob",
                None,
                Some(json!({"t": "bob"})),
            )],
        ))
        .await
        .unwrap();

    let undone = store.undo_last(&undo(&alice, "u1", 50)).await.unwrap();
    let UndoOutcome::Undone { action_id, changes } = undone else {
        panic!("expected Undone, got {undone:?}");
    };
    assert_eq!(action_id, "a3");
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(
        value(store, "event", "e1").await,
        Some(json!({"t": "two"})),
        "both commits of a3 reverted"
    );
    assert_eq!(value(store, "event", "e2").await, None);
    assert_eq!(
        value(store, "event", "b1").await,
        Some(json!({"t": "bob"})),
        "bob untouched"
    );

    let next = store.undo_last(&undo(&alice, "u2", 60)).await.unwrap();
    assert!(
        matches!(&next, UndoOutcome::Undone { action_id, .. } if action_id == "a2"),
        "{next:?}"
    );
    assert_eq!(value(store, "event", "e1").await, Some(json!({"t": "one"})));
    let next = store.undo_last(&undo(&alice, "u3", 70)).await.unwrap();
    assert!(
        matches!(&next, UndoOutcome::Undone { action_id, .. } if action_id == "a1"),
        "{next:?}"
    );
    assert_eq!(value(store, "event", "e1").await, None);
    assert_eq!(
        store.undo_last(&undo(&alice, "u4", 80)).await.unwrap(),
        UndoOutcome::NothingToUndo
    );

    let log = store.audit_log(&alice).await.unwrap();
    let undone_by: Vec<(&str, Option<&str>)> = log
        .iter()
        .filter(|e| e.reverts.is_none())
        .map(|e| (e.action_id.as_str(), e.undone_by.as_deref()))
        .collect();
    assert_eq!(
        undone_by,
        [
            ("a3", Some("u1")),
            ("a3", Some("u1")),
            ("a2", Some("u2")),
            ("a1", Some("u3"))
        ]
    );
    let undos: Vec<(&str, Option<&str>)> = log
        .iter()
        .filter(|e| e.reverts.is_some())
        .map(|e| (e.action_id.as_str(), e.reverts.as_deref()))
        .collect();
    assert_eq!(
        undos,
        [("u3", Some("a1")), ("u2", Some("a2")), ("u1", Some("a3"))],
        "each undo is audited"
    );
    assert!(log.iter().all(|e| !e.on_undo_stack()));

    let bob = store
        .undo_last(&undo(&user("bob"), "ub", 90))
        .await
        .unwrap();
    assert!(
        matches!(&bob, UndoOutcome::Undone { action_id, .. } if action_id == "b1"),
        "{bob:?}"
    );
    assert_eq!(value(store, "event", "b1").await, None);
}

/// A record of the action changed since: nothing is reverted, the stack stays as it was.
/// Actions of other parties (a public form) are not on the owner's stack and are never
/// reverted by the owner's undo.
pub async fn check_undo_conflict_and_other_parties(store: &dyn Store) {
    let alice = user("alice");
    store
        .commit(&commit(
            "a1",
            "alice",
            10,
            vec![
                change(
                    "event",
                    "e1",
                    "alice",
                    None,
                    Some(json!({"t": "Spring", "status": "draft"})),
                ),
                change("event", "e2", "alice", None, Some(json!({"t": "Summer"}))),
            ],
        ))
        .await
        .unwrap();
    store
        .commit(&commit(
            "a2",
            "alice",
            20,
            vec![
                change(
                    "event",
                    "e1",
                    "alice",
                    Some(json!({"t": "Spring", "status": "draft"})),
                    Some(json!({"t": "Spring", "status": "published"})),
                ),
                change(
                    "event",
                    "e2",
                    "alice",
                    Some(json!({"t": "Summer"})),
                    Some(json!({"t": "Summer Cup"})),
                ),
            ],
        ))
        .await
        .unwrap();
    // Someone registers through the public form: a new record, audited under alice.
    store
        .commit(&public(
            "p1",
            "alice",
            30,
            vec![change(
                "attendee",
                "t1",
                "alice",
                None,
                Some(json!({"name": "Dana Lee"})),
            )],
        ))
        .await
        .unwrap();

    let undone = store.undo_last(&undo(&alice, "u1", 40)).await.unwrap();
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, .. } if action_id == "a2"),
        "{undone:?}"
    );
    assert_eq!(
        value(store, "event", "e1").await,
        Some(json!({"t": "Spring", "status": "draft"}))
    );
    assert_eq!(
        value(store, "event", "e2").await,
        Some(json!({"t": "Summer"}))
    );
    assert_eq!(
        value(store, "attendee", "t1").await,
        Some(json!({"name": "Dana Lee"})),
        "the public registration stays"
    );

    // A public edit of e2 after a1: undoing a1 (which created e1 and e2) would lose it.
    store
        .commit(&public(
            "p2",
            "alice",
            50,
            vec![change(
                "event",
                "e2",
                "alice",
                Some(json!({"t": "Summer"})),
                Some(json!({"t": "Summer!"})),
            )],
        ))
        .await
        .unwrap();
    let refused = store.undo_last(&undo(&alice, "u2", 60)).await.unwrap();
    assert_eq!(
        refused,
        UndoOutcome::ChangedSince {
            action_id: "a1".into(),
            kind: "event".into(),
            id: "e2".into()
        }
    );
    assert_eq!(
        value(store, "event", "e1").await,
        Some(json!({"t": "Spring", "status": "draft"})),
        "nothing reverted"
    );
    assert_eq!(
        value(store, "event", "e2").await,
        Some(json!({"t": "Summer!"}))
    );
    let log = store.audit_log(&alice).await.unwrap();
    assert!(
        log.iter().any(|e| e.action_id == "a1" && e.on_undo_stack()),
        "a1 is still on the stack"
    );
    assert!(
        !log.iter().any(|e| e.action_id == "u2"),
        "a refused undo writes no audit row"
    );
    assert!(
        log.iter()
            .filter(|e| e.actor == ActorKind::Public)
            .all(|e| !e.on_undo_stack())
    );

    // Once the record is back to what a1 left, the undo goes through.
    store
        .commit(&public(
            "p3",
            "alice",
            70,
            vec![change(
                "event",
                "e2",
                "alice",
                Some(json!({"t": "Summer!"})),
                Some(json!({"t": "Summer"})),
            )],
        ))
        .await
        .unwrap();
    let undone = store.undo_last(&undo(&alice, "u3", 80)).await.unwrap();
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, .. } if action_id == "a1"),
        "{undone:?}"
    );
    assert_eq!(value(store, "event", "e1").await, None);
    assert_eq!(value(store, "event", "e2").await, None);
    assert_eq!(
        value(store, "attendee", "t1").await,
        Some(json!({"name": "Dana Lee"}))
    );
    assert_eq!(
        store.undo_last(&undo(&alice, "u4", 90)).await.unwrap(),
        UndoOutcome::NothingToUndo
    );
}

/// An action's commits weigh at most `MAX_ACTION_WEIGHT` together (two per change, one per
/// commit), so one undo can always take all of it back: a commit past it is `TooLarge` and
/// writes nothing, wherever the model chains its calls; another action starts afresh; a commit
/// too heavy on its own is refused too; other parties' commits are not counted. Then the whole
/// action undoes in one go.
pub async fn check_action_weight(store: &dyn Store) {
    let one = |action: &str, id: String, at: i64| {
        commit(
            action,
            "alice",
            at,
            vec![change("note", &id, "alice", None, Some(json!({"at": at})))],
        )
    };
    // Each commit of one new record weighs 3: 32 of them make 96.
    let full = crate::MAX_ACTION_WEIGHT / 3;
    for i in 0..full {
        store
            .commit(&one("chain", format!("n{i}"), i as i64))
            .await
            .unwrap();
    }
    let before = store.audit_log(&user("alice")).await.unwrap().len();
    let past = store.commit(&one("chain", "past".into(), 100)).await;
    assert!(matches!(past, Err(StoreError::TooLarge { .. })), "{past:?}");
    assert!(store.record("note", "past").await.unwrap().is_none());
    assert_eq!(store.audit_log(&user("alice")).await.unwrap().len(), before);
    // A party that is not the user is not on the stack, and not counted.
    store
        .commit(&public(
            "chain",
            "alice",
            101,
            vec![change("note", "form", "alice", None, Some(json!({})))],
        ))
        .await
        .unwrap();
    // Another action starts afresh.
    store
        .commit(&one("next", "next".into(), 102))
        .await
        .unwrap();
    // One commit too heavy on its own: 49 changes weigh 99.
    let heavy = commit(
        "heavy",
        "alice",
        103,
        (0..49)
            .map(|i| change("note", &format!("h{i}"), "alice", None, Some(json!({}))))
            .collect(),
    );
    let refused = store.commit(&heavy).await;
    assert!(
        matches!(refused, Err(StoreError::TooLarge { .. })),
        "{refused:?}"
    );
    assert!(store.record("note", "h0").await.unwrap().is_none());
    // The chain undoes whole: "next" first, then all 32 of its rows at once.
    for (k, expected) in ["next", "chain"].into_iter().enumerate() {
        let outcome = store
            .undo_last(&undo(&user("alice"), &format!("undo-{k}"), 200 + k as i64))
            .await
            .unwrap();
        match outcome {
            UndoOutcome::Undone { action_id, changes } => {
                assert_eq!(action_id, expected);
                if expected == "chain" {
                    assert_eq!(changes.len(), full);
                }
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(store.record("note", "n0").await.unwrap().is_none());
    assert!(store.record("note", "form").await.unwrap().is_some());
}

/// Concurrent commits on one record from the same `before`: exactly one wins. Concurrent
/// commits of one user on different records all land, numbered without gaps.
pub async fn check_concurrent_commits(store: &dyn Store) {
    store
        .commit(&commit(
            "seed",
            "alice",
            1,
            vec![change("event", "e1", "alice", None, Some(json!({"v": 0})))],
        ))
        .await
        .unwrap();
    let outcomes = parallel(6, |i| async move {
        store
            .commit(&commit(
                &format!("race-{i}"),
                "alice",
                2,
                vec![change(
                    "event",
                    "e1",
                    "alice",
                    Some(json!({"v": 0})),
                    Some(json!({"v": i + 1})),
                )],
            ))
            .await
    });
    let mut won = 0;
    for outcome in outcomes {
        match outcome {
            Ok(()) => won += 1,
            Err(StoreError::Conflict { .. }) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(won, 1, "exactly one writer wins");

    let outcomes = parallel(6, |i| async move {
        store
            .commit(&commit(
                &format!("new-{i}"),
                "alice",
                3,
                vec![change(
                    "event",
                    &format!("n{i}"),
                    "alice",
                    None,
                    Some(json!(i)),
                )],
            ))
            .await
    });
    for outcome in outcomes {
        outcome.unwrap();
    }
    let log = store.audit_log(&user("alice")).await.unwrap();
    let mut seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
    seqs.sort_unstable();
    assert_eq!(
        seqs,
        (1..=8).collect::<Vec<u64>>(),
        "one row per commit, no gaps"
    );
}

fn pending(conversation: &str, hash: &str, action: &str, expires_at_ms: i64) -> Pending {
    Pending {
        conversation: ConversationId::from(conversation),
        hash: hash.into(),
        created_on_action: action.into(),
        description: "Withdraw Dana Lee from Spring Open".into(),
        expires_at_ms,
    }
}

/// A pending confirmation is consumed once, only on a later action, only while live.
pub async fn check_pending_confirmations(store: &dyn Store) {
    let conv = ConversationId::from("conv-1");
    assert_eq!(
        store.take_pending(&conv, "h1", "act-2", 0).await.unwrap(),
        None,
        "unknown"
    );

    let p = pending("conv-1", "h1", "act-1", 1_000);
    store.put_pending(&p).await.unwrap();
    // Reading leaves the record; only a live one is read, of its own conversation and hash.
    assert_eq!(
        store.read_pending(&conv, "h1", 10).await.unwrap(),
        Some(p.clone()),
        "read while live"
    );
    assert_eq!(
        store.read_pending(&conv, "h1", 1_000).await.unwrap(),
        None,
        "read at expires_at_ms"
    );
    assert_eq!(
        store
            .read_pending(&ConversationId::from("conv-2"), "h1", 10)
            .await
            .unwrap(),
        None,
        "read from another conversation"
    );
    assert_eq!(
        store.read_pending(&conv, "h2", 10).await.unwrap(),
        None,
        "read of another hash"
    );
    assert_eq!(
        store.take_pending(&conv, "h1", "act-1", 10).await.unwrap(),
        None,
        "same action"
    );
    assert_eq!(
        store.take_pending(&conv, "h2", "act-2", 10).await.unwrap(),
        None,
        "other hash"
    );
    let other = ConversationId::from("conv-2");
    assert_eq!(
        store.take_pending(&other, "h1", "act-2", 10).await.unwrap(),
        None,
        "other conversation"
    );
    assert_eq!(
        store.take_pending(&conv, "h1", "act-2", 10).await.unwrap(),
        Some(p.clone()),
        "later action"
    );
    assert_eq!(
        store.read_pending(&conv, "h1", 10).await.unwrap(),
        None,
        "taken: nothing to read"
    );
    assert_eq!(
        store.take_pending(&conv, "h1", "act-3", 11).await.unwrap(),
        None,
        "consumed once"
    );

    store.put_pending(&p).await.unwrap();
    assert_eq!(
        store
            .take_pending(&conv, "h1", "act-2", 1_000)
            .await
            .unwrap(),
        None,
        "expired at expires_at_ms"
    );
    // Putting again replaces the record, expiry and action included.
    let renewed = pending("conv-1", "h1", "act-5", 5_000);
    store.put_pending(&renewed).await.unwrap();
    assert_eq!(
        store
            .take_pending(&conv, "h1", "act-5", 2_000)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .take_pending(&conv, "h1", "act-6", 2_000)
            .await
            .unwrap(),
        Some(renewed)
    );
}

/// Concurrent takers of one pending record: at most one gets it.
pub async fn check_concurrent_take_pending(store: &dyn Store) {
    store
        .put_pending(&pending("conv-1", "h1", "act-1", i64::MAX))
        .await
        .unwrap();
    let outcomes = parallel(8, |i| async move {
        store
            .take_pending(
                &ConversationId::from("conv-1"),
                "h1",
                &format!("act-{}", i + 2),
                5,
            )
            .await
            .unwrap()
    });
    let got = outcomes.iter().filter(|o| o.is_some()).count();
    assert_eq!(got, 1, "{outcomes:?}");
}

/// Run `work(i)` for `i in 0..n` on `n` threads released together; the outputs in order.
fn parallel<T, F>(n: usize, work: impl Fn(usize) -> F + Sync) -> Vec<T>
where
    T: Send,
    F: Future<Output = T>,
{
    let runtime = tokio::runtime::Handle::current();
    let barrier = std::sync::Barrier::new(n);
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..n)
                .map(|i| {
                    let (runtime, barrier, work) = (&runtime, &barrier, &work);
                    scope.spawn(move || {
                        let future = work(i);
                        barrier.wait();
                        runtime.block_on(future)
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("worker thread panicked"))
                .collect()
        })
    })
}

/// A conversation's active record per kind; setting again moves it.
pub async fn check_active_records(store: &dyn Store) {
    let conv = ConversationId::from("conv-1");
    assert_eq!(store.active(&conv, "event").await.unwrap(), None);
    store.set_active(&conv, "event", "e1").await.unwrap();
    store.set_active(&conv, "attendee", "t1").await.unwrap();
    store.set_active(&conv, "event", "e2").await.unwrap();
    assert_eq!(
        store.active(&conv, "event").await.unwrap().as_deref(),
        Some("e2")
    );
    assert_eq!(
        store.active(&conv, "attendee").await.unwrap().as_deref(),
        Some("t1")
    );
    assert_eq!(
        store
            .active(&ConversationId::from("conv-2"), "event")
            .await
            .unwrap(),
        None
    );

    // Read together: the owner's records of the kind, by id, and the pointer as it is.
    let event = |id: &str, owner: &str, title: &str| {
        change("event", id, owner, None, Some(json!({ "title": title })))
    };
    store
        .commit(&commit(
            "a-active",
            "ana",
            1,
            vec![
                event("e2", "ana", "Second"),
                event("e1", "ana", "First"),
                change("attendee", "t1", "ana", None, Some(json!({}))),
            ],
        ))
        .await
        .unwrap();
    store
        .commit(&commit(
            "b-active",
            "bo",
            2,
            vec![event("e3", "bo", "Bo's")],
        ))
        .await
        .unwrap();
    let (records, active) = store
        .records_with_active(&user("ana"), "event", &conv)
        .await
        .unwrap();
    assert_eq!(
        records,
        store.records_of(&user("ana"), "event").await.unwrap()
    );
    assert_eq!(
        records.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["e1", "e2"]
    );
    assert_eq!(active.as_deref(), Some("e2"));
    // Another's conversation, another's pointer: given as it is (the caller gates it).
    store
        .set_active(&ConversationId::from("conv-2"), "event", "e3")
        .await
        .unwrap();
    let (records, active) = store
        .records_with_active(&user("ana"), "event", &ConversationId::from("conv-2"))
        .await
        .unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(active.as_deref(), Some("e3"));
    let (records, active) = store
        .records_with_active(&user("cy"), "event", &ConversationId::from("conv-3"))
        .await
        .unwrap();
    assert!(records.is_empty() && active.is_none());
}
