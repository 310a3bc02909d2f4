//! Conformance checks of the fields set on an account one at a time: the assistant's grant,
//! and when its person signed out everywhere.

use crate::{Account, AccountStatus, Store, StoreError};
use transcript::Grant;

/// A new account's assistant has the default grant; the grant reads back as put and as set;
/// setting it touches nothing else; an unknown user is `NotFound`.
pub async fn check_assistant_grant(store: &dyn Store) {
    let ana = Account {
        status: AccountStatus::Paused,
        time_zone: "Europe/Lisbon".into(),
        ..Account::new("ana", "Ana")
    };
    store.create_account(&ana).await.unwrap();
    assert_eq!(
        store
            .account(&ana.user)
            .await
            .unwrap()
            .map(|a| a.assistant_grant),
        Some(Grant::Risky),
        "the default grant is everything, risky calls confirmed"
    );
    for grant in [Grant::Read, Grant::Write, Grant::Risky, Grant::Read] {
        store.set_assistant_grant(&ana.user, grant).await.unwrap();
        assert_eq!(
            store.account(&ana.user).await.unwrap(),
            Some(Account {
                assistant_grant: grant,
                ..ana.clone()
            }),
            "only the grant changes"
        );
    }
    let put = Account {
        assistant_grant: Grant::Write,
        ..Account::new("bo", "Bo")
    };
    store.put_account(&put).await.unwrap();
    assert_eq!(
        store.account(&put.user).await.unwrap(),
        Some(put),
        "a put account keeps its grant"
    );
    let result = store
        .set_assistant_grant(&"nobody".into(), Grant::Read)
        .await;
    assert!(
        matches!(result, Err(StoreError::NotFound { .. })),
        "an unknown user's grant change must be NotFound, got {result:?}"
    );
    assert_eq!(store.account(&"nobody".into()).await.unwrap(), None);
}

/// Signing out everywhere reads back on the account, only moves later, touches nothing else,
/// survives a put of the account read before it; an unknown user is `NotFound`.
pub async fn check_end_sessions(store: &dyn Store) {
    let t = 1_800_000_000_000;
    let ana = Account {
        time_zone: "Europe/Lisbon".into(),
        ..Account::new("ana", "Ana")
    };
    store.create_account(&ana).await.unwrap();
    assert_eq!(
        store
            .account(&ana.user)
            .await
            .unwrap()
            .map(|a| a.sessions_ended_at_ms),
        Some(0),
        "a new account was never signed out everywhere"
    );
    store.end_sessions(&ana.user, t).await.unwrap();
    let ended = Account {
        sessions_ended_at_ms: t,
        ..ana.clone()
    };
    assert_eq!(store.account(&ana.user).await.unwrap(), Some(ended.clone()));
    store.end_sessions(&ana.user, t - 1).await.unwrap();
    assert_eq!(
        store.account(&ana.user).await.unwrap(),
        Some(ended.clone()),
        "an earlier time changes nothing"
    );
    // A replacement made from a read before the sign-out keeps it.
    store
        .put_account(&Account {
            display_name: "Ana B.".into(),
            ..ana.clone()
        })
        .await
        .unwrap();
    assert_eq!(
        store.account(&ana.user).await.unwrap(),
        Some(Account {
            display_name: "Ana B.".into(),
            ..ended.clone()
        }),
        "a put of an older read does not undo the sign-out"
    );
    store.end_sessions(&ana.user, t + 5).await.unwrap();
    assert_eq!(
        store
            .account(&ana.user)
            .await
            .unwrap()
            .map(|a| a.sessions_ended_at_ms),
        Some(t + 5)
    );
    let result = store.end_sessions(&"nobody".into(), t).await;
    assert!(
        matches!(result, Err(StoreError::NotFound { .. })),
        "an unknown user's sign-out must be NotFound, got {result:?}"
    );
    assert_eq!(store.account(&"nobody".into()).await.unwrap(), None);
}
