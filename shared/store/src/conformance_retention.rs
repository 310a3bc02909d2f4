//! Conformance of [`Retention`]: an expiring conversation (an unknown sender's lobby) is gone
//! once past its date — its row, messages and visible entries — while conversations without a
//! date (a linked user's) and those with a later one are untouched; a refresh after the date
//! does not bring old words back; a sender who returns starts afresh.
//!
//! Dates are relative to the wall clock, because DynamoDB's reads judge its `ttl` by it.
//! Adapters invoke [`retention_conformance_tests!`](crate::retention_conformance_tests):
//!
//! ```ignore
//! store::retention_conformance_tests!(store_sqlite::SqliteStore::open_in_memory().unwrap());
//! ```

use crate::{Store, VisibleEntry, VisibleRole};
use std::time::{SystemTime, UNIX_EPOCH};
use transcript::{Conversation, ConversationId, Message, Part, Role, UserId};

/// One `#[tokio::test]` per retention check, each on a fresh store from the expression.
#[macro_export]
macro_rules! retention_conformance_tests {
    ($make:expr $(,)?) => {
        $crate::retention_conformance_tests!(@each $make;
            expired_conversations_go_and_nothing_else => check_expiry_sweeps_only_the_expired,
            a_refresh_after_the_date_revives_nothing => check_no_revival,
            words_written_after_the_last_refresh_go_with_the_date => check_undated_words_go,
        );
    };
    (@each $make:expr; $($test:ident => $check:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $test() {
                use $crate::conformance::AsDynStore as _;
                let store = $make;
                $crate::conformance_retention::$check(store.as_dyn_store()).await;
            }
        )*
    };
}

const HOUR_MS: i64 = 3_600_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// A conversation with two visible entries and one model message, as a job would leave it.
async fn conversation_with_words(store: &dyn Store, id: &str, user: &str) -> ConversationId {
    let conv = Conversation {
        created_at_ms: now_ms(),
        ..Conversation::new(id, UserId::from(user), "whatsapp", "chat")
    };
    store.create_conversation(&conv).await.unwrap();
    for (position, role, text) in [
        (0, VisibleRole::User, "my card number is 4111"),
        (1, VisibleRole::Assistant, "Hello! Link your account first."),
    ] {
        store
            .append_visible(&entry(&conv.id, position, role, text))
            .await
            .unwrap();
    }
    store
        .append_message(&Message {
            conversation_id: conv.id.clone(),
            segment: 0,
            position: 0,
            role: Role::User,
            parts: vec![Part::text("my card number is 4111")],
            call: None,
            action_id: None,
            created_at_ms: now_ms(),
        })
        .await
        .unwrap();
    conv.id
}

fn entry(conv: &ConversationId, position: u64, role: VisibleRole, text: &str) -> VisibleEntry {
    VisibleEntry {
        conversation_id: conv.clone(),
        position,
        role,
        text: text.to_owned(),
        buttons: vec![],
        reaction: None,
        turn: 1,
        created_at_ms: now_ms(),
    }
}

/// The lobby `lobby` of `owner` made afresh at `now` (its sender back after its date).
async fn returning_sender(
    store: &dyn Store,
    lobby: &ConversationId,
    owner: &str,
    now: i64,
) -> Conversation {
    let again = Conversation {
        created_at_ms: now,
        ..Conversation::new(lobby.clone(), UserId::from(owner), "whatsapp", "chat")
    };
    store.create_conversation(&again).await.unwrap();
    again
}

async fn assert_gone(store: &dyn Store, id: &ConversationId, what: &str) {
    assert_eq!(store.conversation(id).await.unwrap(), None, "{what}: row");
    assert_eq!(
        store.visible(id).await.unwrap(),
        [],
        "{what}: visible entries"
    );
    assert_eq!(store.messages(id, 0).await.unwrap(), [], "{what}: messages");
}

async fn assert_kept(store: &dyn Store, id: &ConversationId, what: &str) {
    assert!(
        store.conversation(id).await.unwrap().is_some(),
        "{what}: row"
    );
    assert_eq!(
        store.visible(id).await.unwrap().len(),
        2,
        "{what}: visible entries"
    );
    assert_eq!(
        store.messages(id, 0).await.unwrap().len(),
        1,
        "{what}: messages"
    );
}

/// Past its date a conversation is gone — row, visible entries, messages — and only it: a
/// conversation without a date and one with a later date keep everything. A returning sender
/// gets a fresh conversation under the same id.
pub async fn check_expiry_sweeps_only_the_expired(store: &dyn Store) {
    let now = now_ms();
    let lobby = conversation_with_words(store, "whatsapp:491701234567", "unlinked:a").await;
    let fresh = conversation_with_words(store, "telegram:42", "unlinked:b").await;
    let linked = conversation_with_words(store, "whatsapp:491701234567@alice", "alice").await;
    store
        .expire_conversation(&lobby, now - HOUR_MS, now - 2 * HOUR_MS)
        .await
        .unwrap();
    store
        .expire_conversation(&fresh, now + HOUR_MS, now)
        .await
        .unwrap();

    let swept = store.sweep_expired(now).await.unwrap();
    assert!(swept <= 1, "at most the one expired conversation: {swept}");
    // Sweeping again finds nothing more.
    assert_eq!(store.sweep_expired(now).await.unwrap(), 0);

    assert_gone(store, &lobby, "the expired lobby").await;
    assert_kept(store, &fresh, "a lobby with a later date").await;
    assert_kept(store, &linked, "a linked user's conversation").await;
    // A conversation that does not exist is no error.
    store
        .expire_conversation(&ConversationId::from("nobody:1"), now + HOUR_MS, now)
        .await
        .unwrap();

    // The sender comes back: a fresh lobby under the same id, nothing of the old one.
    let again = returning_sender(store, &lobby, "unlinked:a", now).await;
    let position = store.next_visible_position(&lobby).await.unwrap();
    store
        .append_visible(&entry(&lobby, position, VisibleRole::User, "hi again"))
        .await
        .unwrap();
    store
        .expire_conversation(&lobby, now + HOUR_MS, now)
        .await
        .unwrap();
    assert_eq!(store.conversation(&lobby).await.unwrap(), Some(again));
    let seen: Vec<_> = store
        .visible(&lobby)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    assert_eq!(seen, ["hi again"], "the old words stay gone");
}

/// A refresh that arrives after the date does not keep the old data: it stays gone.
pub async fn check_no_revival(store: &dyn Store) {
    let now = now_ms();
    let lobby = conversation_with_words(store, "slack:C1", "unlinked:c").await;
    store
        .expire_conversation(&lobby, now - HOUR_MS, now - 2 * HOUR_MS)
        .await
        .unwrap();
    // Not swept yet; then a new message's refresh comes in.
    store
        .expire_conversation(&lobby, now + HOUR_MS, now)
        .await
        .unwrap();
    store.sweep_expired(now).await.unwrap();
    assert_gone(store, &lobby, "a lobby refreshed after its date").await;
    // Moving a date earlier works too: a later sweep takes it.
    let other = conversation_with_words(store, "slack:C2", "unlinked:d").await;
    store
        .expire_conversation(&other, now + HOUR_MS, now)
        .await
        .unwrap();
    store
        .expire_conversation(&other, now - 60_000, now - 120_000)
        .await
        .unwrap();
    store.sweep_expired(now).await.unwrap();
    assert_gone(store, &other, "a lobby whose date was moved earlier").await;
}

/// Words recorded after the last refresh (the process died before the refresh that follows
/// each exchange, or it failed) go with the conversation once its date has passed: a refresh
/// after the date, or a returning sender's fresh lobby, shows none of them.
pub async fn check_undated_words_go(store: &dyn Store) {
    let now = now_ms();
    let lobby = conversation_with_words(store, "whatsapp:491700000001", "unlinked:e").await;
    store
        .expire_conversation(&lobby, now - HOUR_MS, now - 2 * HOUR_MS)
        .await
        .unwrap();
    // Recorded before the date passed, and never refreshed.
    store
        .append_visible(&entry(&lobby, 2, VisibleRole::User, "my pin is 1234"))
        .await
        .unwrap();
    // The sender returns after the date: the refresh before their lobby is looked at.
    store
        .expire_conversation(&lobby, now + HOUR_MS, now)
        .await
        .unwrap();
    store.sweep_expired(now).await.unwrap();
    assert_gone(
        store,
        &lobby,
        "a lobby with words written after its last refresh",
    )
    .await;
    returning_sender(store, &lobby, "unlinked:e", now).await;
    store
        .expire_conversation(&lobby, now + HOUR_MS, now)
        .await
        .unwrap();
    assert_eq!(
        store.visible(&lobby).await.unwrap(),
        [],
        "the old words stay gone"
    );
    assert_eq!(store.next_visible_position(&lobby).await.unwrap(), 0);
}
