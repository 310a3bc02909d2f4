//! What stands in front of every model call of the local server: the cheap guards and the
//! budget (see the `budget` crate), and the settings they run on.

use budget::{AccountStatus, BudgetConfig, Clock, system_clock};
use std::sync::Arc;

/// The guards' settings for [`build_app`](crate::build_app).
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
}

impl Default for GuardOptions {
    fn default() -> Self {
        Self {
            budget: Arc::new(BudgetConfig::default()),
            accounts: None,
            clock: system_clock(),
            no_model: None,
        }
    }
}

impl std::fmt::Debug for GuardOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardOptions")
            .field("budget", &self.budget)
            .field("no_model", &self.no_model.is_some())
            .finish_non_exhaustive()
    }
}
