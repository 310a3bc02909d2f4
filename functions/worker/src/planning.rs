//! The planner example domain on the worker: its tools for channel conversations, the
//! confirmation gate with the planner's risk policy.

use channel_jobs::CHANNEL_PURPOSE;
use engine::{ConfirmationGate, risk_policy};
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
