//! Where the scheduler runs: on a blocking thread (its work is bounded, `schedule::WORK_LIMIT`:
//! a few seconds at most, but all CPU with no await in it, so on an async thread it would stall
//! every other request that thread serves), and at most one plan per core at once across the
//! process. Tokio's blocking pool has hundreds of threads: without the bound, every turn and
//! MCP token that asks for a plan at the same moment (a build, a move's dry run) would get a
//! thread, and twenty plans on two cores would starve the server's own work for a minute. A
//! plan past the bound waits its turn; its permit is held by the thread, so a caller that gives
//! up waiting (a tool's deadline) frees no core that is still busy.

use std::sync::{Arc, OnceLock};
use tokio::sync::Semaphore;

/// At most this many plans run at once: the cores the process may use.
pub fn plans_at_once() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

fn permits() -> Arc<Semaphore> {
    static PLANS: OnceLock<Arc<Semaphore>> = OnceLock::new();
    PLANS
        .get_or_init(|| Arc::new(Semaphore::new(plans_at_once())))
        .clone()
}

/// `work` on a blocking thread once one of the [`plans_at_once`] places is free. A panic in it
/// goes on as the caller's own, for the tool runner to report.
pub async fn on_a_plan_thread<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let permit = permits()
        .acquire_owned()
        .await
        .expect("the plan semaphore is never closed");
    tokio::task::spawn_blocking(move || {
        let _place = permit;
        work()
    })
    .await
    .unwrap_or_else(|err| std::panic::resume_unwind(err.into_panic()))
}
