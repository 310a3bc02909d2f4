//! A closed account is told it is closed, not paused: through the one job path (the web chat's
//! job, the guard chain's account check over the real accounts store), no model call, and the
//! sentence is what the visible transcript records.

use backend::Reply;
use budget::{PausedAccounts, StoreAccounts, lines};
use engine::{EngineOptions, TurnEnd};
use std::sync::Arc;
use store::{Account, AccountStatus, Accounts};
use store_sqlite::SqliteStore;
use tests::{Calls, Harness, sample_tools};

/// The harness's user-1 with an account of `status`, the account guard in front of the model.
async fn user_whose_account_is(status: AccountStatus) -> Harness {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .put_account(&Account {
            status,
            ..Account::new("user-1", "Ana")
        })
        .await
        .unwrap();
    let guard = Arc::new(PausedAccounts(Arc::new(StoreAccounts(store.clone()))));
    Harness::build_on(
        store,
        [Reply::text("never said")],
        sample_tools(Calls::default()),
        EngineOptions::default(),
        |engine| engine.with_guard(guard),
    )
    .await
}

#[tokio::test]
async fn a_closed_account_hears_that_it_is_closed() {
    let h = user_whose_account_is(AccountStatus::Closed).await;
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert_eq!(t.outcome.reply, lines::ACCOUNT_CLOSED);
    assert!(
        !t.outcome.reply.contains("paused"),
        "a closed account is not paused"
    );
    assert!(h.model.requests().is_empty(), "no model call");
    assert_eq!(
        h.visible().await.last().unwrap().text,
        lines::ACCOUNT_CLOSED
    );
}

#[tokio::test]
async fn a_paused_account_still_hears_that_it_is_paused() {
    let h = user_whose_account_is(AccountStatus::Paused).await;
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.end, TurnEnd::Denied);
    assert_eq!(t.outcome.reply, lines::ACCOUNT_PAUSED);
    assert!(h.model.requests().is_empty());
}

#[tokio::test]
async fn an_active_account_is_answered() {
    let h = user_whose_account_is(AccountStatus::Active).await;
    let t = h.turn("hello?").await;
    assert_eq!(t.outcome.reply, "never said");
    assert_eq!(h.model.requests().len(), 1);
}
