//! The one composition root. Every entrance — the worker Lambda, `bridle serve` (web chat and
//! messaging channels alike) — gets its engine from [`assemble`]: the planner's tools on the
//! one registry, the confirmation gate with the planner's risk policy (and the other tools',
//! when given), the per-turn context block from the planner's records, and the cheap guards and
//! the budget in front of every model call (DESIGN.md invariants 8, 9 and 11). Entrances differ by their sender, never by how the
//! engine was put together.
//!
//! Depends on the ports and the domain (`engine`, `planner`, `budget`, `store`, `tools`); never
//! on an adapter, AWS or an HTTP server.

mod model_settings;

pub use model_settings::{ModelSettings, Provider};

use backend::ChatModel;
use budget::{AccountStatus, BudgetConfig, Clock, system_clock};
use engine::{
    ConfirmationGate, ConfirmationOptions, ContextFacts, ContextSource, Engine, EngineOptions,
    RiskPolicy, context_source, risk_policy,
};
use planner::Planner;
use std::sync::Arc;
use store::Store;
use tools::{Registry, RegistryError};

/// The purpose (tool catalogue) of conversations, web and messaging alike.
pub const CHAT_PURPOSE: &str = "chat";

/// The guards' settings.
#[derive(Clone)]
pub struct GuardOptions {
    /// Caps, prices, output allowance.
    pub budget: Arc<BudgetConfig>,
    /// Which accounts are paused; `None` reads the store's accounts.
    pub accounts: Option<Arc<dyn AccountStatus>>,
    pub clock: Clock,
    /// `Some(line)` when no model is configured: every turn is answered with `line` and no
    /// model is called.
    pub no_model: Option<String>,
    /// The confirmation gate's settings (how long a held risky call may be confirmed:
    /// `BRIDLE_CONFIRMATION_TTL_S`).
    pub confirmation: ConfirmationOptions,
}

impl Default for GuardOptions {
    fn default() -> Self {
        Self {
            budget: Arc::new(BudgetConfig::default()),
            accounts: None,
            clock: system_clock(),
            no_model: None,
            confirmation: ConfirmationOptions::default(),
        }
    }
}

impl std::fmt::Debug for GuardOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardOptions")
            .field("budget", &self.budget)
            .field("no_model", &self.no_model.is_some())
            .field("confirmation", &self.confirmation)
            .finish_non_exhaustive()
    }
}

/// What [`assemble`] puts together.
pub struct Parts {
    pub model: Arc<dyn ChatModel>,
    pub store: Arc<dyn Store>,
    /// Tools of this deployment besides the planner's (the local demo notes), already
    /// registered; the planner's are added here.
    pub registry: Registry,
    /// Which of those tools' calls need the user's yes (asked before the planner's policy);
    /// `None` when none ever do.
    pub risk: Option<Arc<dyn RiskPolicy>>,
    pub engine: EngineOptions,
    pub guards: GuardOptions,
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parts")
            .field("engine", &self.engine)
            .field("guards", &self.guards)
            .finish_non_exhaustive()
    }
}

/// The engine every entrance runs, and the domain service behind its tools.
#[derive(Clone)]
pub struct Assembled {
    pub engine: Arc<Engine>,
    pub planner: Arc<Planner>,
    /// The engine's registry (MCP serves its `mcp` catalogue through the same runner).
    pub registry: Arc<Registry>,
    /// The confirmation gate's policy (MCP refuses what it would hold).
    pub policy: Arc<dyn RiskPolicy>,
}

impl std::fmt::Debug for Assembled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Assembled")
            .field("engine", &self.engine)
            .field("registry", &self.registry)
            .finish_non_exhaustive()
    }
}

/// Build the engine: planner tools, confirmation gate, context source, guards.
pub fn assemble(parts: Parts) -> Result<Assembled, RegistryError> {
    let Parts {
        model,
        store,
        mut registry,
        risk,
        engine: options,
        guards,
    } = parts;
    let planner = Arc::new(Planner::new(store.clone()));
    planner::register(
        &mut registry,
        planner.clone(),
        &[planner::PURPOSE, CHAT_PURPOSE, tools::MCP_PURPOSE],
    )?;
    let policy = match risk {
        Some(first) => either_policy(first, planner_policy(planner.clone())),
        None => planner_policy(planner.clone()),
    };
    let gate = Arc::new(
        ConfirmationGate::new(policy.clone(), store.clone()).with_options(guards.confirmation),
    );
    let registry = Arc::new(registry);
    // Once per process, as it starts: caps that parse but leave a door open.
    for warning in guards.budget.warnings() {
        tracing::warn!("{warning}");
    }
    let guard = budget::Guards::standard(budget::StandardGuards {
        ledger: store.clone(),
        config: guards.budget,
        accounts: guards
            .accounts
            .unwrap_or_else(|| Arc::new(budget::StoreAccounts(store.clone()))),
        clock: guards.clock,
        no_model: guards.no_model,
    });
    let engine = Engine::new(model, registry.clone(), store.clone(), options)
        .with_confirmation(gate)
        .with_context(planner_context(planner.clone()))
        // No model call without the cheap guards and the budget (DESIGN.md invariant 9).
        .with_guard(Arc::new(guard));
    Ok(Assembled {
        engine: Arc::new(engine),
        planner: planner.clone(),
        registry,
        policy,
    })
}

/// `first`'s description of a call when it has one, else `then`'s: each policy knows its own
/// tools and lets every other call through.
fn either_policy(first: Arc<dyn RiskPolicy>, then: Arc<dyn RiskPolicy>) -> Arc<dyn RiskPolicy> {
    Arc::new(risk_policy(move |ctx, tool, args| {
        let (first, then) = (first.clone(), then.clone());
        async move {
            match first.assess(&ctx, &tool, &args).await {
                Some(description) => Some(description),
                None => then.assess(&ctx, &tool, &args).await,
            }
        }
    }))
}

/// The planner's risk policy: which calls need the user's yes, described from stored state.
pub fn planner_policy(planner: Arc<Planner>) -> Arc<dyn RiskPolicy> {
    Arc::new(risk_policy(move |ctx, tool, args| {
        let planner = planner.clone();
        async move { planner.assess_risk(&ctx, &tool, &args).await }
    }))
}

/// The per-turn context block's facts: the user's events and the conversation's active event,
/// read fresh for every turn. The account's name and time zone come from the turn's own read
/// of the account (the engine fills them in), not a second read here.
fn planner_context(planner: Arc<Planner>) -> Arc<dyn ContextSource> {
    Arc::new(context_source(move |user, conversation| {
        let planner = planner.clone();
        async move {
            let snapshot = planner
                .snapshot(&user, &conversation)
                .await
                .map_err(|e| e.to_string())?;
            Ok(ContextFacts {
                user_name: None,
                time_zone: None,
                records: Some(snapshot.text),
                active: None,
            })
        }
    }))
}
