//! Conformance check of the assistant's grant on an account.

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
