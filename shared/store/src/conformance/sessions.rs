//! Sessions and sign-ins in progress: found by hash until they expire, ended at sign-out; a
//! sign-in in progress is taken once, and a race for it has one winner.

use super::race;
use crate::{PendingLogin, Session, Store, StoreError};

fn session(hash: &str, user: &str, expires_at_ms: i64) -> Session {
    Session {
        id_hash: hash.into(),
        user: user.into(),
        csrf: format!("csrf-{hash}"),
        created_at_ms: 1_800_000_000_000,
        expires_at_ms,
    }
}

fn login(state: &str, expires_at_ms: i64) -> PendingLogin {
    PendingLogin {
        state: state.into(),
        nonce: format!("nonce-{state}"),
        pkce_verifier: format!("verifier-{state}"),
        return_to: "/".into(),
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

/// A sign-in in progress is taken once, before it expires.
pub async fn check_pending_logins(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    let first = login("state-1", t0 + 600_000);
    store.put_login(&first).await.unwrap();
    assert!(matches!(
        store.put_login(&login("state-1", t0 + 600_000)).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.take_login("state-1", t0).await.unwrap(), Some(first));
    assert_eq!(
        store.take_login("state-1", t0).await.unwrap(),
        None,
        "taken once"
    );
    store
        .put_login(&login("state-2", t0 + 600_000))
        .await
        .unwrap();
    assert_eq!(
        store.take_login("state-2", t0 + 600_000).await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(store.take_login("unknown", t0).await.unwrap(), None);
}

/// Callbacks racing with one state: exactly one gets the sign-in.
pub async fn check_concurrent_take_login(store: &dyn Store) {
    let t0 = 1_800_000_000_000;
    for round in 0..4 {
        let state = format!("race-{round}");
        store.put_login(&login(&state, t0 + 600_000)).await.unwrap();
        let state = state.as_str();
        let winner = race(|w| async move {
            let result = match store.take_login(state, t0).await {
                Ok(Some(_)) => Ok(()),
                Ok(None) => Err(StoreError::Conflict {
                    what: state.to_owned(),
                }),
                Err(e) => Err(e),
            };
            (w, result)
        });
        winner.unwrap_or_else(|msg| panic!("concurrent take_login: {msg}"));
    }
}
