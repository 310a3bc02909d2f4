//! Denial-of-wallet budgets and the cheap guards that stand in front of every model call.
//!
//! - [`prices`]: what a model costs per million tokens (input, output, cache read, cache write),
//!   compiled-in defaults (`prices.json`) merged with an operator file (`BRIDLE_PRICES_FILE`);
//!   every price says where it came from. Money is integer micro-dollars ([`money`]).
//! - [`config`]: the caps, the output allowance and its floor, from the environment, each with its source.
//! - [`Bucket`]: the counters (user tokens per minute and per hour, user dollars per 30 days,
//!   global dollars per 30 days, conversation messages per hour, conversation dollars) as fixed
//!   windows aligned to the Unix epoch.
//! - [`BudgetGuard`]: gives each call the output allowance the caps can pay for (its request's
//!   `max_tokens` is lowered to it), reserves that worst case before the call on the store's
//!   [`BudgetLedger`](store::BudgetLedger) (all buckets or none), settles with the real usage
//!   after it; a tripped bucket is a friendly sentence and no model call. Its doc states the
//!   bound on overshoot.
//! - Cheap guards: [`ConversationRate`], [`PausedAccounts`] (over the [`AccountStatus`] port),
//!   [`NoModel`]; [`Guards`] chains them.
//! - [`RequestRate`]: requests per user per minute at an entrance (MCP, the web app's writes),
//!   counted in the same ledger.
//! - [`Meter`] (each bucket's fill for a user) and [`report`] (the finance report, rendered as a
//!   table, JSON or CSV, and as an SVG chart).
//!
//! Depends on the store, backend and engine ports and `transcript`; never on an adapter, AWS or
//! Lambda.

mod accounts;
mod bucket;
mod chain;
mod clock;
pub mod config;
mod error;
mod estimate;
mod guard;
pub mod lines;
mod meter;
pub mod money;
mod no_model;
pub mod prices;
mod rate;
pub mod report;
mod requests;
mod room;
mod running;

pub use accounts::{AccountStatus, InMemoryAccounts, PausedAccounts, StoreAccounts};
pub use bucket::{Bucket, Unit};
pub use chain::{Guards, StandardGuards};
pub use clock::{Clock, system_clock};
pub use config::{BudgetConfig, Cap, Source};
pub use error::BudgetError;
pub use estimate::{estimate_input_tokens, estimate_output_tokens};
pub use guard::BudgetGuard;
pub use meter::{Fill, Meter};
pub use no_model::NoModel;
pub use prices::{Price, PriceTable};
pub use rate::ConversationRate;
pub use requests::{RequestCount, RequestRate};
pub use running::RunningEstimate;
