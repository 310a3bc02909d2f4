//! The conformance suite: behaviour every storage adapter must show, failure paths included.
//!
//! Each `check_*` function takes a fresh, empty store and panics with a readable message when the
//! adapter misbehaves. Adapters do not call them one by one; they invoke
//! [`conformance_tests!`](crate::conformance_tests) in their tests, which expands to one
//! `#[tokio::test]` per check, each on a store of its own:
//!
//! ```ignore
//! // shared/store-sqlite/tests/conformance.rs
//! store::conformance_tests!(store_sqlite::SqliteStore::open_in_memory().unwrap());
//! ```
//!
//! The expression is evaluated inside the (async) test body, so it may `.await`; it may yield
//! the store itself or a value that dereferences to it (e.g. a temp-file guard). The calling
//! crate needs `tokio` (features `macros`, `rt-multi-thread`) as a dev-dependency.
//!
//! Ordering rules the checks pin down, so every adapter agrees:
//! - `conversations_of`: newest `created_at_ms` first; ties broken by id, descending;
//!   `conversations_page` gives the same order a page at a time.
//! - `messages` and `visible`: ascending position, whatever order the rows were written in.
//! - `next_position` / `next_visible_position`: highest position + 1, across segments; 0 when
//!   empty. Positions are unique per conversation across segments.
//! - `update_conversation` changes only the mutable fields (status, purpose, prompt version,
//!   segment, turn, compaction retry mark); user, channel and creation time keep their stored
//!   values.
//! - `accounts_page`: ascending `created_at_ms`, ties by user id (byte order); `bindings`:
//!   by user, channel, external id.
//! - A link code is live while `now_ms < expires_at_ms`: at `expires_at_ms` it no longer
//!   redeems, and a new code of the same string may replace it.

pub use crate::conformance_records::*;
mod accounts;
mod budget;
mod claim_with_lease;
mod grants;
mod leases;
mod receipts;
mod sessions;
mod tool_results;
mod turn_writes;
mod undo_bytes;
mod undo_scope;

pub use accounts::{
    check_account_status, check_accounts, check_accounts_listing, check_bindings_and_unbind,
    check_concurrent_account_creation, check_create_account, check_put_account_keeps_emails_unique,
    check_unbind_identity_of,
};

pub use claim_with_lease::{check_claim_with_lease, check_claim_with_lease_reading};
pub use grants::{check_assistant_grant, check_end_sessions};
pub use leases::{check_concurrent_leases, check_leases};
pub use receipts::{check_receipts, check_undo_receipts};
pub use sessions::{check_concurrent_first_use_of_login, check_sessions, check_used_logins};
pub use tool_results::check_tool_results;
pub use turn_writes::{
    check_append_message_adjusting, check_append_with_tool_result,
    check_append_with_tool_result_reserving, check_conversation_and_account, check_finish_turn,
    check_start_turn_reserving,
};
pub use undo_bytes::check_action_bytes;
pub use undo_scope::check_undo_scope;

pub use budget::{
    check_budget_buckets_of_window, check_budget_reserve_and_settle,
    check_budget_trip_adds_nothing, check_concurrent_reservations,
};

use crate::{Button, Claim, Store, StoreError, VisibleEntry, VisibleRole};
use serde_json::json;
use transcript::{
    CallRecord, Conversation, ConversationId, ConversationStatus, MediaRef, Message, Part,
    Reasoning, Role, StopReason, Usage, UserId,
};

/// Expands to one `#[tokio::test]` per conformance check, each on a fresh store built by the
/// given expression (evaluated inside the async test, so `.await` is allowed). The expression
/// yields a store or anything that dereferences to one (see [`AsDynStore`]).
///
/// Invoke it once per module: the generated test names are fixed. To run the suite against two
/// configurations, put the second invocation in its own `mod`.
#[macro_export]
macro_rules! conformance_tests {
    ($make:expr $(,)?) => {
        $crate::conformance_tests!(@each $make;
            create_and_read_back => check_create_and_read_back,
            create_twice_conflicts => check_create_twice_conflicts,
            update_conversation => check_update_conversation,
            conversations_of_user_newest_first => check_conversations_of,
            messages_round_trip_every_part => check_messages_round_trip,
            append_at_taken_position_conflicts => check_append_conflict,
            turn_started_in_one_write => check_start_turn,
            messages_by_segment_and_position => check_segments_and_positions,
            visible_transcript => check_visible_transcript,
            large_content_round_trips => check_large_content,
            job_claims_lifecycle => check_job_claims,
            done_job_claims_expire => check_done_claims_expire,
            released_claims_are_taken_over_at_once => check_release_job,
            reply_sent_is_kept_with_the_claim => check_reply_sent_is_kept_with_the_claim,
            conversation_leases => check_leases,
            job_claimed_with_its_lease => check_claim_with_lease,
            job_claimed_with_its_lease_and_the_start_read => check_claim_with_lease_reading,
            turn_finished_in_one_write => check_finish_turn,
            tool_message_with_its_last_result => check_append_with_tool_result,
            tool_message_with_the_next_reservation => check_append_with_tool_result_reserving,
            turn_started_with_the_first_reservation => check_start_turn_reserving,
            answer_with_its_budget_settlement => check_append_message_adjusting,
            conversation_and_account_read_together => check_conversation_and_account,
            sessions => check_sessions,
            tool_results_written_once => check_tool_results,
            receipts_written_with_their_effect => check_receipts,
            undo_receipts_pinned_to_their_rows => check_undo_receipts,
            used_logins_recorded_once => check_used_logins,
            link_code_round_trip => check_link_code_round_trip,
            link_code_redeems_once => check_link_code_redeems_once,
            link_code_made_for_one_account => check_link_code_made_for_one_account,
            expired_link_code_redeems_nothing => check_expired_link_code,
            unknown_link_code_redeems_nothing => check_unknown_link_code,
            live_link_code_conflicts_expired_is_replaced => check_create_link_code_conflicts,
            bind_and_look_up_identity => check_bind_identity,
            rebinding_moves_the_identity => check_rebind_identity,
            binding_only_as_read => check_bind_identity_if,
            identities_are_per_channel => check_identities_per_channel,
            bindings_listed_and_unbound => check_bindings_and_unbind,
            unbound_only_from_its_user => check_unbind_identity_of,
            records_commit_and_read => check_records_commit_and_read,
            records_conflict_writes_nothing => check_records_conflict_writes_nothing,
            undo_is_lifo_per_user => check_undo_lifo,
            undo_conflict_and_other_parties => check_undo_conflict_and_other_parties,
            undo_scoped_to_a_conversation => check_undo_scope,
            an_action_stays_small_enough_to_undo => check_action_weight,
            an_action_writes_no_more_bytes_than_one_undo_takes => check_action_bytes,
            pending_confirmations => check_pending_confirmations,
            accounts => check_accounts,
            create_account_refuses_taken_id_or_email => check_create_account,
            put_account_keeps_emails_unique => check_put_account_keeps_emails_unique,
            account_status_changes => check_account_status,
            assistant_grant_changes => check_assistant_grant,
            sessions_ended_everywhere => check_end_sessions,
            accounts_listed_in_pages => check_accounts_listing,
            active_records => check_active_records,
            budget_reserve_and_settle => check_budget_reserve_and_settle,
            budget_trip_adds_nothing => check_budget_trip_adds_nothing,
            budget_buckets_of_window => check_budget_buckets_of_window,
        );

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_commits_one_winner() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_commits(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_take_pending_one_winner() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_take_pending(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_reservations_never_pass_the_cap() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_reservations(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_appends_one_winner() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_appends(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_first_use_of_login_one_winner() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_first_use_of_login(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_leases_one_holder() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_leases(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_claims_one_winner() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_claims(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_account_creations_one_email_one_winner() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_account_creation(store.as_dyn_store()).await;
        }

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn concurrent_link_code_consumers_one_winner() {
            use $crate::conformance::AsDynStore as _;
            let store = $make;
            $crate::conformance::check_concurrent_link_code_consumers(store.as_dyn_store()).await;
        }
    };
    (@each $make:expr; $($test:ident => $check:ident),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $test() {
                use $crate::conformance::AsDynStore as _;
                let store = $make;
                $crate::conformance::$check(store.as_dyn_store()).await;
            }
        )*
    };
}

/// A store, or anything that dereferences to one (`Arc<S>`, a guard that deletes a temp file on
/// drop), as `&dyn Store`. The macro calls it with method syntax so auto-deref applies.
pub trait AsDynStore {
    fn as_dyn_store(&self) -> &dyn Store;
}

impl<S: Store> AsDynStore for S {
    fn as_dyn_store(&self) -> &dyn Store {
        self
    }
}

/// A created conversation reads back equal; an unknown id reads as `None`.
pub async fn check_create_and_read_back(store: &dyn Store) {
    let mut conv = conversation("conv-a", "user-1", 1_000);
    conv.prompt_version = "v7".into();
    conv.status = ConversationStatus::Paused;
    conv.segment = 2;
    conv.turn = 9;
    store.create_conversation(&conv).await.unwrap();

    let read = store.conversation(&conv.id).await.unwrap();
    assert_eq!(
        read.as_ref(),
        Some(&conv),
        "created conversation must read back equal"
    );

    let missing = store.conversation(&"no-such-conv".into()).await.unwrap();
    assert_eq!(
        missing, None,
        "an unknown conversation id must read as None"
    );
}

/// Creating an existing id is a `Conflict`, and the first row stays as it was.
pub async fn check_create_twice_conflicts(store: &dyn Store) {
    let original = conversation("conv-a", "user-1", 1_000);
    store.create_conversation(&original).await.unwrap();

    let mut rival = conversation("conv-a", "user-2", 2_000);
    rival.channel = "sms".into();
    rival.turn = 5;
    let result = store.create_conversation(&rival).await;
    assert_conflict(result, "creating a conversation whose id exists");

    let read = store.conversation(&original.id).await.unwrap();
    assert_eq!(
        read,
        Some(original),
        "a conflicting create must not change the stored row"
    );
}

/// `update_conversation` persists the mutable fields, keeps the rest, and is `NotFound` for an
/// unknown id (without creating it).
pub async fn check_update_conversation(store: &dyn Store) {
    let original = conversation("conv-a", "user-1", 1_000);
    store.create_conversation(&original).await.unwrap();
    let bystander = conversation("conv-b", "user-1", 1_500);
    store.create_conversation(&bystander).await.unwrap();

    let mut updated = original.clone();
    updated.segment = 3;
    updated.turn = 42;
    updated.status = ConversationStatus::Closed;
    updated.prompt_version = "2025-06-01".into();
    updated.purpose = "billing".into();
    updated.compaction_retry_at_chars = 225_000;
    store.update_conversation(&updated).await.unwrap();
    let read = store.conversation(&original.id).await.unwrap();
    assert_eq!(
        read.as_ref(),
        Some(&updated),
        "update must persist the mutable fields"
    );

    let mut immutable_changed = updated.clone();
    immutable_changed.user_id = "intruder".into();
    immutable_changed.channel = "slack".into();
    immutable_changed.created_at_ms = 9_999;
    store.update_conversation(&immutable_changed).await.unwrap();
    let read = store.conversation(&original.id).await.unwrap();
    assert_eq!(
        read.as_ref(),
        Some(&updated),
        "update must not change user, channel or creation time"
    );

    let read_b = store.conversation(&bystander.id).await.unwrap();
    assert_eq!(
        read_b,
        Some(bystander),
        "update must touch only its own conversation"
    );

    let ghost = conversation("conv-ghost", "user-1", 1_000);
    let result = store.update_conversation(&ghost).await;
    assert!(
        matches!(result, Err(StoreError::NotFound { .. })),
        "updating a missing conversation must be NotFound, got {result:?}"
    );
    let read = store.conversation(&ghost.id).await.unwrap();
    assert_eq!(
        read, None,
        "a failed update must not create the conversation"
    );
}

/// `conversations_of` lists only that user's conversations, newest first, ties by id descending.
pub async fn check_conversations_of(store: &dyn Store) {
    for (id, user, at) in [
        ("c-old", "alice", 100),
        ("c-new", "alice", 300),
        ("c-mid-a", "alice", 200),
        ("c-mid-b", "alice", 200),
        ("c-bob", "bob", 250),
    ] {
        store
            .create_conversation(&conversation(id, user, at))
            .await
            .unwrap();
    }

    let alice = store.conversations_of(&"alice".into()).await.unwrap();
    let ids: Vec<&str> = alice.iter().map(|c| c.id.0.as_str()).collect();
    assert_eq!(
        ids,
        ["c-new", "c-mid-b", "c-mid-a", "c-old"],
        "conversations_of must return only the user's, newest first, ties by id descending"
    );
    assert_eq!(
        alice[0],
        conversation("c-new", "alice", 300),
        "conversations_of must return whole conversations"
    );

    let nobody = store.conversations_of(&"nobody".into()).await.unwrap();
    assert!(nobody.is_empty(), "an unknown user has no conversations");

    // Pages of the same order, each after the last one's cursor.
    let page = |after: Option<(i64, &'static str)>, limit| {
        let after = after.map(|(at, id)| (at, ConversationId::from(id)));
        async move {
            let got = store
                .conversations_page(&"alice".into(), after.as_ref(), limit)
                .await
                .unwrap();
            got.into_iter().map(|c| c.id.0).collect::<Vec<_>>()
        }
    };
    assert_eq!(page(None, 2).await, ["c-new", "c-mid-b"], "the first page");
    assert_eq!(
        page(Some((200, "c-mid-b")), 2).await,
        ["c-mid-a", "c-old"],
        "after a cursor, ties by id"
    );
    assert_eq!(page(Some((100, "c-old")), 2).await, Vec::<String>::new());
    assert_eq!(page(None, 10).await, ids, "a page larger than the rest");
    assert!(
        store
            .conversations_page(&"nobody".into(), None, 5)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Messages come back in position order, equal and byte-identical, every part kind included.
pub async fn check_messages_round_trip(store: &dyn Store) {
    let conv = create(store, "conv-a").await;
    let written = vec![
        message(
            &conv,
            0,
            0,
            Role::User,
            vec![Part::text("hi \u{1F600} \u{0} \"quoted\"")],
        ),
        assistant_with_every_part(&conv, 1),
        message(&conv, 0, 2, Role::Tool, tool_results()),
        message(&conv, 0, 3, Role::Assistant, vec![]),
    ];
    // Written out of order: reads must sort by position, not by insertion.
    for i in [2, 0, 3, 1] {
        store.append_message(&written[i]).await.unwrap();
    }

    let read = store.messages(&conv, 0).await.unwrap();
    assert_eq!(
        read, written,
        "messages must read back equal, in position order"
    );
    assert_eq!(
        serde_json::to_vec(&read).unwrap(),
        serde_json::to_vec(&written).unwrap(),
        "messages must read back byte-identical as JSON"
    );
}

/// Appending at a taken position is a `Conflict` and never an overwrite, whatever the segment.
pub async fn check_append_conflict(store: &dyn Store) {
    let conv = create(store, "conv-a").await;
    let first = message(&conv, 0, 0, Role::User, vec![Part::text("first")]);
    store.append_message(&first).await.unwrap();

    let rival = message(&conv, 0, 0, Role::Assistant, vec![Part::text("rival")]);
    let result = store.append_message(&rival).await;
    assert_conflict(result, "appending a message at a taken position");

    let other_segment = message(&conv, 1, 0, Role::User, vec![Part::text("other segment")]);
    let result = store.append_message(&other_segment).await;
    assert_conflict(result, "appending at a taken position from another segment");

    assert_eq!(
        store.messages(&conv, 0).await.unwrap(),
        vec![first],
        "a conflicting append must leave the stored message unchanged"
    );
    assert!(
        store.messages(&conv, 1).await.unwrap().is_empty(),
        "a conflicting append must not write anything"
    );
    assert_eq!(store.next_position(&conv).await.unwrap(), 1);
}

/// Reads filter by segment; positions run across segments; conversations are isolated.
pub async fn check_segments_and_positions(store: &dyn Store) {
    let conv = create(store, "conv-a").await;
    let other = create(store, "conv-b").await;
    assert_eq!(store.next_position(&conv).await.unwrap(), 0, "empty → 0");
    assert!(store.messages(&conv, 0).await.unwrap().is_empty());

    let seg0: Vec<Message> = (0..2)
        .map(|p| {
            message(
                &conv,
                0,
                p,
                Role::User,
                vec![Part::text(format!("s0 p{p}"))],
            )
        })
        .collect();
    let seg1: Vec<Message> = [2, 3, 7]
        .map(|p| {
            message(
                &conv,
                1,
                p,
                Role::User,
                vec![Part::text(format!("s1 p{p}"))],
            )
        })
        .to_vec();
    for m in seg1.iter().rev().chain(&seg0) {
        store.append_message(m).await.unwrap();
    }
    let foreign = message(&other, 0, 0, Role::User, vec![Part::text("elsewhere")]);
    store.append_message(&foreign).await.unwrap();

    assert_eq!(
        store.messages(&conv, 0).await.unwrap(),
        seg0,
        "segment 0 only"
    );
    assert_eq!(
        store.messages(&conv, 1).await.unwrap(),
        seg1,
        "segment 1 only"
    );
    assert!(
        store.messages(&conv, 2).await.unwrap().is_empty(),
        "segment 2 is empty"
    );
    assert_eq!(
        store.next_position(&conv).await.unwrap(),
        8,
        "next_position is the highest position + 1 across all segments"
    );

    assert_eq!(
        store.messages(&other, 0).await.unwrap(),
        vec![foreign.clone()],
        "isolation"
    );
    assert_eq!(store.next_position(&other).await.unwrap(), 1, "isolation");
    let unknown: ConversationId = "conv-unknown".into();
    assert_eq!(store.next_position(&unknown).await.unwrap(), 0);
    assert!(store.messages(&unknown, 0).await.unwrap().is_empty());
}

/// The visible transcript: ordered reads, `Conflict` on a taken position, next position,
/// buttons and reactions kept, conversations isolated.
/// `start_turn`: the conversation moved on and both rows, or (either position taken)
/// `Conflict` and none of it.
pub async fn check_start_turn(store: &dyn Store) {
    let id = create(store, "c-together").await;
    let mut conv = store.conversation(&id).await.unwrap().unwrap();
    conv.turn = 1;
    conv.prompt_version = "v2".into();
    conv.compaction_retry_at_chars = 90;
    let said = |position| message(&id, 0, position, Role::User, vec![Part::text("hi")]);
    store
        .start_turn(&conv, &said(0), &visible(&id, 0, VisibleRole::User, "hi"))
        .await
        .unwrap();
    assert_eq!(store.conversation(&id).await.unwrap().unwrap(), conv);
    conv.turn = 2;
    assert_eq!(store.messages(&id, 0).await.unwrap(), vec![said(0)]);
    assert_eq!(
        store.visible(&id).await.unwrap(),
        vec![visible(&id, 0, VisibleRole::User, "hi")]
    );
    // The message's position is taken: the entry is not written either.
    let taken = store
        .start_turn(
            &conv,
            &said(0),
            &visible(&id, 1, VisibleRole::User, "again"),
        )
        .await;
    assert!(
        matches!(taken, Err(StoreError::Conflict { .. })),
        "{taken:?}"
    );
    assert_eq!(store.next_visible_position(&id).await.unwrap(), 1);
    // The entry's position is taken: the message is not written either.
    let taken = store
        .start_turn(
            &conv,
            &said(1),
            &visible(&id, 0, VisibleRole::User, "again"),
        )
        .await;
    assert!(
        matches!(taken, Err(StoreError::Conflict { .. })),
        "{taken:?}"
    );
    assert_eq!(store.next_position(&id).await.unwrap(), 1);
    assert_eq!(store.messages(&id, 0).await.unwrap(), vec![said(0)]);
    let stored = store.conversation(&id).await.unwrap().unwrap();
    assert_eq!(
        stored.turn, 1,
        "a refused start leaves the conversation as it was"
    );
}

pub async fn check_visible_transcript(store: &dyn Store) {
    let conv = create(store, "conv-a").await;
    let other = create(store, "conv-b").await;
    assert_eq!(
        store.next_visible_position(&conv).await.unwrap(),
        0,
        "empty → 0"
    );
    assert!(store.visible(&conv).await.unwrap().is_empty());
    assert_eq!(
        store.last_visible(&conv).await.unwrap(),
        None,
        "empty → none"
    );
    assert_eq!(
        store.first_visible(&conv).await.unwrap(),
        None,
        "empty → none"
    );

    let mut reply = visible(&conv, 1, VisibleRole::Assistant, "Pay now?");
    reply.buttons = vec![
        Button {
            id: "pay".into(),
            title: "Pay \u{20AC}12".into(),
        },
        Button {
            id: "later".into(),
            title: "Later".into(),
        },
    ];
    let mut question = visible(&conv, 0, VisibleRole::User, "what do I owe?");
    question.reaction = Some("\u{1F44D}".into());
    let written = vec![question, reply, visible(&conv, 4, VisibleRole::User, "ok")];
    for i in [2, 0, 1] {
        store.append_visible(&written[i]).await.unwrap();
    }
    let foreign = visible(&other, 0, VisibleRole::User, "elsewhere");
    store.append_visible(&foreign).await.unwrap();

    let read = store.visible(&conv).await.unwrap();
    assert_eq!(
        read, written,
        "visible entries must read back equal, in position order"
    );
    assert_eq!(
        serde_json::to_vec(&read).unwrap(),
        serde_json::to_vec(&written).unwrap(),
        "visible entries must read back byte-identical as JSON"
    );
    assert_eq!(store.next_visible_position(&conv).await.unwrap(), 5);
    assert_eq!(
        store.last_visible(&conv).await.unwrap().as_ref(),
        written.last(),
        "the last entry is the one at the highest position, whatever the order written"
    );
    assert_eq!(
        store.first_visible(&conv).await.unwrap().as_ref(),
        written.first(),
        "the first entry is the one at the lowest position, whatever the order written"
    );

    let range = |from, before| store.visible_range(&conv, from, before);
    assert_eq!(
        range(1, 5).await.unwrap(),
        written[1..],
        "a range, by position"
    );
    assert_eq!(
        range(0, 1).await.unwrap(),
        written[..1],
        "`before` is left out"
    );
    assert_eq!(
        range(0, u64::MAX).await.unwrap(),
        written,
        "the whole transcript"
    );
    assert!(
        range(2, 4).await.unwrap().is_empty(),
        "a gap reads as nothing"
    );
    assert!(range(5, 9).await.unwrap().is_empty(), "past the end");
    assert!(range(3, 1).await.unwrap().is_empty(), "an empty range");

    let rival = visible(&conv, 1, VisibleRole::User, "rival");
    let result = store.append_visible(&rival).await;
    assert_conflict(result, "appending a visible entry at a taken position");
    assert_eq!(
        store.visible(&conv).await.unwrap(),
        written,
        "a conflicting visible append must leave the stored entry unchanged"
    );

    assert_eq!(
        store.visible(&other).await.unwrap(),
        vec![foreign.clone()],
        "isolation"
    );
    assert_eq!(
        store.next_visible_position(&other).await.unwrap(),
        1,
        "isolation"
    );
    assert_eq!(
        store.first_visible(&other).await.unwrap().as_ref(),
        Some(&foreign),
        "isolation"
    );
    assert_eq!(
        store.visible_range(&other, 0, 10).await.unwrap(),
        vec![foreign.clone()],
        "isolation"
    );
    assert_eq!(
        store.last_visible(&other).await.unwrap(),
        Some(foreign),
        "isolation"
    );
}

/// A megabyte of text (and a large JSON tool result) round-trips intact.
pub async fn check_large_content(store: &dyn Store) {
    let conv = create(store, "conv-a").await;
    let big: String = "0123456789abcdef\u{00E9}\n".repeat(1 << 16);
    assert!(big.len() >= 1 << 20);
    let rows: Vec<serde_json::Value> = (0..20_000)
        .map(|i| json!({ "row": i, "name": format!("item {i}") }))
        .collect();
    let written = vec![
        message(&conv, 0, 0, Role::User, vec![Part::text(big.clone())]),
        message(
            &conv,
            0,
            1,
            Role::Tool,
            vec![Part::ToolResult {
                tool_use_id: "t".into(),
                content: json!(rows),
                is_error: false,
            }],
        ),
    ];
    for m in &written {
        store.append_message(m).await.unwrap();
    }
    let read = store.messages(&conv, 0).await.unwrap();
    assert!(read == written, "large messages must round-trip intact");

    let entry = visible(&conv, 0, VisibleRole::Assistant, &big);
    store.append_visible(&entry).await.unwrap();
    let read = store.visible(&conv).await.unwrap();
    assert!(
        read == vec![entry.clone()],
        "a large visible entry must round-trip intact"
    );
    let last = store.last_visible(&conv).await.unwrap();
    assert!(
        last.as_ref() == Some(&entry),
        "a large visible entry must read back intact as the last one"
    );
    let after = visible(&conv, 1, VisibleRole::User, "and then?");
    store.append_visible(&after).await.unwrap();
    let range = store.visible_range(&conv, 0, 1).await.unwrap();
    assert!(
        range == vec![entry.clone()],
        "a large visible entry must read back intact in a range, the next one left out"
    );
    let range = store.visible_range(&conv, 1, 2).await.unwrap();
    assert!(
        range == vec![after],
        "a range after a large entry holds none of it"
    );
    let first = store.first_visible(&conv).await.unwrap();
    assert!(
        first == Some(entry),
        "a large visible entry must read back intact as the first one"
    );
}

/// Many threads append at the same position at once: exactly one wins, the rest get
/// `Conflict`, and the stored row is the winner's. Same for the visible transcript.
///
/// The writers are OS threads driving the adapter's futures on the test's runtime, so they
/// really overlap; needs a multi-threaded runtime.
pub async fn check_concurrent_appends(store: &dyn Store) {
    let conv = &create(store, "conv-race").await;

    for position in 0..4u64 {
        let winner = race(|w| async move {
            let m = message(
                conv,
                0,
                position,
                Role::User,
                vec![Part::text(format!("w{w}"))],
            );
            let result = store.append_message(&m).await;
            (m, result)
        });
        let winner = winner.unwrap_or_else(|msg| panic!("concurrent append_message: {msg}"));
        let stored = store.messages(conv, 0).await.unwrap();
        assert_eq!(
            stored.last(),
            Some(&winner),
            "the stored message must be the winner's"
        );
        assert_eq!(stored.len() as u64, position + 1);
    }

    for position in 0..4u64 {
        let winner = race(|w| async move {
            let e = visible(conv, position, VisibleRole::Assistant, &format!("w{w}"));
            let result = store.append_visible(&e).await;
            (e, result)
        });
        let winner = winner.unwrap_or_else(|msg| panic!("concurrent append_visible: {msg}"));
        let stored = store.visible(conv).await.unwrap();
        assert_eq!(
            stored.last(),
            Some(&winner),
            "the stored entry must be the winner's"
        );
        assert_eq!(stored.len() as u64, position + 1);
    }
}

/// A job is claimed once at a time, taken over when its claim expired, and never run again
/// once done.
pub async fn check_job_claims(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let job = "whatsapp#wamid.1";
    assert_eq!(
        store.claim_job(job, t0, t0 + 60_000).await.unwrap(),
        Claim::Fresh
    );
    assert_eq!(
        store.claim_job(job, t0 + 1_000, t0 + 61_000).await.unwrap(),
        Claim::Busy {
            until_ms: t0 + 60_000
        },
        "a live claim keeps others out"
    );
    // Another job is independent.
    assert_eq!(
        store
            .claim_job("whatsapp#wamid.2", t0, t0 + 60_000)
            .await
            .unwrap(),
        Claim::Fresh
    );
    // The first worker died: once its claim expired, the job is taken over.
    assert_eq!(
        store
            .claim_job(job, t0 + 60_001, t0 + 120_000)
            .await
            .unwrap(),
        Claim::TakenOver { attempt: 2 }
    );
    assert_eq!(
        store
            .claim_job(job, t0 + 60_002, t0 + 120_000)
            .await
            .unwrap(),
        Claim::Busy {
            until_ms: t0 + 120_000
        }
    );
    assert_eq!(
        store
            .claim_job(job, t0 + 120_001, t0 + 180_000)
            .await
            .unwrap(),
        Claim::TakenOver { attempt: 3 }
    );
    store.finish_job(job, t0 + 86_400_000).await.unwrap();
    for now in [t0 + 120_002, t0 + 200_000] {
        assert_eq!(
            store.claim_job(job, now, now + 60_000).await.unwrap(),
            Claim::Done,
            "a finished job is skipped, whenever it comes back"
        );
    }
    // Finishing twice is harmless.
    store.finish_job(job, t0 + 86_400_000).await.unwrap();
    assert_eq!(
        store
            .claim_job(job, t0 + 300_000, t0 + 360_000)
            .await
            .unwrap(),
        Claim::Done
    );
}

/// An attempt that ended without finishing releases its claim: the next delivery takes over at
/// once. A stale attempt's release touches neither a later attempt's claim nor a done job.
pub async fn check_release_job(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let job = "whatsapp#wamid.rel";
    assert_eq!(
        store.claim_job(job, t0, t0 + 600_000).await.unwrap(),
        Claim::Fresh
    );
    assert!(matches!(
        store.claim_job(job, t0 + 1, t0 + 600_001).await.unwrap(),
        Claim::Busy { .. }
    ));
    store.release_job(job, 1, t0 + 2, None).await.unwrap();
    assert_eq!(
        store.claim_job(job, t0 + 2, t0 + 600_002).await.unwrap(),
        Claim::TakenOver { attempt: 2 },
        "a released claim is taken over at once"
    );
    // Attempt 1, late, releases again: attempt 2 keeps its claim.
    store.release_job(job, 1, t0 + 3, None).await.unwrap();
    assert!(matches!(
        store.claim_job(job, t0 + 4, t0 + 600_004).await.unwrap(),
        Claim::Busy { .. }
    ));
    store.finish_job(job, t0 + 86_400_000).await.unwrap();
    store.release_job(job, 2, t0 + 5, None).await.unwrap();
    assert_eq!(
        store.claim_job(job, t0 + 6, t0 + 600_006).await.unwrap(),
        Claim::Done,
        "a done job stays done"
    );
    store
        .release_job("never-claimed", 1, t0, None)
        .await
        .unwrap();
}

/// What an attempt sent of its reply is kept with the claim it releases, for the attempt that
/// takes the job over (in any process), until the job is done; a stale attempt's release
/// keeps nothing, and one that sent nothing keeps what the earlier attempt left.
pub async fn check_reply_sent_is_kept_with_the_claim(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let job = "telegram#sent.1";
    let sent = |pieces: &[&str], whole: bool| crate::ReplySent {
        turn: 3,
        text: "alpha\n\nbravo\n\ncharlie".into(),
        pieces: pieces.iter().map(|p| (*p).to_owned()).collect(),
        reacted: false,
        whole,
    };
    assert_eq!(store.reply_sent(job).await.unwrap(), None, "never claimed");
    store.claim_job(job, t0, t0 + 600_000).await.unwrap();
    assert_eq!(store.reply_sent(job).await.unwrap(), None);
    store
        .release_job(job, 1, t0 + 1, Some(&sent(&["alpha"], false)))
        .await
        .unwrap();
    assert_eq!(
        store.reply_sent(job).await.unwrap(),
        Some(sent(&["alpha"], false))
    );
    assert_eq!(
        store.claim_job(job, t0 + 2, t0 + 600_002).await.unwrap(),
        Claim::TakenOver { attempt: 2 }
    );
    assert_eq!(
        store.reply_sent(job).await.unwrap(),
        Some(sent(&["alpha"], false)),
        "the attempt that took over reads it"
    );
    // Attempt 1, late, has no say; attempt 2 sent nothing more: what attempt 1 sent stays.
    store
        .release_job(job, 1, t0 + 3, Some(&sent(&[], false)))
        .await
        .unwrap();
    store.release_job(job, 2, t0 + 4, None).await.unwrap();
    assert_eq!(
        store.reply_sent(job).await.unwrap(),
        Some(sent(&["alpha"], false))
    );
    store.claim_job(job, t0 + 5, t0 + 600_005).await.unwrap();
    let all = sent(&["alpha", "bravo", "charlie"], true);
    store.release_job(job, 3, t0 + 6, Some(&all)).await.unwrap();
    assert_eq!(store.reply_sent(job).await.unwrap(), Some(all));
    store.claim_job(job, t0 + 7, t0 + 600_007).await.unwrap();
    store.finish_job(job, t0 + 8).await.unwrap();
    assert_eq!(store.reply_sent(job).await.unwrap(), None, "done");
    // Claimed afresh once the done record is no longer kept: nothing of the old run.
    assert_eq!(
        store.claim_job(job, t0 + 9, t0 + 600_009).await.unwrap(),
        Claim::Fresh
    );
    assert_eq!(store.reply_sent(job).await.unwrap(), None);
}

/// A done record past its retention counts as absent (stores delete expired items late, so
/// adapters filter them on read).
pub async fn check_done_claims_expire(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let job = "telegram#991";
    assert_eq!(
        store.claim_job(job, t0, t0 + 60_000).await.unwrap(),
        Claim::Fresh
    );
    store.finish_job(job, t0 + 10_000).await.unwrap();
    assert_eq!(
        store.claim_job(job, t0 + 9_999, t0 + 70_000).await.unwrap(),
        Claim::Done
    );
    assert_eq!(
        store
            .claim_job(job, t0 + 10_001, t0 + 70_000)
            .await
            .unwrap(),
        Claim::Fresh,
        "an expired done record no longer blocks"
    );
}

/// Many workers claim one fresh job at once: exactly one gets it, the others see it busy.
pub async fn check_concurrent_claims(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    for round in 0..4 {
        let job = format!("slack#Ev{round}");
        let job = job.as_str();
        let winner = race(|w| async move {
            let result = match store.claim_job(job, t0, t0 + 60_000).await {
                Ok(Claim::Fresh) => Ok(()),
                Ok(Claim::Busy { .. }) => Err(StoreError::Conflict {
                    what: job.to_owned(),
                }),
                Ok(other) => panic!("a racing claim must be Fresh or Busy, got {other:?}"),
                Err(e) => Err(e),
            };
            (w, result)
        });
        winner.unwrap_or_else(|msg| panic!("concurrent claim_job: {msg}"));
    }
}

/// The channel accounts that redeem codes in these checks.
const WA: &str = "whatsapp#+491701234567";
const TG: &str = "telegram#42";

/// The lifetime of a link code in these checks (DESIGN's default: 30 minutes).
const LINK_CODE_LIFETIME_MS: i64 = 30 * 60 * 1_000;

/// A link code redeems for the user it was made for; codes are independent of each other.
pub async fn check_link_code_round_trip(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let expires = t0 + LINK_CODE_LIFETIME_MS;
    let (alice, bob) = (UserId::from("alice"), UserId::from("bob"));
    store
        .create_link_code("K7-PLUM", &alice, t0, expires)
        .await
        .unwrap();
    store
        .create_link_code("Q2-FERN", &bob, t0 + 5, expires + 5)
        .await
        .unwrap();

    assert_eq!(
        store
            .consume_link_code("Q2-FERN", WA, t0 + 1_000)
            .await
            .unwrap(),
        Some(bob),
        "a live code redeems for the user it was made for"
    );
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", WA, expires - 1)
            .await
            .unwrap(),
        Some(alice),
        "a code is still live one millisecond before it expires; redeeming another code \
         must not touch it"
    );
}

/// A code redeems for one account: every later redemption by another account, however soon,
/// gets `None`. The account that redeemed it may redeem it again while it is live (a retried
/// job), and gets the same user.
pub async fn check_link_code_redeems_once(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let expires = t0 + LINK_CODE_LIFETIME_MS;
    let user = UserId::from("alice");
    store
        .create_link_code("K7-PLUM", &user, t0, expires)
        .await
        .unwrap();
    assert_eq!(store.link_code_redeemed_at("K7-PLUM").await.unwrap(), None);
    assert_eq!(store.link_code_redeemed_at("NO-SUCH").await.unwrap(), None);
    assert_eq!(
        store.link_code_expires_at("K7-PLUM").await.unwrap(),
        Some(expires)
    );
    assert_eq!(store.link_code_expires_at("NO-SUCH").await.unwrap(), None);
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", WA, t0 + 1)
            .await
            .unwrap(),
        Some(user.clone())
    );
    assert_eq!(
        store.link_code_redeemed_at("K7-PLUM").await.unwrap(),
        Some(t0 + 1)
    );
    for now in [t0 + 1, t0 + 2, t0 + 60_000] {
        assert_eq!(
            store.consume_link_code("K7-PLUM", TG, now).await.unwrap(),
            None,
            "a redeemed code must not redeem for another account"
        );
    }
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", WA, t0 + 60_001)
            .await
            .unwrap(),
        Some(user),
        "the account that redeemed a live code may redeem it again (a retry)"
    );
    assert_eq!(
        store.link_code_redeemed_at("K7-PLUM").await.unwrap(),
        Some(t0 + 1),
        "when it was first redeemed"
    );
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", TG, t0 + 60_002)
            .await
            .unwrap(),
        None,
        "a retry by the redeemer must not free the code for others"
    );
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", WA, expires)
            .await
            .unwrap(),
        None,
        "not even its redeemer redeems an expired code"
    );
}

/// A code made for one account redeems for it alone: another's tries get `None` and leave
/// it as it was (it still redeems for its account afterwards, again on a retry), until it
/// expires; its string, once expired, makes a code for anyone again.
pub async fn check_link_code_made_for_one_account(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let expires = t0 + LINK_CODE_LIFETIME_MS;
    let user = UserId::from("alice");
    store
        .create_link_code_for("M0-VEDX", &user, WA, t0, expires)
        .await
        .unwrap();
    for now in [t0 + 1, t0 + 2] {
        assert_eq!(
            store.consume_link_code("M0-VEDX", TG, now).await.unwrap(),
            None,
            "a code made for another account"
        );
    }
    assert_eq!(
        store.link_code_redeemed_at("M0-VEDX").await.unwrap(),
        None,
        "another account's tries redeem nothing"
    );
    for now in [t0 + 3, t0 + 4] {
        assert_eq!(
            store.consume_link_code("M0-VEDX", WA, now).await.unwrap(),
            Some(user.clone()),
            "its own account redeems it, however many others tried first"
        );
    }
    assert_eq!(
        store
            .consume_link_code("M0-VEDX", TG, t0 + 5)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .consume_link_code("M0-VEDX", WA, expires)
            .await
            .unwrap(),
        None,
        "expired"
    );
    let result = store
        .create_link_code_for("M0-VEDX", &user, TG, t0 + 6, t0 + 6 + LINK_CODE_LIFETIME_MS)
        .await;
    assert_conflict(result, "creating a code for one account over a live one");
    store
        .create_link_code("M0-VEDX", &user, expires, expires + LINK_CODE_LIFETIME_MS)
        .await
        .unwrap();
    assert_eq!(
        store
            .consume_link_code("M0-VEDX", TG, expires + 1)
            .await
            .unwrap(),
        Some(user),
        "replaced by a code for anyone"
    );
}

/// From its expiry on, a code that was never redeemed redeems nothing.
pub async fn check_expired_link_code(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let expires = t0 + LINK_CODE_LIFETIME_MS;
    let user = UserId::from("alice");
    store
        .create_link_code("K7-PLUM", &user, t0, expires)
        .await
        .unwrap();
    store
        .create_link_code("Q2-FERN", &user, t0, expires)
        .await
        .unwrap();
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", WA, expires)
            .await
            .unwrap(),
        None,
        "a code is expired at its expires_at_ms"
    );
    assert_eq!(
        store
            .consume_link_code("Q2-FERN", WA, expires + 86_400_000)
            .await
            .unwrap(),
        None,
        "a code long past its expiry redeems nothing"
    );
}

/// An unknown code redeems nothing, and trying leaves no record behind.
pub async fn check_unknown_link_code(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    assert_eq!(
        store.consume_link_code("NO-SUCH", WA, t0).await.unwrap(),
        None,
        "an unknown code redeems nothing"
    );
    assert_eq!(
        store.consume_link_code("", WA, t0).await.unwrap(),
        None,
        "the empty code redeems nothing"
    );
    let user = UserId::from("alice");
    store
        .create_link_code("NO-SUCH", &user, t0 + 1, t0 + LINK_CODE_LIFETIME_MS)
        .await
        .expect("a failed redemption must not leave a record that blocks creating the code");
    assert_eq!(
        store
            .consume_link_code("NO-SUCH", WA, t0 + 2)
            .await
            .unwrap(),
        Some(user)
    );
}

/// Creating a code that is live is a `Conflict`, redeemed or not, and keeps the stored code;
/// from its expiry on, the code can be created again, for anyone, and redeems afresh.
pub async fn check_create_link_code_conflicts(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let expires = t0 + LINK_CODE_LIFETIME_MS;
    let (alice, mallory, bob) = (
        UserId::from("alice"),
        UserId::from("mallory"),
        UserId::from("bob"),
    );
    store
        .create_link_code("K7-PLUM", &alice, t0, expires)
        .await
        .unwrap();

    let result = store
        .create_link_code("K7-PLUM", &mallory, t0 + 1, t0 + 1 + LINK_CODE_LIFETIME_MS)
        .await;
    assert_conflict(result, "creating a link code that is live");
    let result = store
        .create_link_code(
            "K7-PLUM",
            &alice,
            expires - 1,
            expires + LINK_CODE_LIFETIME_MS,
        )
        .await;
    assert_conflict(
        result,
        "creating a link code one millisecond before it expires",
    );
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", WA, t0 + 2)
            .await
            .unwrap(),
        Some(alice.clone()),
        "a conflicting create must leave the stored code unchanged"
    );
    let result = store
        .create_link_code("K7-PLUM", &mallory, t0 + 3, t0 + 3 + LINK_CODE_LIFETIME_MS)
        .await;
    assert_conflict(
        result,
        "creating a link code that was redeemed but is still live",
    );

    // Expired: the string is free again, and the new code starts unredeemed.
    let later = expires + LINK_CODE_LIFETIME_MS;
    store
        .create_link_code("K7-PLUM", &bob, expires, later)
        .await
        .expect("a code may be created again from the moment the old one expires");
    assert_eq!(
        store
            .consume_link_code("K7-PLUM", WA, expires + 1)
            .await
            .unwrap(),
        Some(bob),
        "a replaced code redeems for its new user, whatever became of the old one"
    );

    // An expired code that was never redeemed is replaced the same way.
    store
        .create_link_code("Q2-FERN", &alice, t0, expires)
        .await
        .unwrap();
    store
        .create_link_code("Q2-FERN", &mallory, later, later + LINK_CODE_LIFETIME_MS)
        .await
        .expect("an expired, unredeemed code may be replaced");
    assert_eq!(
        store
            .consume_link_code("Q2-FERN", WA, later + 1)
            .await
            .unwrap(),
        Some(mallory)
    );
}

/// Many accounts redeem one code at once: exactly one gets the user, the rest get `None`.
pub async fn check_concurrent_link_code_consumers(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let user = UserId::from("alice");
    for round in 0..4 {
        let code = format!("RACE-{round}");
        let code = code.as_str();
        store
            .create_link_code(code, &user, t0, t0 + LINK_CODE_LIFETIME_MS)
            .await
            .unwrap();
        let winner = race(|w| async move {
            let account = format!("whatsapp#racer-{w}");
            match store.consume_link_code(code, &account, t0 + 1_000).await {
                Ok(Some(user)) => (Some(user), Ok(())),
                Ok(None) => (
                    None,
                    Err(StoreError::Conflict {
                        what: format!("link code {code}, consumer {w}"),
                    }),
                ),
                Err(e) => (None, Err(e)),
            }
        });
        let winner = winner.unwrap_or_else(|msg| panic!("concurrent consume_link_code: {msg}"));
        assert_eq!(
            winner,
            Some(user.clone()),
            "the winner gets the code's user"
        );
        assert_eq!(
            store.consume_link_code(code, WA, t0 + 2_000).await.unwrap(),
            None,
            "after the race the code is redeemed"
        );
    }
}

/// A bound account reads back as its user; an unbound one as `None`; binding twice to the same
/// user is harmless.
pub async fn check_bind_identity(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let alice = UserId::from("alice");
    assert_eq!(
        store.identity("whatsapp", "+491701234567").await.unwrap(),
        None,
        "an unbound account has no user"
    );
    store
        .bind_identity("whatsapp", "+491701234567", &alice, t0)
        .await
        .unwrap();
    assert_eq!(
        store.identity("whatsapp", "+491701234567").await.unwrap(),
        Some(alice.clone()),
        "a bound account reads back as its user"
    );
    store
        .bind_identity("whatsapp", "+491701234567", &alice, t0 + 1)
        .await
        .expect("binding an account to its own user again is harmless");
    assert_eq!(
        store.identity("whatsapp", "+491701234567").await.unwrap(),
        Some(alice)
    );
    assert_eq!(
        store.identity("whatsapp", "+491701234568").await.unwrap(),
        None,
        "binding one account must not bind another"
    );
}

/// Binding a bound account to someone else moves it; the user's other accounts stay.
pub async fn check_rebind_identity(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let (alice, bob) = (UserId::from("alice"), UserId::from("bob"));
    store
        .bind_identity("telegram", "5550001", &alice, t0)
        .await
        .unwrap();
    store
        .bind_identity("telegram", "5550002", &alice, t0)
        .await
        .unwrap();
    store
        .bind_identity("telegram", "5550001", &bob, t0 + 1_000)
        .await
        .expect("re-linking an account is not a conflict");
    assert_eq!(
        store.identity("telegram", "5550001").await.unwrap(),
        Some(bob),
        "re-linking moves the account to the new user"
    );
    assert_eq!(
        store.identity("telegram", "5550002").await.unwrap(),
        Some(alice),
        "re-linking one account must leave the user's other accounts alone"
    );
}

/// A job's binding is written only while the account is bound as the job read it.
pub async fn check_bind_identity_if(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let (alice, bob, carol) = (
        UserId::from("alice"),
        UserId::from("bob"),
        UserId::from("carol"),
    );
    let conflict = |r: Result<(), StoreError>, why: &str| {
        assert!(
            matches!(r, Err(StoreError::Conflict { .. })),
            "{why}: {r:?}"
        );
    };
    let (ch, id) = ("whatsapp", "+491701234500");
    store
        .bind_identity_if(ch, id, &alice, None, t0)
        .await
        .expect("an unbound account binds as read");
    assert_eq!(store.identity(ch, id).await.unwrap(), Some(alice.clone()));
    conflict(
        store.bind_identity_if(ch, id, &bob, None, t0 + 1).await,
        "read unbound, bound since",
    );
    conflict(
        store
            .bind_identity_if(ch, id, &carol, Some(&bob), t0 + 2)
            .await,
        "read bound to someone else",
    );
    assert_eq!(
        store.identity(ch, id).await.unwrap(),
        Some(alice.clone()),
        "a refused binding writes nothing"
    );
    store
        .bind_identity_if(ch, id, &alice, None, t0 + 3)
        .await
        .expect("bound to this user already (the same write tried again)");
    store
        .bind_identity_if(ch, id, &alice, Some(&alice), t0 + 3)
        .await
        .expect("bound to this user as read");
    let bound_at = |user: &UserId| {
        let user = user.clone();
        async move { store.bindings(Some(&user)).await.unwrap()[0].bound_at_ms }
    };
    assert_eq!(
        bound_at(&alice).await,
        t0,
        "binding again keeps when it was bound"
    );
    store
        .bind_identity_if(ch, id, &bob, Some(&alice), t0 + 5)
        .await
        .expect("bound as read, it moves");
    store
        .bind_identity_if(ch, id, &bob, Some(&alice), t0 + 6)
        .await
        .expect("moved already (the same write tried again)");
    assert_eq!(store.identity(ch, id).await.unwrap(), Some(bob.clone()));
    assert_eq!(bound_at(&bob).await, t0 + 5, "moved: bound anew, once");
    assert_eq!(
        store.unbind_identity(ch, id).await.unwrap(),
        Some(bob.clone())
    );
    conflict(
        store
            .bind_identity_if(ch, id, &carol, Some(&bob), t0 + 4)
            .await,
        "read bound, unbound since",
    );
    assert_eq!(
        store.identity(ch, id).await.unwrap(),
        None,
        "an unbound account stays unbound when the binding read is gone"
    );

    // Unbinding only what was bound by a time: an UNLINK older than the binding (run again
    // after a crash, once the sender had linked again) leaves it.
    store
        .bind_identity_if(ch, id, &carol, None, t0 + 10)
        .await
        .unwrap();
    conflict(
        store.unbind_identity_if(ch, id, t0 + 9).await.map(|_| ()),
        "bound after the time",
    );
    assert_eq!(
        store.identity(ch, id).await.unwrap(),
        Some(carol.clone()),
        "a newer binding is left"
    );
    assert_eq!(
        store.unbind_identity_if(ch, id, t0 + 10).await.unwrap(),
        Some(carol.clone()),
        "bound at the time: unbound, and whose it was"
    );
    assert_eq!(store.identity(ch, id).await.unwrap(), None);
    assert_eq!(
        store.unbind_identity_if(ch, id, t0 + 10).await.unwrap(),
        None,
        "nothing bound: nothing to unbind"
    );
    assert_eq!(
        store
            .unbind_identity_if(ch, "+4917012345", i64::MAX)
            .await
            .unwrap(),
        None,
        "external ids are matched whole"
    );
}

/// The same external id on two channels is two accounts; external ids may hold any character.
pub async fn check_identities_per_channel(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let (alice, bob, carol) = (
        UserId::from("alice"),
        UserId::from("bob"),
        UserId::from("carol"),
    );
    store
        .bind_identity("whatsapp", "+15550100", &alice, t0)
        .await
        .unwrap();
    store
        .bind_identity("sms", "+15550100", &bob, t0)
        .await
        .unwrap();
    store
        .bind_identity("slack", "T01#U02 \u{00e9}", &carol, t0)
        .await
        .unwrap();
    assert_eq!(
        store.identity("whatsapp", "+15550100").await.unwrap(),
        Some(alice)
    );
    assert_eq!(
        store.identity("sms", "+15550100").await.unwrap(),
        Some(bob),
        "the same external id on another channel is another account"
    );
    assert_eq!(
        store.identity("telegram", "+15550100").await.unwrap(),
        None,
        "an account bound on other channels is unbound on this one"
    );
    assert_eq!(
        store.identity("slack", "T01#U02 \u{00e9}").await.unwrap(),
        Some(carol)
    );
    assert_eq!(
        store.identity("slack", "T01").await.unwrap(),
        None,
        "external ids are matched whole"
    );
}

/// Run `write(w)` on `WRITERS` threads released together; the one value written, or what went
/// wrong.
pub(crate) fn race<T, F>(write: impl Fn(usize) -> F + Sync) -> Result<T, String>
where
    T: Send,
    F: Future<Output = (T, Result<(), StoreError>)>,
{
    const WRITERS: usize = 8;
    let runtime = tokio::runtime::Handle::current();
    let barrier = std::sync::Barrier::new(WRITERS);
    let outcomes: Vec<_> = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            let threads: Vec<_> = (0..WRITERS)
                .map(|w| {
                    let (runtime, barrier, write) = (&runtime, &barrier, &write);
                    scope.spawn(move || {
                        let future = write(w);
                        barrier.wait();
                        runtime.block_on(future)
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("writer thread panicked"))
                .collect()
        })
    });
    let mut winners = Vec::new();
    for (value, result) in outcomes {
        match result {
            Ok(()) => winners.push(value),
            Err(StoreError::Conflict { .. }) => {}
            Err(other) => return Err(format!("a losing writer must get Conflict, got {other:?}")),
        }
    }
    match winners.len() {
        1 => Ok(winners.pop().unwrap()),
        n => Err(format!("exactly one writer must succeed, {n} did")),
    }
}

fn assert_conflict(result: Result<(), StoreError>, what: &str) {
    assert!(
        matches!(result, Err(StoreError::Conflict { .. })),
        "{what} must be a Conflict, got {result:?}"
    );
}

async fn create(store: &dyn Store, id: &str) -> ConversationId {
    let conv = conversation(id, "user-1", 1_000);
    store.create_conversation(&conv).await.unwrap();
    conv.id
}

fn conversation(id: &str, user: &str, created_at_ms: i64) -> Conversation {
    Conversation {
        created_at_ms,
        ..Conversation::new(id, UserId::from(user), "web", "support")
    }
}

fn message(
    conv: &ConversationId,
    segment: u32,
    position: u64,
    role: Role,
    parts: Vec<Part>,
) -> Message {
    Message {
        conversation_id: conv.clone(),
        segment,
        position,
        role,
        parts,
        call: None,
        action_id: None,
        created_at_ms: 1_700_000_000_000 + position as i64,
    }
}

fn visible(conv: &ConversationId, position: u64, role: VisibleRole, text: &str) -> VisibleEntry {
    VisibleEntry {
        conversation_id: conv.clone(),
        position,
        role,
        text: text.to_owned(),
        buttons: vec![],
        reaction: None,
        turn: position / 2,
        created_at_ms: 1_700_000_000_000 + position as i64,
    }
}

fn assistant_with_every_part(conv: &ConversationId, position: u64) -> Message {
    let parts = vec![
        Part::Reasoning(Reasoning::Text {
            text: "think: user wants the invoice".into(),
            signature: Some("sig-\u{00FF}==".into()),
        }),
        Part::Reasoning(Reasoning::Text {
            text: String::new(),
            signature: None,
        }),
        Part::Reasoning(Reasoning::Redacted {
            data: (0..=255).collect(),
        }),
        Part::text("Let me look that up."),
        Part::ToolUse {
            id: "toolu_01".into(),
            name: "find_invoice".into(),
            input: json!({
                "customer": { "id": 17, "tags": ["vip", null, true] },
                "amounts": [0.1, -2.5e-300, 1e300, u64::MAX, i64::MIN],
                "empty": {}, "note": "line\nbreak \u{2028} \u{1F600}"
            }),
        },
        Part::Image(MediaRef {
            key: "media/conv-a/photo.jpg".into(),
            mime_type: "image/jpeg".into(),
            size_bytes: 123_456,
        }),
        Part::Document(MediaRef {
            key: "media/conv-a/terms.pdf".into(),
            mime_type: "application/pdf".into(),
            size_bytes: u64::MAX,
        }),
    ];
    let call = CallRecord {
        backend: "bedrock".into(),
        model: "arn:aws:bedrock:eu-west-1:123:inference-profile/x".into(),
        stop_reason: Some(StopReason::Other("brand_new_reason".into())),
        error: Some("throttled".into()),
        usage: Usage {
            input_tokens: 1_200,
            output_tokens: 345,
            cache_read_tokens: 1_000,
            cache_write_tokens: 7,
        },
        latency_ms: 812,
        tools_offered: vec!["find_invoice".into(), "send_receipt".into()],
    };
    Message {
        call: Some(call),
        action_id: Some("whatsapp#wamid.HBgL\u{00e9}==".into()),
        ..message(conv, 0, position, Role::Assistant, parts)
    }
}

fn tool_results() -> Vec<Part> {
    vec![
        Part::ToolResult {
            tool_use_id: "toolu_01".into(),
            content: json!({ "invoice": { "total": 12.5, "currency": "EUR" } }),
            is_error: false,
        },
        Part::ToolResult {
            tool_use_id: "toolu_02".into(),
            content: json!("customer not found"),
            is_error: true,
        },
    ]
}
