//! The planner example domain in the local server: its tools (offered in the web chat too),
//! the confirmation gate with the planner's risk policy, and the local user's account.

use crate::server::LOCAL_USER;
use engine::{ConfirmationGate, ContextFacts, ContextSource, context_source, risk_policy};
use planner::Planner;
use std::sync::Arc;
use store::{Account, Accounts, Store, StoreError};
use store_sqlite::SqliteStore;
use tools::{Registry, RegistryError};

/// Register the planner tools (purposes `planner` and `chat`) on `store`.
pub fn planner_tools(
    registry: &mut Registry,
    store: Arc<SqliteStore>,
) -> Result<Arc<Planner>, RegistryError> {
    let store: Arc<dyn Store> = store;
    let planner = Arc::new(Planner::new(store));
    planner::register(registry, planner.clone(), &[planner::PURPOSE, "chat"])?;
    Ok(planner)
}

/// The gate in front of every tool call, asking the planner which calls are risky.
pub fn confirmation_gate(planner: Arc<Planner>, store: Arc<SqliteStore>) -> Arc<ConfirmationGate> {
    let policy = risk_policy(move |ctx, tool, args| {
        let planner = planner.clone();
        async move { planner.assess_risk(&ctx, &tool, &args).await }
    });
    Arc::new(ConfirmationGate::new(Arc::new(policy), store))
}

/// The web chat's user gets an active account on first start; an existing one (perhaps paused
/// by the operator) is left as it is. The SQLite store never waits, so this runs inline.
pub fn ensure_local_account(store: &SqliteStore) -> Result<(), StoreError> {
    futures::executor::block_on(async {
        let user = LOCAL_USER.into();
        if store.account(&user).await?.is_none() {
            store
                .put_account(&Account::new(user, "You"))
                .await?;
        }
        Ok(())
    })
}

/// The per-turn context block's facts: the account's name and time zone, the user's events and
/// the conversation's active event, read fresh for every turn.
pub fn planner_context(planner: Arc<Planner>) -> Arc<dyn ContextSource> {
    Arc::new(context_source(move |conversation| {
        let planner = planner.clone();
        async move {
            let user = planner
                .user_context(&conversation.user_id, &conversation.id)
                .await
                .map_err(|e| e.to_string())?;
            Ok(ContextFacts {
                user_name: user.name,
                time_zone: user.time_zone,
                records: Some(user.records),
                active: None,
            })
        }
    }))
}
