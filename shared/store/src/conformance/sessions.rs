//! Sessions and verified sign-ins: sessions found by hash until they expire, ended at
//! sign-out; a verified sign-in's state recorded once, and a race for it has one winner.

use super::race;
use crate::{Session, Store, StoreError};

fn session(hash: &str, user: &str, expires_at_ms: i64) -> Session {
    Session {
        id_hash: hash.into(),
        user: user.into(),
        csrf: format!("csrf-{hash}"),
        created_at_ms: 1_800_000_000_000,
        expires_at_ms,
    }
}

/// A session reads back until it expires or is deleted; hashes are unique.
pub async fn check_sessions(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let alice = session("aa11", "alice", t0 + 60_000);
    store.put_session(&alice).await.unwrap();
    store
        .put_session(&session("bb22", "bob", t0 + 60_000))
        .await
        .unwrap();
    assert_eq!(
        store.session("aa11", t0).await.unwrap(),
        Some(alice.clone())
    );
    assert!(matches!(
        store
            .put_session(&session("aa11", "mallory", t0 + 60_000))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(
        store.session("aa11", t0).await.unwrap().unwrap().user,
        "alice".into(),
        "a clashing hash never replaces a session"
    );
    assert_eq!(
        store.session("aa11", t0 + 59_999).await.unwrap(),
        Some(alice)
    );
    assert_eq!(
        store.session("aa11", t0 + 60_000).await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(store.session("cc33", t0).await.unwrap(), None);
    store.delete_session("bb22").await.unwrap();
    assert_eq!(store.session("bb22", t0).await.unwrap(), None, "signed out");
    store.delete_session("never-was").await.unwrap();
}

/// A verified sign-in's state is recorded once: a replay is told apart; another state is new;
/// a record past its keeping may be swept, and then its state reads as new.
pub async fn check_used_logins(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let day = 86_400_000;
    assert!(
        store
            .first_use_of_login("state-1", t0, t0 + day)
            .await
            .unwrap()
    );
    assert!(
        !store
            .first_use_of_login("state-1", t0 + 1, t0 + 1 + day)
            .await
            .unwrap(),
        "a replay"
    );
    assert!(
        !store
            .first_use_of_login("state-1", t0 + day - 1, t0 + 2 * day)
            .await
            .unwrap(),
        "still kept"
    );
    assert!(
        store
            .first_use_of_login("state-2", t0, t0 + day)
            .await
            .unwrap()
    );
    // Kept until t0 + day: a use after that is either refused (not swept yet) or new (swept);
    // a second use then is a replay either way.
    let _ = store
        .first_use_of_login("state-2", t0 + day, t0 + 2 * day)
        .await
        .unwrap();
    assert!(
        !store
            .first_use_of_login("state-2", t0 + day, t0 + 2 * day)
            .await
            .unwrap(),
        "a replay after the sweep"
    );
}

/// Callbacks racing with one state: exactly one records it.
pub async fn check_concurrent_first_use_of_login(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    for round in 0..4 {
        let state = format!("race-{round}");
        let state = state.as_str();
        let winner = race(|w| async move {
            let result = match store.first_use_of_login(state, t0, t0 + 600_000).await {
                Ok(true) => Ok(()),
                Ok(false) => Err(StoreError::Conflict {
                    what: state.to_owned(),
                }),
                Err(e) => Err(e),
            };
            (w, result)
        });
        winner.unwrap_or_else(|msg| panic!("concurrent first_use_of_login: {msg}"));
    }
}
