//! Conversation leases: one holder at a time, renewals by the holder, lapsed leases taken over,
//! release by the holder only; a race has one winner.

use super::race;
use crate::{Lease, Store, StoreError};
use transcript::ConversationId;

/// A lease is held until it expires or its holder releases it; the holder renews it.
pub async fn check_leases(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let conv = ConversationId::from("whatsapp:+491701234567@alice");
    let other = ConversationId::from("web:c-2");
    assert_eq!(
        store
            .acquire_lease(&conv, "web#m1", t0, t0 + 60_000)
            .await
            .unwrap(),
        Lease::Held
    );
    assert_eq!(
        store
            .acquire_lease(&conv, "whatsapp#wamid.1", t0 + 1, t0 + 60_001)
            .await
            .unwrap(),
        Lease::Busy {
            holder: "web#m1".into(),
            until_ms: t0 + 60_000
        },
        "a live lease keeps another turn out"
    );
    assert_eq!(
        store
            .acquire_lease(&other, "whatsapp#wamid.1", t0 + 1, t0 + 60_001)
            .await
            .unwrap(),
        Lease::Held,
        "leases are per conversation"
    );
    // The holder renews; the new expiry is what others see.
    assert_eq!(
        store
            .acquire_lease(&conv, "web#m1", t0 + 50_000, t0 + 110_000)
            .await
            .unwrap(),
        Lease::Held
    );
    assert_eq!(
        store
            .acquire_lease(&conv, "whatsapp#wamid.1", t0 + 60_001, t0 + 120_000)
            .await
            .unwrap(),
        Lease::Busy {
            holder: "web#m1".into(),
            until_ms: t0 + 110_000
        },
        "a renewed lease outlives its first expiry"
    );
    // Someone else's release changes nothing; the holder's frees the conversation.
    store
        .release_lease(&conv, "whatsapp#wamid.1")
        .await
        .unwrap();
    assert!(matches!(
        store
            .acquire_lease(&conv, "whatsapp#wamid.1", t0 + 60_002, t0 + 120_000)
            .await
            .unwrap(),
        Lease::Busy { .. }
    ));
    store.release_lease(&conv, "web#m1").await.unwrap();
    assert_eq!(
        store
            .acquire_lease(&conv, "whatsapp#wamid.1", t0 + 60_003, t0 + 120_000)
            .await
            .unwrap(),
        Lease::Held
    );
    // The holder died: once its lease expired, the next turn takes it; the dead holder's late
    // release does not free the new holder's lease.
    assert_eq!(
        store
            .acquire_lease(&conv, "web#m2", t0 + 120_000, t0 + 180_000)
            .await
            .unwrap(),
        Lease::Held,
        "a lapsed lease is taken over"
    );
    store
        .release_lease(&conv, "whatsapp#wamid.1")
        .await
        .unwrap();
    assert!(matches!(
        store
            .acquire_lease(&conv, "web#m3", t0 + 120_001, t0 + 180_000)
            .await
            .unwrap(),
        Lease::Busy { holder, .. } if holder == "web#m2"
    ));
    // Releasing a lease nobody holds is fine.
    store
        .release_lease(&ConversationId::from("web:nobody"), "web#m1")
        .await
        .unwrap();
}

/// Turns racing for one conversation's free lease: exactly one holds it.
pub async fn check_concurrent_leases(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    for round in 0..4 {
        let conv = ConversationId(format!("web:race-{round}"));
        let conv = &conv;
        let winner = race(|w| async move {
            let holder = format!("job-{w}");
            let result = match store.acquire_lease(conv, &holder, t0, t0 + 60_000).await {
                Ok(Lease::Held) => Ok(()),
                Ok(Lease::Busy { .. }) => Err(StoreError::Conflict {
                    what: conv.0.clone(),
                }),
                Err(e) => Err(e),
            };
            (w, result)
        });
        winner.unwrap_or_else(|msg| panic!("concurrent acquire_lease: {msg}"));
    }
}
