//! A job's claim with its conversation's lease ([`crate::TurnWrites::claim_with_lease`]), where
//! the store offers it: both or neither, a refused claim reported as `claim_job` reports it.

use crate::{Claim, ClaimWithLease, ClaimedWithLease, Lease, StartRead, Store};
use transcript::{ConversationId, Part, Role, UserId};

/// A fresh job on a free conversation gets both; a done job, a live claim, an expired claim to
/// take over and a conversation another turn holds get neither, and say which.
pub async fn check_claim_with_lease(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let t0 = 1_800_000_000_000;
    let conv = ConversationId::from("generic:chat-claim@alice");
    let start = |job: &'static str, now_ms: i64| ClaimWithLease {
        job_key: job,
        now_ms,
        claim_until_ms: now_ms + 90_000,
        conversation: &conv,
        holder: job,
        lease_until_ms: now_ms + 60_000,
    };

    // Both taken: the job is running, the lease is the job's.
    let first = "generic#m-1";
    assert_eq!(
        writes.claim_with_lease(&start(first, t0)).await.unwrap(),
        ClaimedWithLease::Both
    );
    assert_eq!(
        store.claim_job(first, t0 + 1, t0 + 60_000).await.unwrap(),
        Claim::Busy {
            until_ms: t0 + 90_000
        },
        "the job is claimed until the claim's expiry"
    );
    assert_eq!(
        store
            .acquire_lease(&conv, "generic#m-x", t0 + 1, t0 + 60_001)
            .await
            .unwrap(),
        Lease::Busy {
            holder: first.into(),
            until_ms: t0 + 60_000
        },
        "the lease is the job's until the lease's expiry"
    );

    // The conversation is busy: nothing is written (the job is not claimed).
    let second = "generic#m-2";
    assert_eq!(
        writes
            .claim_with_lease(&start(second, t0 + 2))
            .await
            .unwrap(),
        ClaimedWithLease::Apart
    );
    assert_eq!(
        store.claim_job(second, t0 + 3, t0 + 60_000).await.unwrap(),
        Claim::Fresh,
        "a refused lease leaves the job unclaimed"
    );

    // The first job's claim is live: refused as Busy, and the lease is not touched.
    store.release_lease(&conv, first).await.unwrap();
    assert_eq!(
        writes
            .claim_with_lease(&start(first, t0 + 4))
            .await
            .unwrap(),
        ClaimedWithLease::Refused(Claim::Busy {
            until_ms: t0 + 90_000
        })
    );
    assert_eq!(
        store
            .acquire_lease(&conv, "generic#m-x", t0 + 5, t0 + 60_005)
            .await
            .unwrap(),
        Lease::Held,
        "a refused claim takes no lease"
    );
    store.release_lease(&conv, "generic#m-x").await.unwrap();

    // Done: refused as Done.
    store.finish_job(first, t0 + 3_600_000).await.unwrap();
    assert_eq!(
        writes
            .claim_with_lease(&start(first, t0 + 6))
            .await
            .unwrap(),
        ClaimedWithLease::Refused(Claim::Done)
    );

    // An expired claim is taken over one by one (its attempt counts on): nothing written here.
    let third = "generic#m-3";
    assert_eq!(
        store.claim_job(third, t0, t0 + 10).await.unwrap(),
        Claim::Fresh
    );
    assert_eq!(
        writes
            .claim_with_lease(&start(third, t0 + 20))
            .await
            .unwrap(),
        ClaimedWithLease::Apart
    );
    assert_eq!(
        store.claim_job(third, t0 + 21, t0 + 60_000).await.unwrap(),
        Claim::TakenOver { attempt: 2 },
        "the expired claim is as it was"
    );
    assert_eq!(
        store
            .acquire_lease(&conv, "generic#m-x", t0 + 22, t0 + 60_022)
            .await
            .unwrap(),
        Lease::Held,
        "no lease was taken with it"
    );
}

/// With the turn's start read: when the store reads inside the claim, what it reads is what
/// `conversation_and_account` reads under the lease just taken (the conversation, its owner's
/// account, its segment); a conversation not there yet reads as absent; a claim not taken
/// reads nothing. A store that does not read there says `None`, and its caller reads.
pub async fn check_claim_with_lease_reading(store: &dyn Store) {
    let Some(writes) = store.turn_writes() else {
        return;
    };
    let t0 = 1_800_000_000_000;
    let conv = super::create(store, "conv-claim-reading").await;
    let user = UserId::from("user-1");
    let said = super::message(&conv, 0, 0, Role::User, vec![Part::text("hi")]);
    store.append_message(&said).await.unwrap();
    let alice = super::accounts::account("user-1", Some("ana@example.org"), 5);
    store.put_account(&alice).await.unwrap();
    let start = |job: &'static str, conversation, now_ms: i64| ClaimWithLease {
        job_key: job,
        now_ms,
        claim_until_ms: now_ms + 90_000,
        conversation,
        holder: job,
        lease_until_ms: now_ms + 60_000,
    };

    let first = "web#m-reading-1";
    let (claimed, read) = writes
        .claim_with_lease_reading(&start(first, &conv, t0), &user)
        .await
        .unwrap();
    assert_eq!(claimed, ClaimedWithLease::Both);
    if let Some(read) = read {
        let stored = store.conversation(&conv).await.unwrap();
        assert_eq!(
            (&read.conversation, &read.account),
            (&stored, &Some(alice.clone()))
        );
        assert!(
            read.messages
                .as_ref()
                .is_none_or(|m| *m == vec![said.clone()])
        );
        assert!(read.next_visible.is_none_or(|n| n == 0));
        assert_eq!(
            writes.conversation_and_account(&conv, &user).await.unwrap(),
            StartRead {
                account: Some(alice.clone()),
                conversation: stored,
                ..read.clone()
            },
            "what conversation_and_account reads"
        );
    }
    assert_eq!(
        store
            .acquire_lease(&conv, "web#m-x", t0 + 1, t0 + 60_001)
            .await
            .unwrap(),
        Lease::Busy {
            holder: first.into(),
            until_ms: t0 + 60_000
        },
        "the lease is the job's"
    );

    // Refused (its claim is live) and apart (the lease is held): nothing read.
    let second = "web#m-reading-2";
    for (job, found) in [
        (
            first,
            ClaimedWithLease::Refused(Claim::Busy {
                until_ms: t0 + 90_000,
            }),
        ),
        (second, ClaimedWithLease::Apart),
    ] {
        let (claimed, read) = writes
            .claim_with_lease_reading(&start(job, &conv, t0 + 2), &user)
            .await
            .unwrap();
        assert_eq!((claimed, read), (found, None));
    }

    // A conversation not made yet: claimed, and read as absent.
    let missing = ConversationId::from("conv-claim-reading-missing");
    let (claimed, read) = writes
        .claim_with_lease_reading(&start("web#m-reading-3", &missing, t0 + 3), &user)
        .await
        .unwrap();
    assert_eq!(claimed, ClaimedWithLease::Both);
    if let Some(read) = read {
        assert_eq!(
            (
                read.conversation,
                read.account,
                read.next_visible,
                read.messages
            ),
            (None, Some(alice), None, None)
        );
    }
}
