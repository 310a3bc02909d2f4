//! An undo reads what it reverts, not the user's whole audit log. Before, every undo and every
//! undo question (`next_undo`, for the confirmation) queried the user's whole audit partition
//! and filtered it after the read, so each cost as many items as the user had ever changed,
//! and a manipulated model could ask again and again. Now the top of a conversation's stack is
//! one small entry, the top anywhere is the newest row on the stack read down the log, and the
//! top action's rows come from its index. A proxy in front of moto adds up the items DynamoDB
//! reads (a query's `ScannedCount`, the items a get returns), so the count is what AWS bills.
//! Rows written before the entries existed are still undone, from a query over that part of
//! the log.

use aws_sdk_dynamodb::types::AttributeValue;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use fake_lambda::moto_proxy::forward_to_moto;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use store::{ActionCommit, ActorKind, Change, Records, UndoOutcome, UndoRequest, UndoScope};
use store_dynamodb::DynamoStore;
use transcript::{ConversationId, UserId};

#[derive(Clone)]
struct Proxy {
    read: Arc<Mutex<u64>>,
    moto: String,
    http: reqwest::Client,
}

async fn forward(
    State(p): State<Proxy>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    let op = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("?")
        .to_owned();
    let answer = forward_to_moto(&p.http, &p.moto, headers, body).await;
    let out: Value = serde_json::from_slice(&answer.2).unwrap_or_default();
    let items = match op.as_str() {
        "Query" => out["ScannedCount"].as_u64().unwrap_or(0),
        "GetItem" => u64::from(out.get("Item").is_some()),
        "BatchGetItem" => out["Responses"].as_object().map_or(0, |r| {
            r.values()
                .filter_map(Value::as_array)
                .map(|a| a.len() as u64)
                .sum()
        }),
        _ => 0,
    };
    *p.read.lock().unwrap() += items;
    answer
}

struct Counted {
    store: DynamoStore,
    read: Arc<Mutex<u64>>,
    /// Straight to moto, for what no port does (making rows look older than the entries).
    raw: aws_sdk_dynamodb::Client,
    table: String,
}

impl Counted {
    async fn new() -> Self {
        let (_, table) = tests::moto::dynamo_table("undo-reads").await;
        let read = Arc::new(Mutex::new(0));
        let proxy = Proxy {
            read: read.clone(),
            moto: tests::moto::endpoint(),
            http: reqwest::Client::new(),
        };
        let client =
            tests::moto::client_through(Router::new().route("/", post(forward)).with_state(proxy))
                .await;
        Counted {
            store: DynamoStore::new(client, table.clone()),
            read,
            raw: tests::moto::client_at(&tests::moto::endpoint()),
            table,
        }
    }

    /// Items read since the last call.
    fn take(&self) -> u64 {
        std::mem::take(&mut *self.read.lock().unwrap())
    }
}

fn alice() -> UserId {
    UserId::from("alice")
}

fn conv(name: &str) -> ConversationId {
    ConversationId::from(name)
}

/// Alice's agent sets note `id` to `value` in `conversation`, as part of `action`.
async fn set(store: &DynamoStore, action: &str, conversation: &str, id: &str, value: i64) {
    let before = store.record("note", id).await.unwrap().map(|r| r.value);
    store
        .commit(&ActionCommit {
            action_id: action.into(),
            actor: ActorKind::Agent,
            user: alice(),
            by_user: true,
            at_ms: 1_000 + value,
            changes: vec![Change {
                kind: "note".into(),
                id: id.into(),
                owner: alice(),
                before,
                after: Some(json!({"n": value, "text": "x".repeat(1_000)})),
            }],
            receipt: None,
            conversation: Some(conv(conversation)),
        })
        .await
        .unwrap();
}

fn undo(scope: UndoScope, action: &str) -> UndoRequest {
    UndoRequest {
        user: alice(),
        scope,
        action_id: action.into(),
        actor: ActorKind::Agent,
        conversation: None,
        at_ms: 9_000,
        receipt: None,
    }
}

async fn note(store: &DynamoStore, id: &str) -> Option<i64> {
    let record = store.record("note", id).await.unwrap()?;
    record.value["n"].as_i64()
}

/// `history` older actions in another conversation, some of them undone; then, in "here", one
/// action of two rows with another conversation's row between them. What do the undo
/// question and the undo in "here", then an undo anywhere, read?
async fn reads_with(history: usize) -> (u64, u64, u64) {
    let c = Counted::new().await;
    for i in 0..history {
        set(
            &c.store,
            &format!("old-{i}"),
            "busy",
            &format!("old-{i}"),
            i as i64,
        )
        .await;
        if i % 3 == 0 {
            let undone = c
                .store
                .undo_last(&undo(
                    UndoScope::Conversation(conv("busy")),
                    &format!("u-{i}"),
                ))
                .await
                .unwrap();
            assert!(matches!(undone, UndoOutcome::Undone { .. }), "{undone:?}");
        }
    }
    set(&c.store, "turn-1", "here", "here-a", 1).await;
    set(&c.store, "elsewhere", "busy", "between", 2).await;
    set(&c.store, "turn-1", "here", "here-b", 3).await;
    let here = UndoScope::Conversation(conv("here"));

    c.take();
    let rows = c.store.next_undo(&alice(), &here).await.unwrap();
    let asked = c.take();
    let seqs: Vec<&str> = rows.iter().map(|r| r.action_id.as_str()).collect();
    assert_eq!(
        seqs,
        ["turn-1", "turn-1"],
        "both rows of the action, oldest first"
    );
    assert!(rows[0].seq < rows[1].seq);

    let undone = c
        .store
        .undo_last(&undo(here.clone(), "undo-here"))
        .await
        .unwrap();
    let undid = c.take();
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, changes } if action_id == "turn-1" && changes.len() == 2),
        "{undone:?}"
    );
    assert_eq!(
        (
            note(&c.store, "here-a").await,
            note(&c.store, "here-b").await
        ),
        (None, None)
    );
    assert_eq!(
        note(&c.store, "between").await,
        Some(2),
        "another conversation's row stays"
    );
    assert!(
        c.keys("STACK#4:here#").await.is_empty(),
        "the undone rows' entries went with the undo"
    );
    assert_eq!(
        c.keys("STACK#4:busy#").await.len(),
        history - history.div_ceil(3) + 1
    );
    c.take();
    assert!(c.store.next_undo(&alice(), &here).await.unwrap().is_empty());

    c.take();
    let anywhere = c
        .store
        .undo_last(&undo(UndoScope::Anywhere, "undo-anywhere"))
        .await
        .unwrap();
    let far = c.take();
    assert!(
        matches!(&anywhere, UndoOutcome::Undone { action_id, .. } if action_id == "elsewhere"),
        "{anywhere:?}"
    );
    (asked, undid, far)
}

#[tokio::test]
async fn an_undo_reads_the_same_few_items_however_long_the_log() {
    let short = reads_with(3).await;
    let long = reads_with(150).await;
    assert_eq!(
        short, long,
        "items read (question, undo here, undo anywhere) with 3 and with 150 earlier actions"
    );
    // The question and the undo: the audit head, the top entry, the action's index and its
    // two rows. Anywhere: the head, the log's first page of four (the undo and the undone
    // row lie on top of the newest row on the stack), the index and the row.
    assert_eq!(long, (5, 5, 7));
}

#[tokio::test]
async fn rows_from_before_the_stack_entries_are_still_undone_in_order() {
    let c = Counted::new().await;
    set(&c.store, "legacy-1", "here", "l1", 1).await;
    set(&c.store, "legacy-2", "busy", "l2", 2).await;
    set(&c.store, "legacy-3", "here", "l3", 3).await;
    // Make them look written before this version: no entries, no index, no `stack_from`.
    let pk = "AUDIT#alice";
    let items = c
        .raw
        .query()
        .table_name(&c.table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(pk.into()))
        .send()
        .await
        .unwrap()
        .items
        .unwrap_or_default();
    let mut stripped = 0;
    for item in items {
        let Some(AttributeValue::S(sk)) = item.get("sk") else {
            continue;
        };
        if sk.starts_with("STACK#") || sk.starts_with("AIDX#") {
            c.remove(sk).await;
            stripped += 1;
        }
    }
    assert_eq!(stripped, 6, "an entry and an index per row");
    c.raw
        .update_item()
        .table_name(&c.table)
        .key("pk", AttributeValue::S(pk.into()))
        .key("sk", AttributeValue::S("HEAD".into()))
        .update_expression("REMOVE stack_from")
        .send()
        .await
        .unwrap();

    // A new action after the upgrade, then undos: newest first, old rows included.
    set(&c.store, "new-4", "here", "n4", 4).await;
    let here = UndoScope::Conversation(conv("here"));
    for (k, expected) in ["new-4", "legacy-3", "legacy-1"].into_iter().enumerate() {
        let undone = c
            .store
            .undo_last(&undo(here.clone(), &format!("undo-{k}")))
            .await
            .unwrap();
        assert!(
            matches!(&undone, UndoOutcome::Undone { action_id, .. } if action_id == expected),
            "undo {k}: {undone:?}"
        );
    }
    assert_eq!(
        c.store.undo_last(&undo(here, "undo-3")).await.unwrap(),
        UndoOutcome::NothingToUndo
    );
    let anywhere = c
        .store
        .undo_last(&undo(UndoScope::Anywhere, "undo-4"))
        .await
        .unwrap();
    assert!(
        matches!(&anywhere, UndoOutcome::Undone { action_id, .. } if action_id == "legacy-2"),
        "{anywhere:?}"
    );
    assert_eq!(note(&c.store, "l2").await, None);
}

impl Counted {
    /// Deletes the item `sk` of alice's audit partition, as no port would.
    async fn remove(&self, sk: &str) {
        self.raw
            .delete_item()
            .table_name(&self.table)
            .key("pk", AttributeValue::S("AUDIT#alice".into()))
            .key("sk", AttributeValue::S(sk.into()))
            .send()
            .await
            .unwrap();
    }

    /// The sort keys of alice's audit partition that start with `prefix`.
    async fn keys(&self, prefix: &str) -> Vec<String> {
        let items = self
            .raw
            .query()
            .table_name(&self.table)
            .key_condition_expression("pk = :pk AND begins_with(sk, :p)")
            .expression_attribute_values(":pk", AttributeValue::S("AUDIT#alice".into()))
            .expression_attribute_values(":p", AttributeValue::S(prefix.into()))
            .send()
            .await
            .unwrap()
            .items
            .unwrap_or_default();
        items
            .iter()
            .filter_map(|i| match i.get("sk") {
                Some(AttributeValue::S(sk)) => Some(sk.clone()),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test]
async fn an_action_too_big_for_one_transaction_with_its_entries_a_stale_entry_a_lost_index_and_an_older_versions_row_still_undo_right()
 {
    let c = Counted::new().await;
    let here = UndoScope::Conversation(conv("here"));
    set(&c.store, "first", "here", "first", 1).await;
    // One turn as heavy as an action may be (32 commits, each a new note): 2 × 32 + 32 + 2
    // items to undo, and its 32 entries more would take it past 100. They are removed right
    // after it instead.
    for i in 0..32 {
        set(&c.store, "busy-turn", "here", &format!("busy-{i}"), 100 + i).await;
    }
    assert_eq!(c.keys("STACK#").await.len(), 33);
    let undone = c
        .store
        .undo_last(&undo(here.clone(), "undo-busy"))
        .await
        .unwrap();
    assert!(
        matches!(&undone, UndoOutcome::Undone { action_id, changes } if action_id == "busy-turn" && changes.len() == 32),
        "{undone:?}"
    );
    assert_eq!(note(&c.store, "busy-0").await, None);
    assert_eq!(
        c.keys("STACK#").await.len(),
        1,
        "only the first action's entry is left"
    );

    // A stale entry (as a crash right after such an undo leaves): skipped for the next.
    let stale = "STACK#4:here#00000000000000000030";
    c.raw
        .put_item()
        .table_name(&c.table)
        .item("pk", AttributeValue::S("AUDIT#alice".into()))
        .item("sk", AttributeValue::S(stale.into()))
        .item("action_id", AttributeValue::S("busy-turn".into()))
        .item("seq", AttributeValue::N("30".into()))
        .send()
        .await
        .unwrap();
    let next = c.store.next_undo(&alice(), &here).await.unwrap();
    assert_eq!(
        next.iter()
            .map(|r| r.action_id.as_str())
            .collect::<Vec<_>>(),
        ["first"]
    );

    // An action without its index (written by an older version after the entries began): the
    // stack is read from the whole log instead.
    set(&c.store, "second", "here", "second", 2).await;
    c.remove("AIDX#second").await;
    for expected in ["second", "first"] {
        let undone = c
            .store
            .undo_last(&undo(here.clone(), &format!("undo-{expected}")))
            .await
            .unwrap();
        assert!(
            matches!(&undone, UndoOutcome::Undone { action_id, .. } if action_id == expected),
            "{undone:?}"
        );
    }
    assert_eq!(
        c.store
            .undo_last(&undo(here.clone(), "undo-none"))
            .await
            .unwrap(),
        UndoOutcome::NothingToUndo
    );
    assert_eq!(
        (
            note(&c.store, "first").await,
            note(&c.store, "second").await
        ),
        (None, None)
    );

    // An older version, running beside this one, wrote a row of an action this one indexes
    // later (a turn resumed on the new version): an undo anywhere that meets the row the index
    // does not hold reads the whole log for it, rather than finding nothing forever.
    set(&c.store, "third", "here", "third", 3).await;
    set(&c.store, "mixed", "here", "m1", 4).await;
    let old_row = c.keys("STACK#4:here#").await.pop().unwrap();
    for sk in [old_row.as_str(), "AIDX#mixed"] {
        c.remove(sk).await;
    }
    set(&c.store, "mixed", "here", "m2", 5).await;
    let here_undone = c
        .store
        .undo_last(&undo(here.clone(), "undo-mixed-here"))
        .await
        .unwrap();
    assert!(
        matches!(&here_undone, UndoOutcome::Undone { action_id, changes } if action_id == "mixed" && changes.len() == 1),
        "the indexed row: {here_undone:?}"
    );
    for expected in ["mixed", "third"] {
        let undone = c
            .store
            .undo_last(&undo(
                UndoScope::Anywhere,
                &format!("undo-anywhere-{expected}"),
            ))
            .await
            .unwrap();
        assert!(
            matches!(&undone, UndoOutcome::Undone { action_id, .. } if action_id == expected),
            "{undone:?}"
        );
    }
    assert_eq!(
        (
            note(&c.store, "m1").await,
            note(&c.store, "m2").await,
            note(&c.store, "third").await
        ),
        (None, None, None)
    );
}
