//! Retention on DynamoDB (moto): the shared checks, and what they cannot see — the `ttl`
//! attribute (epoch seconds, the table's TTL attribute) on every item of an expiring
//! conversation, and none on a linked user's. moto does not delete expired items; reads treat
//! them as gone, which is what the shared checks pin.
//! Needs `AWS_ENDPOINT_URL` (see `support`).

mod support;

use aws_sdk_dynamodb::types::AttributeValue;
use store::{ConversationStore, Retention, VisibleEntry, VisibleRole, VisibleStore};
use transcript::{Conversation, ConversationId};

store::retention_conformance_tests!(support::fresh_store().await);

/// Again with one item per query page, so the refresh follows `LastEvaluatedKey`.
mod one_item_pages {
    store::retention_conformance_tests!(super::support::fresh_store().await.with_page_limit(1));
}

fn entry(conv: &ConversationId, position: u64, text: String) -> VisibleEntry {
    VisibleEntry {
        conversation_id: conv.clone(),
        position,
        role: VisibleRole::User,
        text,
        buttons: vec![],
        reaction: None,
        turn: 1,
        created_at_ms: 1_800_000_000_000,
    }
}

/// `(sk, ttl)` of every item under `pk`.
async fn ttls(table: &str, pk: &str) -> Vec<(String, Option<String>)> {
    let out = support::client()
        .query()
        .table_name(table)
        .key_condition_expression("pk = :pk")
        .expression_attribute_values(":pk", AttributeValue::S(pk.into()))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    out.items
        .unwrap_or_default()
        .into_iter()
        .map(|i| {
            (
                i["sk"].as_s().unwrap().clone(),
                i.get("ttl").map(|t| t.as_n().unwrap().clone()),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_item_of_an_expiring_lobby_carries_the_ttl_and_a_linked_users_none() {
    let store = support::fresh_store().await;
    let now = 1_800_000_000_000; // Epoch milliseconds, in the future of the tests' wall clock.
    let lobby = ConversationId::from("whatsapp:491701234567");
    let linked = ConversationId::from("whatsapp:491701234567@alice");
    for (id, user) in [
        (&lobby, "unlinked:whatsapp:491701234567"),
        (&linked, "alice"),
    ] {
        store
            .create_conversation(&Conversation::new(id.clone(), user, "whatsapp", "chat"))
            .await
            .unwrap();
        store
            .append_visible(&entry(id, 0, "hi".into()))
            .await
            .unwrap();
        // Over one item's size: a head and continuation items, all of which must expire.
        store
            .append_visible(&entry(id, 1, "x".repeat(400_000)))
            .await
            .unwrap();
    }
    let thirty_days_ms = 30 * 24 * 3_600_000;
    store
        .expire_conversation(&lobby, now + thirty_days_ms + 1, now)
        .await
        .unwrap();

    let lobby_items = ttls(store.table(), "CONV#whatsapp:491701234567").await;
    assert!(
        lobby_items.len() >= 4,
        "META, SEEN#0, SEEN#1 and its continuation: {lobby_items:?}"
    );
    // Rounded up to the next second: never deleted before the date.
    let expected = ((now + thirty_days_ms + 1) / 1000 + 1).to_string();
    for (sk, ttl) in &lobby_items {
        assert_eq!(ttl.as_deref(), Some(expected.as_str()), "{sk}");
    }
    for (sk, ttl) in ttls(store.table(), "CONV#whatsapp:491701234567@alice").await {
        assert_eq!(ttl, None, "a linked user's {sk} never expires");
    }
    assert_eq!(
        store.sweep_expired(now).await.unwrap(),
        0,
        "TTL deletes, not a sweep"
    );
}

#[tokio::test]
async fn a_refresh_rewrites_only_what_is_new_or_dated_far_from_the_new_date() {
    let store = support::fresh_store().await;
    let now = 1_800_000_000_000;
    let day_ms = 24 * 3_600_000;
    let lobby = ConversationId::from("telegram:-100200300");
    let pk = "CONV#telegram:-100200300";
    store
        .create_conversation(&Conversation::new(
            lobby.clone(),
            "unlinked:telegram:-100200300",
            "telegram",
            "chat",
        ))
        .await
        .unwrap();
    store
        .append_visible(&entry(&lobby, 0, "hi".into()))
        .await
        .unwrap();
    store
        .expire_conversation(&lobby, now + 30 * day_ms, now)
        .await
        .unwrap();
    let first = ttls(store.table(), pk).await;
    // An hour later, one more entry and the refresh after it: the new entry and the
    // conversation's own item get the new date; the others, dated within a thirtieth of the
    // time left of it, keep theirs.
    store
        .append_visible(&entry(&lobby, 1, "hello?".into()))
        .await
        .unwrap();
    let later = now + 3_600_000;
    store
        .expire_conversation(&lobby, later + 30 * day_ms, later)
        .await
        .unwrap();
    let second: std::collections::BTreeMap<_, _> =
        ttls(store.table(), pk).await.into_iter().collect();
    let new_date = ((later + 30 * day_ms) / 1000).to_string();
    assert_eq!(
        second["SEEN#00000000000000000001"].as_deref(),
        Some(new_date.as_str())
    );
    // The conversation's own item always moves, so it never expires before what is in it (a
    // sender who comes back after it would otherwise find later words still there).
    assert_eq!(second["META"].as_deref(), Some(new_date.as_str()));
    for (sk, ttl) in first.iter().filter(|(sk, _)| sk != "META") {
        assert_eq!(&second[sk], ttl, "{sk} is not rewritten");
    }
    // Two days later the old ones are more than a thirtieth short: all move.
    let much_later = now + 2 * day_ms;
    store
        .expire_conversation(&lobby, much_later + 30 * day_ms, much_later)
        .await
        .unwrap();
    let moved = ((much_later + 30 * day_ms) / 1000).to_string();
    for (sk, ttl) in ttls(store.table(), pk).await {
        assert_eq!(ttl.as_deref(), Some(moved.as_str()), "{sk}");
    }
    // An earlier date is always written.
    store
        .expire_conversation(&lobby, much_later + day_ms, much_later)
        .await
        .unwrap();
    let sooner = ((much_later + day_ms) / 1000).to_string();
    for (sk, ttl) in ttls(store.table(), pk).await {
        assert_eq!(ttl.as_deref(), Some(sooner.as_str()), "{sk}");
    }
}
