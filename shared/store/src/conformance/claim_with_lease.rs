//! A job's claim with its conversation's lease ([`crate::TurnWrites::claim_with_lease`]), where
//! the store offers it: both or neither, a refused claim reported as `claim_job` reports it.

use crate::{Claim, ClaimWithLease, ClaimedWithLease, Lease, Store};
use transcript::ConversationId;

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
