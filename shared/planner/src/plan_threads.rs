//! Where the scheduler runs: on a blocking thread (its work is bounded, `schedule::WORK_LIMIT`:
//! a few seconds at most, but all CPU with no await in it, so on an async thread it would stall
//! every other request that thread serves), and at most [`plans_at_once`] plans at once across
//! the process: one core is left to serving. Tokio's blocking pool has hundreds of threads:
//! without the bound, every turn and MCP token that asks for a plan at the same moment (a
//! build, a move's dry run when its risk is judged) would get a thread, and twenty plans on two
//! cores would starve the server's own work for a minute. A plan past the bound waits its turn,
//! at most [`PLAN_WAIT`]; its place is held by the thread, so a caller that gives up waiting
//! (a tool's deadline) frees no core that is still busy.

use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long a plan waits for a place before it is refused ([`PlansBusy`]): well inside the
/// tool runner's 30 s, and short enough that a judgement waiting for its dry run, then the
/// call's run, stay within the turn an MCP token's change holds (45 s).
pub const PLAN_WAIT: Duration = Duration::from_secs(10);

/// No place for a plan came free within [`PLAN_WAIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlansBusy;

/// At most this many plans run at once: the cores the process may use, less one left to
/// serving (one on a machine of one or two).
pub fn plans_at_once() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    cores.saturating_sub(1).max(1)
}

fn places() -> Arc<Semaphore> {
    static PLANS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    PLANS
        .get_or_init(|| Arc::new(Semaphore::new(plans_at_once())))
        .clone()
}

/// `work` on a blocking thread once one of the [`plans_at_once`] places is free, waiting at
/// most [`PLAN_WAIT`]. A panic in it goes on as the caller's own, for the tool runner to report.
pub async fn on_a_plan_thread<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, PlansBusy> {
    let place = match tokio::time::timeout(PLAN_WAIT, places().acquire_owned()).await {
        Ok(place) => place.expect("the plan semaphore is never closed"),
        Err(_) => {
            tracing::warn!(wait = ?PLAN_WAIT, "no place for a plan came free; refused");
            return Err(PlansBusy);
        }
    };
    let done = tokio::task::spawn_blocking(move || {
        let _place = place;
        work()
    })
    .await
    .unwrap_or_else(|err| std::panic::resume_unwind(err.into_panic()));
    Ok(done)
}
