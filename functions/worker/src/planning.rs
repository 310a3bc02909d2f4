//! The planner example domain on the worker: its tools for channel conversations, the
//! confirmation gate with the planner's risk policy.

use channel_jobs::CHANNEL_PURPOSE;
use engine::{ConfirmationGate, ContextFacts, ContextSource, context_source, risk_policy};
use planner::Planner;
use std::sync::Arc;
use store::Store;
use tools::{Registry, RegistryError};

/// Register the planner tools for channel conversations, on `store`.
pub fn planner_tools(
    registry: &mut Registry,
    store: Arc<dyn Store>,
) -> Result<Arc<Planner>, RegistryError> {
    let planner = Arc::new(Planner::new(store));
    planner::register(
        registry,
        planner.clone(),
        &[planner::PURPOSE, CHANNEL_PURPOSE],
    )?;
    Ok(planner)
}

/// The gate in front of every tool call, asking the planner which calls are risky.
pub fn confirmation_gate(planner: Arc<Planner>, store: Arc<dyn Store>) -> Arc<ConfirmationGate> {
    let policy = risk_policy(move |ctx, tool, args| {
        let planner = planner.clone();
        async move { planner.assess_risk(&ctx, &tool, &args).await }
    });
    Arc::new(ConfirmationGate::new(Arc::new(policy), store))
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
