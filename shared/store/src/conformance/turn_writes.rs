//! A store's combined turn writes ([`crate::TurnWrites`]), where it offers them: each is all or
//! nothing, and a refusal leaves everything as it was.

use super::{create, message, visible};
use crate::{
    Adjustment, BucketKey, Charge, Claim, Lease, Reserve, Store, StoreError, TurnFinish,
    VisibleRole,
};
use serde_json::json;
use transcript::{Message, Part, Role};

/// `finish_turn` records the reply, releases the holder's lease and marks the job done in one
/// write; with the position taken or the lease not the holder's, it writes none of the three.
pub async fn check_finish_turn(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let t0 = 1_800_000_000_000;
    let conv = create(store, "conv-finish").await;
    let job = "web#m-finish";
    assert_eq!(
        store.claim_job(job, t0, t0 + 60_000).await.unwrap(),
        Claim::Fresh
    );
    assert_eq!(
        store
            .acquire_lease(&conv, job, t0, t0 + 60_000)
            .await
            .unwrap(),
        Lease::Held
    );
    let question = visible(&conv, 0, VisibleRole::User, "hi");
    store.append_visible(&question).await.unwrap();

    // The position is taken: nothing is written, the lease is still held, the job not done.
    let clash = visible(&conv, 0, VisibleRole::Assistant, "hello");
    let finish = |entry| TurnFinish {
        entry,
        conversation: &conv,
        holder: job,
        job_key: job,
        keep_until_ms: t0 + 3_600_000,
    };
    let refused = writes.finish_turn(&finish(&clash)).await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "a taken position refuses the whole write, got {refused:?}"
    );
    assert_eq!(store.visible(&conv).await.unwrap(), vec![question.clone()]);
    assert!(
        matches!(
            store
                .acquire_lease(&conv, "other", t0 + 1, t0 + 60_001)
                .await,
            Ok(Lease::Busy { .. })
        ),
        "a refused finish keeps the lease"
    );
    assert!(
        matches!(
            store.claim_job(job, t0 + 1, t0 + 60_001).await,
            Ok(Claim::Busy { .. })
        ),
        "a refused finish leaves the job running"
    );

    // All three in one write.
    let reply = visible(&conv, 1, VisibleRole::Assistant, "hello");
    writes.finish_turn(&finish(&reply)).await.unwrap();
    assert_eq!(
        store.visible(&conv).await.unwrap(),
        vec![question.clone(), reply.clone()]
    );
    assert_eq!(
        store.claim_job(job, t0 + 2, t0 + 60_002).await.unwrap(),
        Claim::Done,
        "the job is marked done"
    );
    assert_eq!(
        store
            .acquire_lease(&conv, "web#m-next", t0 + 2, t0 + 60_002)
            .await
            .unwrap(),
        Lease::Held,
        "the lease is released"
    );

    // The lease is another turn's now (it lapsed and was taken): nothing is written.
    let late_job = "web#m-late";
    assert_eq!(
        store
            .claim_job(late_job, t0 + 3, t0 + 60_003)
            .await
            .unwrap(),
        Claim::Fresh
    );
    let late = visible(&conv, 2, VisibleRole::Assistant, "late");
    let refused = writes
        .finish_turn(&TurnFinish {
            entry: &late,
            conversation: &conv,
            holder: late_job,
            job_key: late_job,
            keep_until_ms: t0 + 3_600_000,
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "a lease that is not the holder's refuses the whole write, got {refused:?}"
    );
    assert_eq!(store.visible(&conv).await.unwrap(), vec![question, reply]);
    assert!(
        matches!(
            store.claim_job(late_job, t0 + 4, t0 + 60_004).await,
            Ok(Claim::Busy { .. })
        ),
        "the job stays running"
    );
    assert_eq!(
        store
            .acquire_lease(&conv, "web#m-third", t0 + 4, t0 + 60_004)
            .await
            .unwrap(),
        Lease::Busy {
            holder: "web#m-next".into(),
            until_ms: t0 + 60_002
        },
        "the other turn's lease is untouched"
    );
}

/// `append_with_tool_result` records the last call's result and appends the tool message in
/// one write; with the result recorded already or the position taken, it writes neither.
pub async fn check_append_with_tool_result(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let conv = create(store, "conv-tools").await;
    let asked = message(
        &conv,
        0,
        0,
        Role::Assistant,
        vec![Part::text("let me look")],
    );
    store.append_message(&asked).await.unwrap();
    let part = |text: &str| Part::ToolResult {
        tool_use_id: "t2".into(),
        content: json!({ "result": text }),
        is_error: false,
    };
    let tool_message = |position| -> Message {
        message(
            &conv,
            0,
            position,
            Role::Tool,
            vec![part("first"), part("second")],
        )
    };

    // The position is taken: the result is not recorded either.
    let taken = message(&conv, 0, 1, Role::User, vec![Part::text("in the way")]);
    store.append_message(&taken).await.unwrap();
    let refused = writes
        .append_with_tool_result(&tool_message(1), 0, "t2", &part("second"), &[])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "a taken position refuses the whole write, got {refused:?}"
    );
    assert!(
        store.tool_results(&conv, 0).await.unwrap().is_empty(),
        "a refused write records no result"
    );

    // Both in one write.
    let written = tool_message(2);
    assert!(
        writes
            .append_with_tool_result(&written, 0, "t2", &part("second"), &[])
            .await
            .unwrap(),
        "nothing to reserve, so nothing refused"
    );
    assert_eq!(
        store.tool_results(&conv, 0).await.unwrap().get("t2"),
        Some(&part("second"))
    );
    assert_eq!(
        store.messages(&conv, 0).await.unwrap(),
        vec![asked.clone(), taken.clone(), written.clone()]
    );

    // The result is recorded already: the message is not appended.
    let refused = writes
        .append_with_tool_result(&tool_message(3), 0, "t2", &part("again"), &[])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "a recorded result refuses the whole write, got {refused:?}"
    );
    assert_eq!(
        store.messages(&conv, 0).await.unwrap(),
        vec![asked, taken, written]
    );
    assert_eq!(
        store.tool_results(&conv, 0).await.unwrap().get("t2"),
        Some(&part("second")),
        "the first record stands"
    );
}

/// A scope's minute and hour token buckets for the reserving checks: the hour at 900 of a
/// 1,000 cap to begin with.
struct Reserving {
    scope: &'static str,
}

impl Reserving {
    async fn with_hour_at_900(store: &dyn Store, scope: &'static str) -> Self {
        let this = Self { scope };
        assert_eq!(
            store
                .reserve(&[this.charge("tokens_1h", 900, Some(1_000))])
                .await
                .unwrap(),
            Reserve::Reserved
        );
        this
    }

    fn bucket(&self, window: &str) -> BucketKey {
        BucketKey {
            scope: self.scope.into(),
            window: window.into(),
            start_ms: 1_800_000_000_000,
        }
    }

    fn charge(&self, window: &str, amount: u64, limit: Option<u64>) -> Charge {
        Charge {
            bucket: self.bucket(window),
            amount,
            limit,
            expires_at_ms: 1_800_003_600_000,
        }
    }

    /// The minute's and the hour's usage.
    async fn usage(&self, store: &dyn Store) -> Vec<u64> {
        store
            .bucket_usage(&[self.bucket("tokens_1m"), self.bucket("tokens_1h")])
            .await
            .unwrap()
    }
}

/// `append_with_tool_result` with the next call's reservation: all three in one write when
/// every charge fits its cap; when one would pass it (or cannot fit even an empty bucket),
/// `Ok(false)` and nothing is written — no result, no message, no charge on any bucket; a taken
/// position refuses the charges too.
pub async fn check_append_with_tool_result_reserving(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let conv = create(store, "conv-tools-reserving").await;
    let asked = message(&conv, 0, 0, Role::Assistant, vec![Part::text("looking")]);
    store.append_message(&asked).await.unwrap();
    let part = |id: &str| Part::ToolResult {
        tool_use_id: id.into(),
        content: json!({ "events": [] }),
        is_error: false,
    };
    let scope = Reserving::with_hour_at_900(store, "user:reserving-tools").await;
    let charge = |window: &str, amount, limit| scope.charge(window, amount, limit);
    let usage = || scope.usage(store);

    // The hour's cap would be passed: nothing at all, though the minute's charge fits.
    let tool_message = message(&conv, 0, 1, Role::Tool, vec![part("t1")]);
    for over in [
        charge("tokens_1h", 101, Some(1_000)),
        charge("tokens_1h", 1_001, Some(1_000)),
    ] {
        let refused = writes
            .append_with_tool_result(
                &tool_message,
                0,
                "t1",
                &part("t1"),
                &[charge("tokens_1m", 50, Some(10_000)), over.clone()],
            )
            .await
            .unwrap();
        assert!(!refused, "{over:?} passes the cap: refused");
        assert_eq!(usage().await, vec![0, 900], "no bucket charged");
        assert!(store.tool_results(&conv, 0).await.unwrap().is_empty());
        assert_eq!(store.messages(&conv, 0).await.unwrap(), vec![asked.clone()]);
    }

    // Everything fits (up to the cap exactly, and an uncapped charge): all of it, one write.
    assert!(
        writes
            .append_with_tool_result(
                &tool_message,
                0,
                "t1",
                &part("t1"),
                &[
                    charge("tokens_1m", 50, None),
                    charge("tokens_1h", 100, Some(1_000))
                ],
            )
            .await
            .unwrap()
    );
    assert_eq!(usage().await, vec![50, 1_000]);
    assert_eq!(
        store.tool_results(&conv, 0).await.unwrap().get("t1"),
        Some(&part("t1"))
    );
    assert_eq!(
        store.messages(&conv, 0).await.unwrap(),
        vec![asked.clone(), tool_message.clone()]
    );

    // The position is taken (and the result recorded): refused whole, the charges with it.
    let again = writes
        .append_with_tool_result(
            &tool_message,
            0,
            "t1",
            &part("t1"),
            &[charge("tokens_1m", 7, None)],
        )
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "got {again:?}"
    );
    assert_eq!(
        usage().await,
        vec![50, 1_000],
        "a refused write charges nothing"
    );
}

/// `start_turn_reserving`: the turn's start (the conversation moved on, the user's message and
/// its visible entry) and the first call's reservation in one write when every charge fits;
/// when one would pass its cap, `Ok(false)` and nothing is written; a taken position (or a
/// conversation that is gone) refuses the charges too.
pub async fn check_start_turn_reserving(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let id = create(store, "conv-start-reserving").await;
    let before = store.conversation(&id).await.unwrap().unwrap();
    let mut conv = before.clone();
    conv.turn = 1;
    conv.prompt_version = "v2".into();
    let said = message(&id, 0, 0, Role::User, vec![Part::text("hi")]);
    let entry = visible(&id, 0, VisibleRole::User, "hi");
    let scope = Reserving::with_hour_at_900(store, "user:reserving-start").await;
    let charge = |window: &str, amount, limit| scope.charge(window, amount, limit);
    let usage = || scope.usage(store);
    let untouched = || async {
        assert_eq!(store.conversation(&id).await.unwrap().unwrap(), before);
        assert!(store.messages(&id, 0).await.unwrap().is_empty());
        assert!(store.visible(&id).await.unwrap().is_empty());
    };

    // The hour's cap would be passed: nothing at all, though the minute's charge fits.
    for over in [
        charge("tokens_1h", 101, Some(1_000)),
        charge("tokens_1h", 1_001, Some(1_000)),
    ] {
        let refused = writes
            .start_turn_reserving(
                &conv,
                &said,
                &entry,
                &[charge("tokens_1m", 50, Some(10_000)), over.clone()],
            )
            .await
            .unwrap();
        assert!(!refused, "{over:?} passes the cap: refused");
        assert_eq!(usage().await, vec![0, 900], "no bucket charged");
        untouched().await;
    }

    // A conversation that is gone refuses the charges with the rest.
    let mut gone = conv.clone();
    gone.id = "conv-never-created".into();
    let refused = writes
        .start_turn_reserving(
            &gone,
            &message(&gone.id, 0, 0, Role::User, vec![Part::text("hi")]),
            &visible(&gone.id, 0, VisibleRole::User, "hi"),
            &[charge("tokens_1m", 5, None)],
        )
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "got {refused:?}"
    );
    assert_eq!(
        usage().await,
        vec![0, 900],
        "a refused start charges nothing"
    );

    // Everything fits (up to the cap exactly, and an uncapped charge): all of it, one write.
    assert!(
        writes
            .start_turn_reserving(
                &conv,
                &said,
                &entry,
                &[
                    charge("tokens_1m", 50, None),
                    charge("tokens_1h", 100, Some(1_000))
                ],
            )
            .await
            .unwrap()
    );
    assert_eq!(usage().await, vec![50, 1_000]);
    assert_eq!(store.conversation(&id).await.unwrap().unwrap(), conv);
    assert_eq!(store.messages(&id, 0).await.unwrap(), vec![said.clone()]);
    assert_eq!(store.visible(&id).await.unwrap(), vec![entry.clone()]);

    // The positions are taken: refused whole, the charges with it.
    let mut next = conv.clone();
    next.turn = 2;
    let again = writes
        .start_turn_reserving(&next, &said, &entry, &[charge("tokens_1m", 7, None)])
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict { .. })),
        "got {again:?}"
    );
    assert_eq!(
        usage().await,
        vec![50, 1_000],
        "a refused write charges nothing"
    );
    assert_eq!(
        store.conversation(&id).await.unwrap().unwrap(),
        conv,
        "a refused start leaves the conversation as it was"
    );
}

/// `append_message_adjusting` appends a call's answer and settles its reservation in one
/// write; with the position taken, it writes neither.
pub async fn check_append_message_adjusting(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let conv = create(store, "conv-settle").await;
    let bucket = BucketKey {
        scope: "user:ana".into(),
        window: "tokens_1h".into(),
        start_ms: 1_800_000_000_000,
    };
    let expires_at_ms = 1_800_003_600_000;
    let reserved = Charge {
        bucket: bucket.clone(),
        amount: 1_000,
        limit: Some(5_000),
        expires_at_ms,
    };
    assert_eq!(store.reserve(&[reserved]).await.unwrap(), Reserve::Reserved);
    let settle = |delta| Adjustment {
        bucket: bucket.clone(),
        delta,
        expires_at_ms,
    };
    let first = message(&conv, 0, 0, Role::User, vec![Part::text("hi")]);
    store.append_message(&first).await.unwrap();

    // The position is taken: the reservation is not settled either.
    let clash = message(&conv, 0, 0, Role::Assistant, vec![Part::text("hello")]);
    let refused = writes
        .append_message_adjusting(&clash, &[settle(-400)])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Conflict { .. })),
        "a taken position refuses the whole write, got {refused:?}"
    );
    assert_eq!(
        store
            .bucket_usage(std::slice::from_ref(&bucket))
            .await
            .unwrap(),
        [1_000]
    );
    assert_eq!(store.messages(&conv, 0).await.unwrap(), vec![first.clone()]);

    // Both in one write.
    let answer = message(&conv, 0, 1, Role::Assistant, vec![Part::text("hello")]);
    writes
        .append_message_adjusting(&answer, &[settle(-400)])
        .await
        .unwrap();
    assert_eq!(
        store
            .bucket_usage(std::slice::from_ref(&bucket))
            .await
            .unwrap(),
        [600]
    );
    assert_eq!(
        store.messages(&conv, 0).await.unwrap(),
        vec![first, answer.clone()]
    );

    // No adjustment (the call cost what it reserved): the message alone.
    let next = message(&conv, 0, 2, Role::Assistant, vec![Part::text("more")]);
    writes.append_message_adjusting(&next, &[]).await.unwrap();
    assert_eq!(store.messages(&conv, 0).await.unwrap().len(), 3);
    assert_eq!(store.bucket_usage(&[bucket]).await.unwrap(), [600]);
}

/// `conversation_and_account` reads what `conversation` and `account` read, each present or
/// absent on its own, and a next visible position never past the one the index gives (equal
/// to it after a turn's start or finish).
pub async fn check_conversation_and_account(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let conv = create(store, "conv-read").await;
    let user = transcript::UserId::from("user-1");
    let nobody = transcript::UserId::from("nobody");
    let missing = transcript::ConversationId::from("conv-missing");
    let read = |id, user| async move { writes.conversation_and_account(id, user).await.unwrap() };
    let stored = store.conversation(&conv).await.unwrap();
    assert!(stored.is_some());
    let first = read(&conv, &user).await;
    assert_eq!(
        (&first.conversation, &first.account),
        (&stored, &None),
        "no account yet"
    );
    assert!(first.next_visible.is_none_or(|n| n == 0));
    assert!(first.messages.as_ref().is_none_or(Vec::is_empty));
    let alice = super::accounts::account("user-1", Some("ana@example.org"), 5);
    store.put_account(&alice).await.unwrap();
    let both = read(&conv, &user).await;
    assert_eq!(
        (&both.conversation, &both.account),
        (&stored, &Some(alice.clone()))
    );
    let none = read(&missing, &user).await;
    assert_eq!(
        (
            none.conversation,
            none.account,
            none.next_visible,
            none.messages
        ),
        (None, Some(alice), None, None)
    );
    let nothing = read(&missing, &nobody).await;
    assert_eq!((nothing.conversation, nothing.account), (None, None));

    // The hint follows a turn's start and finish, and lags (never leads) an entry written alone.
    let mut moved = stored.unwrap();
    moved.turn += 1;
    let said = message(&conv, 0, 0, Role::User, vec![Part::text("hi")]);
    store
        .start_turn(&moved, &said, &visible(&conv, 0, VisibleRole::User, "hi"))
        .await
        .unwrap();
    let after = read(&conv, &user).await;
    let hint = after.next_visible;
    assert!(hint.is_none_or(|n| n == 1), "after the start: {hint:?}");
    assert!(
        after.messages.is_none_or(|m| m == [said.clone()]),
        "the segment as `messages` gives it"
    );
    store
        .append_visible(&visible(&conv, 1, VisibleRole::Assistant, "alone"))
        .await
        .unwrap();
    let hint = read(&conv, &user).await.next_visible;
    assert!(
        hint.is_none_or(|n| n <= 2),
        "never past the index: {hint:?}"
    );
    let t0 = 1_800_000_000_000;
    store
        .claim_job("web#m-read", t0, t0 + 60_000)
        .await
        .unwrap();
    store
        .acquire_lease(&conv, "web#m-read", t0, t0 + 60_000)
        .await
        .unwrap();
    writes
        .finish_turn(&TurnFinish {
            entry: &visible(&conv, 2, VisibleRole::Assistant, "done"),
            conversation: &conv,
            holder: "web#m-read",
            job_key: "web#m-read",
            keep_until_ms: t0 + 3_600_000,
        })
        .await
        .unwrap();
    let hint = read(&conv, &user).await.next_visible;
    assert!(hint.is_none_or(|n| n == 3), "after the finish: {hint:?}");
    assert_eq!(store.next_visible_position(&conv).await.unwrap(), 3);
}
