//! A store's combined turn writes ([`crate::TurnWrites`]), where it offers them: each is all or
//! nothing, and a refusal leaves everything as it was.

use super::{create, visible};
use crate::{Claim, Lease, Store, StoreError, TurnFinish, VisibleRole};

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
