//! Conformance checks of the [`Accounts`](crate::Accounts) port and of the listing and unbinding
//! side of [`Identities`](crate::Identities).

use super::race;
use crate::{
    Account, AccountCursor, AccountRole, AccountStatus, Binding, CreateAccountError, Email, Roles,
    Store, StoreError,
};
use transcript::UserId;

const T0: i64 = 1_800_000_000_000;

fn email(text: &str) -> Email {
    Email::parse(text).unwrap()
}

pub(super) fn account(user: &str, mail: Option<&str>, created_at_ms: i64) -> Account {
    Account {
        email: mail.map(email),
        created_at_ms,
        ..Account::new(user, format!("{user} Émile"))
    }
}

/// Every field reads back as written; putting again replaces; an unknown user is `None`.
pub async fn check_accounts(store: &dyn Store) {
    assert_eq!(store.account(&"alice".into()).await.unwrap(), None);
    let mut alice = Account {
        time_zone: "Europe/Madrid".into(),
        roles: Roles::default().with(AccountRole::Finance),
        ..account("alice", Some("Alice@Example.org"), T0)
    };
    store.put_account(&alice).await.unwrap();
    assert_eq!(
        store.account(&"alice".into()).await.unwrap(),
        Some(alice.clone()),
        "an account reads back with every field"
    );
    alice.status = AccountStatus::Paused;
    alice.time_zone = "America/New_York".into();
    alice.roles = Roles::NONE.with(AccountRole::Admin);
    alice.display_name = "Alice".into();
    store.put_account(&alice).await.unwrap();
    assert_eq!(
        store.account(&"alice".into()).await.unwrap(),
        Some(alice.clone()),
        "putting again replaces every field"
    );
    let bare = Account {
        roles: Roles::NONE,
        ..account("bob", None, -5)
    };
    store.put_account(&bare).await.unwrap();
    assert_eq!(
        store.account(&"bob".into()).await.unwrap(),
        Some(bare),
        "no e-mail, no role and a negative time read back"
    );
    assert_eq!(store.account(&"carol".into()).await.unwrap(), None);
}

/// Creating stores a new account, found by id and by e-mail; a taken id or e-mail is a typed
/// refusal that writes nothing.
pub async fn check_create_account(store: &dyn Store) {
    let alice = account("alice", Some("alice@example.org"), T0);
    store.create_account(&alice).await.unwrap();
    assert_eq!(
        store.account(&alice.user).await.unwrap(),
        Some(alice.clone())
    );
    assert_eq!(
        store
            .account_by_email(&email("ALICE@example.org"))
            .await
            .unwrap(),
        Some(alice.clone()),
        "an account is found by its e-mail, whatever its case"
    );
    assert_eq!(
        store
            .account_by_email(&email("bob@example.org"))
            .await
            .unwrap(),
        None
    );

    let again = Account {
        email: Some(email("other@example.org")),
        display_name: "Someone else".into(),
        ..alice.clone()
    };
    match store.create_account(&again).await {
        Err(CreateAccountError::UserTaken(user)) => assert_eq!(user, alice.user),
        other => panic!("creating a taken user id must be UserTaken, got {other:?}"),
    }
    assert_eq!(
        store.account(&alice.user).await.unwrap(),
        Some(alice.clone()),
        "a refused creation leaves the account alone"
    );
    assert_eq!(
        store
            .account_by_email(&email("other@example.org"))
            .await
            .unwrap(),
        None,
        "a refused creation must not claim its e-mail"
    );

    let bob = account("bob", Some("Alice@Example.org"), T0 + 1);
    match store.create_account(&bob).await {
        Err(CreateAccountError::EmailTaken(taken)) => {
            assert_eq!(taken, email("alice@example.org"))
        }
        other => panic!("creating with a taken e-mail must be EmailTaken, got {other:?}"),
    }
    assert_eq!(
        store.account(&bob.user).await.unwrap(),
        None,
        "a refused creation writes no account"
    );

    for user in ["carol", "dave"] {
        store
            .create_account(&account(user, None, T0))
            .await
            .expect("accounts without e-mail never clash");
    }
}

/// Replacing an account keeps e-mails unique: another account's address is a `Conflict`, and
/// an address given up is free again.
pub async fn check_put_account_keeps_emails_unique(store: &dyn Store) {
    let alice = account("alice", Some("alice@example.org"), T0);
    let bob = account("bob", Some("bob@example.org"), T0);
    store.create_account(&alice).await.unwrap();
    store.create_account(&bob).await.unwrap();

    let stealing = Account {
        email: Some(email("alice@example.org")),
        display_name: "Bob the thief".into(),
        ..bob.clone()
    };
    let result = store.put_account(&stealing).await;
    assert!(
        matches!(result, Err(StoreError::Conflict { .. })),
        "taking another account's e-mail must be a Conflict, got {result:?}"
    );
    assert_eq!(
        store.account(&bob.user).await.unwrap(),
        Some(bob.clone()),
        "a refused put writes nothing"
    );
    let new_bob = account("bob-2", Some("alice@example.org"), T0);
    assert!(
        matches!(
            store.put_account(&new_bob).await,
            Err(StoreError::Conflict { .. })
        ),
        "a new account cannot be put with a taken e-mail either"
    );
    assert_eq!(store.account(&new_bob.user).await.unwrap(), None);

    let moved = Account {
        email: Some(email("alice@example.net")),
        ..alice.clone()
    };
    store.put_account(&moved).await.unwrap();
    assert_eq!(
        store
            .account_by_email(&email("alice@example.org"))
            .await
            .unwrap(),
        None,
        "the old e-mail no longer finds the account"
    );
    assert_eq!(
        store
            .account_by_email(&email("alice@example.net"))
            .await
            .unwrap(),
        Some(moved.clone())
    );
    store
        .put_account(&stealing)
        .await
        .expect("an e-mail given up is free again");
    assert_eq!(
        store
            .account_by_email(&email("alice@example.org"))
            .await
            .unwrap(),
        Some(stealing.clone())
    );
    assert_eq!(
        store
            .account_by_email(&email("bob@example.org"))
            .await
            .unwrap(),
        None
    );

    let dropped = Account {
        email: None,
        ..moved
    };
    store.put_account(&dropped).await.unwrap();
    store
        .create_account(&account("erin", Some("alice@example.net"), T0))
        .await
        .expect("an e-mail removed from its account is free again");
}

/// A status change touches the status alone; an unknown user is `NotFound`.
pub async fn check_account_status(store: &dyn Store) {
    let alice = Account {
        roles: Roles::default().with(AccountRole::Admin),
        time_zone: "Asia/Tokyo".into(),
        ..account("alice", Some("alice@example.org"), T0)
    };
    store.create_account(&alice).await.unwrap();
    for status in [
        AccountStatus::Paused,
        AccountStatus::Active,
        AccountStatus::Closed,
    ] {
        store.set_account_status(&alice.user, status).await.unwrap();
        assert_eq!(
            store.account(&alice.user).await.unwrap(),
            Some(Account {
                status,
                ..alice.clone()
            }),
            "only the status changes"
        );
    }
    assert_eq!(
        store
            .account_by_email(&email("alice@example.org"))
            .await
            .unwrap()
            .map(|a| a.status),
        Some(AccountStatus::Closed),
        "the e-mail lookup sees the new status"
    );
    let result = store
        .set_account_status(&"nobody".into(), AccountStatus::Paused)
        .await;
    assert!(
        matches!(result, Err(StoreError::NotFound { .. })),
        "an unknown user's status change must be NotFound, got {result:?}"
    );
    assert_eq!(store.account(&"nobody".into()).await.unwrap(), None);
}

/// Accounts are listed by creation time, then user id; pages join up without gaps or repeats.
pub async fn check_accounts_listing(store: &dyn Store) {
    let empty = store.accounts_page(None, 10).await.unwrap();
    assert!(empty.accounts.is_empty() && empty.next.is_none());

    let made = [
        ("mia", T0 + 2),
        ("bea", T0),
        ("zoe", T0 - 7),
        ("ada", T0),
        ("ada#2", T0),
        ("old", 0),
    ];
    for (i, (user, at)) in made.iter().enumerate() {
        let mail = format!("u{i}@example.org");
        let a = account(user, Some(mail.as_str()), *at);
        if *at == 0 {
            // An account stored the old way, without a creation time.
            store
                .put_account(&Account { email: None, ..a })
                .await
                .unwrap();
        } else {
            store.create_account(&a).await.unwrap();
        }
    }
    let expected: Vec<UserId> = ["old", "zoe", "ada", "ada#2", "bea", "mia"]
        .map(UserId::from)
        .to_vec();

    let all = store.all_accounts().await.unwrap();
    let users: Vec<UserId> = all.iter().map(|a| a.user.clone()).collect();
    assert_eq!(users, expected, "by creation time, then user id");

    let mut paged = Vec::new();
    let mut after: Option<AccountCursor> = None;
    let mut pages = 0;
    loop {
        let page = store.accounts_page(after.as_ref(), 4).await.unwrap();
        pages += 1;
        assert!(page.accounts.len() <= 4, "a page holds at most its limit");
        paged.extend(page.accounts.iter().map(|a| a.user.clone()));
        match page.next {
            Some(next) => {
                assert_eq!(
                    Some(&next),
                    page.accounts.last().map(Account::cursor).as_ref(),
                    "the cursor is the page's last account"
                );
                after = Some(next);
            }
            None => break,
        }
        assert!(pages < 10, "paging must end");
    }
    assert_eq!(paged, expected, "pages join up in order");
    assert_eq!(pages, 2);

    let exact = store.accounts_page(None, 6).await.unwrap();
    assert_eq!(exact.accounts.len(), 6);
    assert_eq!(exact.next, None, "a page that ends the listing has no next");

    let middle = AccountCursor {
        created_at_ms: T0,
        user: "ada".into(),
    };
    let rest = store.accounts_page(Some(&middle), 2).await.unwrap();
    let users: Vec<UserId> = rest.accounts.iter().map(|a| a.user.clone()).collect();
    assert_eq!(users, ["ada#2", "bea"].map(UserId::from).to_vec());
    assert!(rest.next.is_some());
}

/// Of concurrent creations with one e-mail address, exactly one succeeds.
pub async fn check_concurrent_account_creation(store: &dyn Store) {
    let winner = race(|w| async move {
        let user = format!("user-{w}");
        let result = store
            .create_account(&account(&user, Some("same@example.org"), T0))
            .await
            .map_err(|e| match e {
                CreateAccountError::EmailTaken(_) => StoreError::Conflict {
                    what: "e-mail".into(),
                },
                CreateAccountError::UserTaken(u) => StoreError::Invalid {
                    what: format!("user {u} was never created before"),
                },
                CreateAccountError::Store(e) => e,
            });
        (UserId::from(user), result)
    })
    .unwrap_or_else(|e| panic!("concurrent creations with one e-mail: {e}"));
    assert_eq!(
        store
            .account_by_email(&email("same@example.org"))
            .await
            .unwrap()
            .map(|a| a.user),
        Some(winner)
    );
    let accounts = store.all_accounts().await.unwrap();
    assert_eq!(accounts.len(), 1, "only the winner's account exists");
}

/// Bound accounts are listed (all, or one user's) in order; unbinding removes one and says whose
/// it was.
pub async fn check_bindings_and_unbind(store: &dyn Store) {
    assert_eq!(store.bindings(None).await.unwrap(), vec![]);
    let binds = [
        ("telegram", "5550001", "bob", T0 + 1),
        ("whatsapp", "+15550100", "ann", T0),
        ("slack", "T01#U02", "ann", T0 + 2),
        ("sms", "+15550100", "ann#x", T0 + 3),
        ("telegram", "5550002", "ann", T0 + 4),
    ];
    for (channel, external, user, at) in binds {
        store
            .bind_identity(channel, external, &user.into(), at)
            .await
            .unwrap();
    }
    let binding = |channel: &str, external: &str, user: &str, at: i64| Binding {
        channel: channel.into(),
        external_id: external.into(),
        user: user.into(),
        bound_at_ms: at,
    };
    let anns = vec![
        binding("slack", "T01#U02", "ann", T0 + 2),
        binding("telegram", "5550002", "ann", T0 + 4),
        binding("whatsapp", "+15550100", "ann", T0),
    ];
    assert_eq!(
        store.bindings(Some(&"ann".into())).await.unwrap(),
        anns,
        "one user's accounts, by channel then external id; a user id that merely starts the same is another user"
    );
    let mut everyone = anns.clone();
    everyone.push(binding("sms", "+15550100", "ann#x", T0 + 3));
    everyone.push(binding("telegram", "5550001", "bob", T0 + 1));
    assert_eq!(
        store.bindings(None).await.unwrap(),
        everyone,
        "everyone's accounts, by user, channel, external id"
    );
    assert_eq!(
        store.bindings(Some(&"nobody".into())).await.unwrap(),
        vec![]
    );

    // Re-linking moves the account in the listings too.
    store
        .bind_identity("telegram", "5550001", &"ann".into(), T0 + 9)
        .await
        .unwrap();
    assert_eq!(store.bindings(Some(&"bob".into())).await.unwrap(), vec![]);
    assert!(
        store
            .bindings(Some(&"ann".into()))
            .await
            .unwrap()
            .contains(&binding("telegram", "5550001", "ann", T0 + 9))
    );

    assert_eq!(
        store.unbind_identity("slack", "T01#U02").await.unwrap(),
        Some("ann".into()),
        "unbinding says whose account it was"
    );
    assert_eq!(store.identity("slack", "T01#U02").await.unwrap(), None);
    assert_eq!(
        store.unbind_identity("slack", "T01#U02").await.unwrap(),
        None,
        "unbinding an unbound account is None"
    );
    assert_eq!(
        store.unbind_identity("slack", "T01").await.unwrap(),
        None,
        "external ids are matched whole"
    );
    let left: Vec<(String, String)> = store
        .bindings(None)
        .await
        .unwrap()
        .into_iter()
        .map(|b| (b.channel, b.external_id))
        .collect();
    assert_eq!(
        left,
        [
            ("telegram", "5550001"),
            ("telegram", "5550002"),
            ("whatsapp", "+15550100"),
            ("sms", "+15550100"),
        ]
        .map(|(c, e)| (c.to_owned(), e.to_owned()))
        .to_vec()
    );
    assert_eq!(
        store.identity("sms", "+15550100").await.unwrap(),
        Some("ann#x".into()),
        "unbinding one account leaves the others bound"
    );
}

/// `unbind_identity_of` unbinds an account only while it is bound to the given user: another
/// user's binding, or none, is left as it is (`false`).
pub async fn check_unbind_identity_of(store: &dyn Store) {
    let (ann, bob): (UserId, UserId) = ("ann".into(), "bob".into());
    store
        .bind_identity("slack", "T01#U02", &ann, T0)
        .await
        .unwrap();
    store
        .bind_identity("telegram", "5550001", &bob, T0)
        .await
        .unwrap();
    assert!(
        !store
            .unbind_identity_of("telegram", "5550001", &ann)
            .await
            .unwrap(),
        "another user's binding is not hers to unbind"
    );
    assert_eq!(
        store.identity("telegram", "5550001").await.unwrap(),
        Some(bob.clone())
    );
    assert!(
        store
            .unbind_identity_of("slack", "T01#U02", &ann)
            .await
            .unwrap()
    );
    assert_eq!(store.identity("slack", "T01#U02").await.unwrap(), None);
    assert!(
        !store
            .unbind_identity_of("slack", "T01#U02", &ann)
            .await
            .unwrap(),
        "unbound already"
    );
    assert_eq!(
        store.identity("telegram", "5550001").await.unwrap(),
        Some(bob)
    );
}
