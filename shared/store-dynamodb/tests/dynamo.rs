//! What the conformance suite cannot see: the items on the table (key layout, TTL, large-body
//! chunks), expired items written by hand, and failures mapped to `StoreError`.
//! Needs `AWS_ENDPOINT_URL` (see `support`).

mod support;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValuesOnConditionCheckFailure};
use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};
use store::{
    ActionCommit, ActorKind, Change, Claim, ConversationStore, Identities, JobClaims, MessageStore,
    Records, StoreError, UndoOutcome, UndoRequest, UndoScope, VisibleEntry, VisibleRole,
    VisibleStore,
};
use store_dynamodb::{DynamoStore, create_table};
use support::fresh_store;
use transcript::{Conversation, ConversationId, Message, Part, Role};

type Item = HashMap<String, AttributeValue>;

#[tokio::test]
async fn items_follow_the_documented_key_layout() {
    let store = fresh_store().await;
    let conv = Conversation {
        created_at_ms: 1_700_000_000_123,
        ..Conversation::new("c#1", "alice", "web", "support")
    };
    store.create_conversation(&conv).await.unwrap();
    let m = message(&conv.id, 3, 42, "hello");
    store.append_message(&m).await.unwrap();
    let seen = visible(&conv.id, 7, "hi there");
    store.append_visible(&seen).await.unwrap();

    let meta = get(&store, "CONV#c#1", "META")
        .await
        .expect("conversation item");
    assert_eq!(meta["gsi1pk"], s("USER#alice"));
    // 1_700_000_000_123 + 2^63 (the sign bit flipped), padded to 20 digits, then the id.
    assert_eq!(meta["gsi1sk"], s("09223373736854775931#c#1"));
    assert_eq!(meta["user_id"], s("alice"));
    assert_eq!(meta["status"], s("active"));
    assert_eq!(meta["turn"], n("0"));

    let msg = get(&store, "CONV#c#1", "MSG#00000000000000000042")
        .await
        .expect("message item");
    assert_eq!(msg["segment"], n("3"));
    assert_eq!(msg["lsi1sk"], s("MSG#0000000003#00000000000000000042"));
    assert_eq!(msg["chunks"], n("1"));
    assert_eq!(msg["body"], s(serde_json::to_string(&m).unwrap()));

    let entry = get(&store, "CONV#c#1", "SEEN#00000000000000000007")
        .await
        .expect("visible item");
    assert_eq!(entry["body"], s(serde_json::to_string(&seen).unwrap()));
    assert!(
        !entry.contains_key("lsi1sk"),
        "visible entries stay out of lsi1"
    );
}

/// `records_of` reads the owner's listing in the base table (strongly consistent), not a global
/// index: each commit and undo writes the listing entry in the record's own transaction.
#[tokio::test]
async fn an_owners_listing_is_kept_in_the_records_transaction() {
    let store = fresh_store().await;
    let commit = |action: &str, before: Option<serde_json::Value>, after| ActionCommit {
        action_id: action.into(),
        actor: ActorKind::Agent,
        user: "alice".into(),
        by_user: true,
        at_ms: 1,
        changes: vec![Change {
            kind: "event".into(),
            id: "e#1".into(),
            owner: "alice".into(),
            before,
            after,
        }],
        receipt: None,
        conversation: None,
    };
    let v1 = serde_json::json!({"title": "Spring Open"});
    store
        .commit(&commit("a1", None, Some(v1.clone())))
        .await
        .unwrap();
    let listed = get(&store, "OWNER#alice#event", "REC#e#1")
        .await
        .expect("the listing entry is written with the record");
    assert_eq!(listed["body"], s(r#"{"title":"Spring Open"}"#));
    assert!(!listed.contains_key("gsi1pk"), "no index is involved");
    let record = get(&store, "REC#event#e#1", "REC").await.unwrap();
    assert!(!record.contains_key("gsi1pk"));

    store
        .commit(&commit("a2", Some(v1.clone()), None))
        .await
        .unwrap();
    assert!(get(&store, "OWNER#alice#event", "REC#e#1").await.is_none());
    assert!(
        store
            .records_of(&"alice".into(), "event")
            .await
            .unwrap()
            .is_empty()
    );

    let undone = store
        .undo_last(&UndoRequest {
            user: "alice".into(),
            scope: UndoScope::Anywhere,
            action_id: "a3".into(),
            actor: ActorKind::User,
            conversation: None,
            at_ms: 2,
            receipt: None,
        })
        .await
        .unwrap();
    assert!(matches!(undone, UndoOutcome::Undone { .. }), "{undone:?}");
    assert!(get(&store, "OWNER#alice#event", "REC#e#1").await.is_some());
    let records = store.records_of(&"alice".into(), "event").await.unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].value, v1);
}

#[tokio::test]
async fn a_claim_carries_a_ttl_running_or_done_and_no_attempt_once_done() {
    let store = fresh_store().await;
    let t0 = 1_800_000_000_000;
    assert_eq!(
        store.claim_job("wa#1", t0, t0 + 60_000).await.unwrap(),
        Claim::Fresh
    );
    let running = get(&store, "JOB#wa#1", "CLAIM").await.expect("claim item");
    assert_eq!(running["status"], s("running"));
    assert_eq!(running["attempt"], n("1"));
    assert_eq!(running["expires_at_ms"], n(&(t0 + 60_000).to_string()));
    // A claim nobody finishes (its job dead-lettered) goes 30 days past its expiry.
    let abandoned_s = (t0 + 60_000 + store::KEEP_ABANDONED_MS).div_euclid(1000);
    assert_eq!(running["ttl"], n(&abandoned_s.to_string()));
    // A takeover moves it with the new expiry.
    let t1 = t0 + 120_000;
    assert_eq!(
        store.claim_job("wa#1", t1, t1 + 60_000).await.unwrap(),
        Claim::TakenOver { attempt: 2 }
    );
    let taken = get(&store, "JOB#wa#1", "CLAIM").await.expect("claim item");
    assert_eq!(taken["ttl"], n(&(abandoned_s + 120).to_string()));
    // The claim a web job takes with its conversation's lease carries it too.
    let conversation = transcript::ConversationId("c-claim".into());
    let both = store::TurnWrites::claim_with_lease(
        &store,
        &store::ClaimWithLease {
            job_key: "web#1",
            now_ms: t0,
            claim_until_ms: t0 + 60_000,
            conversation: &conversation,
            holder: "web#1",
            lease_until_ms: t0 + 30_000,
        },
    )
    .await
    .unwrap();
    assert_eq!(both, store::ClaimedWithLease::Both);
    let leased = get(&store, "JOB#web#1", "CLAIM").await.expect("claim item");
    assert_eq!(leased["ttl"], n(&abandoned_s.to_string()));

    store.finish_job("wa#1", t0 + 86_400_001).await.unwrap();
    let done = get(&store, "JOB#wa#1", "CLAIM").await.expect("claim item");
    assert_eq!(done["status"], s("done"));
    assert_eq!(done["keep_until_ms"], n(&(t0 + 86_400_001).to_string()));
    assert_eq!(
        done["ttl"],
        n("1800086401"),
        "keep_until rounded up to seconds"
    );
    assert!(!done.contains_key("attempt"));
}

#[tokio::test]
async fn link_codes_and_identities_follow_the_documented_key_layout() {
    let store = fresh_store().await;
    let t0 = 1_800_000_000_000;
    let expires = t0 + 1_800_001;
    store
        .create_link_code("K7-PLUM", &"alice".into(), t0, expires)
        .await
        .unwrap();
    let code = get(&store, "LINK#K7-PLUM", "LINK")
        .await
        .expect("link code item");
    assert_eq!(code["user_id"], s("alice"));
    assert_eq!(code["expires_at_ms"], n(&expires.to_string()));
    assert_eq!(
        code["ttl"],
        n("1800001801"),
        "expires_at rounded up to seconds"
    );
    assert!(!code.contains_key("used_at_ms"));

    assert_eq!(
        store
            .consume_link_code("K7-PLUM", "whatsapp#+4917012", t0 + 5)
            .await
            .unwrap(),
        Some("alice".into())
    );
    let used = get(&store, "LINK#K7-PLUM", "LINK")
        .await
        .expect("a redeemed code stays until its TTL");
    assert_eq!(used["used_at_ms"], n(&(t0 + 5).to_string()));
    assert_eq!(used["used_by"], s("whatsapp#+4917012"));
    assert_eq!(used["ttl"], code["ttl"]);

    store
        .bind_identity("whatsapp", "+15550100", &"alice".into(), t0 + 6)
        .await
        .unwrap();
    let ident = get(&store, "IDENT#whatsapp#+15550100", "IDENT")
        .await
        .expect("identity item");
    assert_eq!(ident["user_id"], s("alice"));
    assert_eq!(ident["bound_at_ms"], n(&(t0 + 6).to_string()));
    assert!(!ident.contains_key("ttl"), "a binding never expires");
}

#[tokio::test]
async fn items_past_their_ttl_count_as_absent() {
    let store = fresh_store().await;
    let now_ms = i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    let past_s = now_ms / 1000 - 60;

    // A done claim whose TTL passed but which DynamoDB has not deleted yet, even with a
    // keep_until still ahead: claiming it starts afresh.
    put(
        &store,
        item(&[
            ("pk", s("JOB#tg#1")),
            ("sk", s("CLAIM")),
            ("status", s("done")),
            ("keep_until_ms", n(&(now_ms + 3_600_000).to_string())),
            ("ttl", n(&past_s.to_string())),
        ]),
    )
    .await;
    assert_eq!(
        store
            .claim_job("tg#1", now_ms, now_ms + 60_000)
            .await
            .unwrap(),
        Claim::Fresh
    );
    let claimed = get(&store, "JOB#tg#1", "CLAIM").await.unwrap();
    let own_ttl = (now_ms + 60_000 + store::KEEP_ABANDONED_MS + 999).div_euclid(1000);
    assert_eq!(
        claimed["ttl"],
        n(&own_ttl.to_string()),
        "the new claim's ttl is its own, not the old one"
    );

    // A conversation item past its TTL reads as missing, alone and in its user's list.
    let live = Conversation::new("c-live", "bob", "web", "p");
    store.create_conversation(&live).await.unwrap();
    let mut expired = item(&[
        ("pk", s("CONV#c-old")),
        ("sk", s("META")),
        ("gsi1pk", s("USER#bob")),
        ("gsi1sk", s("00000000000000000001#c-old")),
        ("id", s("c-old")),
        ("user_id", s("bob")),
        ("channel", s("web")),
        ("purpose", s("p")),
        ("status", s("active")),
        ("prompt_version", s("")),
        ("segment", n("0")),
        ("turn", n("0")),
        ("created_at_ms", n("1")),
    ]);
    expired.insert("ttl".into(), n(&past_s.to_string()));
    put(&store, expired).await;
    assert_eq!(store.conversation(&"c-old".into()).await.unwrap(), None);
    assert_eq!(
        store.conversations_of(&"bob".into()).await.unwrap(),
        vec![live]
    );

    // A visible entry past its TTL is neither listed nor counted.
    let conv: ConversationId = "c-live".into();
    let first = visible(&conv, 0, "kept");
    store.append_visible(&first).await.unwrap();
    let mut stale = item(&[
        ("pk", s("CONV#c-live")),
        ("sk", s("SEEN#00000000000000000001")),
        ("chunks", n("1")),
        (
            "body",
            s(serde_json::to_string(&visible(&conv, 1, "gone")).unwrap()),
        ),
    ]);
    stale.insert("ttl".into(), n(&past_s.to_string()));
    put(&store, stale).await;
    assert_eq!(store.visible(&conv).await.unwrap(), vec![first]);
    assert_eq!(store.next_visible_position(&conv).await.unwrap(), 1);
}

#[tokio::test]
async fn large_messages_split_into_chunks_and_reassemble() {
    let store = fresh_store().await;
    let conv: ConversationId = "c-big".into();
    let big = message(&conv, 1, 9, &"\u{00E9}0123456789\n".repeat(90_000));
    let body = serde_json::to_string(&big).unwrap();
    assert!(body.len() > 1_200_000 && body.len() < 1_400_000);
    store.append_message(&big).await.unwrap();

    let items = query(&store, "CONV#c-big", "MSG#").await;
    let sks: Vec<&str> = items
        .iter()
        .map(|i| i["sk"].as_s().unwrap().as_str())
        .collect();
    assert_eq!(
        sks,
        [
            "MSG#00000000000000000009",
            "MSG#00000000000000000009#PART#001",
            "MSG#00000000000000000009#PART#002",
            "MSG#00000000000000000009#PART#003",
        ]
    );
    assert_eq!(items[0]["chunks"], n("4"));
    assert_eq!(items[2]["chunk"], n("2"));
    assert_eq!(
        items[3]["lsi1sk"],
        s("MSG#0000000001#00000000000000000009#PART#003")
    );
    assert!(
        items
            .iter()
            .all(|i| i["body"].as_s().unwrap().len() <= 350_000)
    );
    let stored: String = items
        .iter()
        .map(|i| i["body"].as_s().unwrap().as_str())
        .collect();
    assert!(stored == body, "the chunks are the body, in order");

    assert!(store.messages(&conv, 1).await.unwrap() == vec![big.clone()]);
    // Over 1 MB in one segment: the emulator, like DynamoDB, ends the first page early, so
    // the read above followed LastEvaluatedKey.
    let first_page = client()
        .query()
        .table_name(store.table())
        .index_name("lsi1")
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", s("CONV#c-big"))
        .send()
        .await
        .unwrap();
    assert!(first_page.last_evaluated_key.is_some(), "a 1 MB page limit");
    assert_eq!(store.next_position(&conv).await.unwrap(), 10);

    // A rival at the same position is refused whole: no chunk of it lands.
    let rival = message(&conv, 1, 9, &"x".repeat(800_000));
    let result = store.append_message(&rival).await;
    assert!(
        matches!(result, Err(StoreError::Conflict { .. })),
        "{result:?}"
    );
    assert_eq!(query(&store, "CONV#c-big", "MSG#").await.len(), 4);
    assert!(store.messages(&conv, 1).await.unwrap() == vec![big]);

    // Past ten chunks the body does not fit a transaction: refused, nothing written.
    let huge = message(&conv, 1, 10, &"y".repeat(3_600_000));
    let result = store.append_message(&huge).await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    assert_eq!(store.next_position(&conv).await.unwrap(), 10);
}

#[tokio::test]
async fn the_emulator_enforces_the_item_size_limit() {
    // Why bodies are chunked: one 400 KB body is refused as a single item.
    let store = fresh_store().await;
    let result = client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(item(&[
            ("pk", s("CONV#c")),
            ("sk", s("MSG#x")),
            ("body", s("z".repeat(400 * 1024))),
        ])))
        .send()
        .await;
    assert!(result.is_err(), "a 400 KB attribute must not fit one item");
}

#[tokio::test]
async fn a_body_that_does_not_decode_is_corrupt() {
    let store = fresh_store().await;
    put(
        &store,
        item(&[
            ("pk", s("CONV#c")),
            ("sk", s("MSG#00000000000000000000")),
            ("lsi1sk", s("MSG#0000000000#00000000000000000000")),
            ("segment", n("0")),
            ("chunks", n("1")),
            ("body", s("{not json")),
        ]),
    )
    .await;
    let result = store.messages(&"c".into(), 0).await;
    assert!(
        matches!(result, Err(StoreError::Corrupt { .. })),
        "{result:?}"
    );

    // A chunked body whose continuation is missing is corrupt too, not silently short.
    put(
        &store,
        item(&[
            ("pk", s("CONV#c")),
            ("sk", s("SEEN#00000000000000000000")),
            ("chunks", n("2")),
            ("body", s("{")),
        ]),
    )
    .await;
    let result = store.visible(&"c".into()).await;
    assert!(
        matches!(result, Err(StoreError::Corrupt { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_refused_condition_returns_the_old_item() {
    // The claim explains a refusal from the item the failed condition returns, with no second
    // read. Pin that the emulator really returns it, so that path is the one under test.
    let store = fresh_store().await;
    let t0 = 1_800_000_000_000;
    store.claim_job("sl#1", t0, t0 + 60_000).await.unwrap();
    let err = client()
        .update_item()
        .table_name(store.table())
        .key("pk", s("JOB#sl#1"))
        .key("sk", s("CLAIM"))
        .update_expression("SET #s = :x")
        .condition_expression("attribute_not_exists(pk)")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":x", s("x"))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await
        .unwrap_err();
    let err = err.into_service_error();
    assert!(err.is_conditional_check_failed_exception(), "{err:?}");
    let aws_sdk_dynamodb::operation::update_item::UpdateItemError::ConditionalCheckFailedException(
        ccf,
    ) = err
    else {
        unreachable!()
    };
    let old = ccf.item.expect("the old item comes with the refusal");
    assert_eq!(old["status"], s("running"));
}

#[tokio::test]
async fn service_and_connection_failures_are_unavailable() {
    let missing_table = DynamoStore::new(client(), "no-such-table".into());
    let result = missing_table.conversation(&"c".into()).await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    let result = missing_table.claim_job("j", 0, 1).await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    // Not a refused condition: a failed redemption must not pass for an unknown code.
    let result = missing_table
        .consume_link_code("K7-PLUM", "whatsapp#+4917012", 0)
        .await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    let result = missing_table
        .create_link_code("K7-PLUM", &"u".into(), 0, 1)
        .await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );

    // Nothing listens on port 1: a dispatch failure.
    let nowhere = DynamoStore::new(support::client_for("http://127.0.0.1:1"), "t".into());
    let result = nowhere
        .append_message(&message(&"c".into(), 0, 0, "hi"))
        .await;
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
}

#[tokio::test]
async fn creating_an_existing_table_conflicts() {
    let client = client();
    let table = support::table_name();
    create_table(&client, &table).await.unwrap();
    let again = create_table(&client, &table).await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "{again:?}"
    );
}

fn client() -> Client {
    support::client()
}

async fn get(store: &DynamoStore, pk: &str, sk: &str) -> Option<Item> {
    client()
        .get_item()
        .table_name(store.table())
        .key("pk", s(pk))
        .key("sk", s(sk))
        .consistent_read(true)
        .send()
        .await
        .unwrap()
        .item
}

async fn put(store: &DynamoStore, item: Item) {
    client()
        .put_item()
        .table_name(store.table())
        .set_item(Some(item))
        .send()
        .await
        .unwrap();
}

/// Every item under `pk` whose sort key starts with `prefix`, in order.
async fn query(store: &DynamoStore, pk: &str, prefix: &str) -> Vec<Item> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = client()
            .query()
            .table_name(store.table())
            .key_condition_expression("pk = :pk AND begins_with(sk, :prefix)")
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":prefix", s(prefix))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .unwrap();
        items.extend(page.items.unwrap_or_default());
        match page.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return items,
        }
    }
}

fn item(pairs: &[(&str, AttributeValue)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: &str) -> AttributeValue {
    AttributeValue::N(value.to_owned())
}

fn message(conv: &ConversationId, segment: u32, position: u64, text: &str) -> Message {
    Message {
        conversation_id: conv.clone(),
        segment,
        position,
        role: Role::User,
        parts: vec![Part::text(text)],
        call: None,
        action_id: None,
        created_at_ms: 1_700_000_000_000,
    }
}

fn visible(conv: &ConversationId, position: u64, text: &str) -> VisibleEntry {
    VisibleEntry {
        conversation_id: conv.clone(),
        position,
        role: VisibleRole::Assistant,
        text: text.to_owned(),
        buttons: vec![],
        reaction: None,
        turn: 0,
        created_at_ms: 1_700_000_000_000,
    }
}
