//! Where the scheduler runs: on a blocking thread (its work is bounded, `schedule::WORK_LIMIT`:
//! a few seconds at most, but all CPU with no await in it, so on an async thread it would stall
//! every other request that thread serves), and at most [`plans_at_once`] plans at once across
//! the process: one core is left to serving. Tokio's blocking pool has hundreds of threads:
//! without the bound, every turn and MCP token that asks for a plan at the same moment (a
//! build, a move's dry run when its risk is judged) would get a thread, and twenty plans on two
//! cores would starve the server's own work for a minute. A plan past the bound waits its turn,
//! at most [`PLAN_WAIT`]; its place is held by the thread, so a caller that gives up waiting
//! (a tool's deadline) frees no core that is still busy.
//!
//! One owner's plans run one at a time, and wait for a place one at a time: places go in the
//! order asked (Tokio's semaphore is fair), so an owner who asks for many at once (twenty MCP
//! tokens, each looping builds of a hard program: no model budget is spent on them) is one in
//! the queue, not twenty, and everyone else's plan waits for at most one of theirs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

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

/// Each owner's one turn at asking for a place: a semaphore of one per owner with a plan
/// running or waiting, removed when the last turn taken ends (a waiter that gave up drops its
/// clone outside the lock, and may leave its owner's entry behind: reused by the owner's next
/// plan, it costs a map entry).
fn owners() -> &'static Mutex<HashMap<String, Arc<Semaphore>>> {
    static OWNERS: OnceLock<Mutex<HashMap<String, Arc<Semaphore>>>> = OnceLock::new();
    OWNERS.get_or_init(Default::default)
}

/// An owner's turn, held while its plan waits and runs.
struct OwnersTurn {
    owner: String,
    turn: Option<(Arc<Semaphore>, OwnedSemaphorePermit)>,
}

impl OwnersTurn {
    async fn take(owner: &str) -> Self {
        let semaphore = {
            let mut owners = owners().lock().unwrap_or_else(|e| e.into_inner());
            owners
                .entry(owner.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(1)))
                .clone()
        };
        let permit = semaphore.clone().acquire_owned().await;
        Self {
            owner: owner.to_owned(),
            turn: Some((
                semaphore,
                permit.expect("an owner's semaphore is never closed"),
            )),
        }
    }
}

impl Drop for OwnersTurn {
    fn drop(&mut self) {
        let mut owners = owners().lock().unwrap_or_else(|e| e.into_inner());
        drop(self.turn.take());
        if owners
            .get(&self.owner)
            .is_some_and(|s| Arc::strong_count(s) == 1)
        {
            owners.remove(&self.owner);
        }
    }
}

/// `work` on a blocking thread once `owner` (the user whose plan it is) has no other plan
/// running or waiting and one of the [`plans_at_once`] places is free, waiting at most
/// [`PLAN_WAIT`] for both. A panic in it goes on as the caller's own, for the tool runner to
/// report.
pub async fn on_a_plan_thread<T: Send + 'static>(
    owner: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, PlansBusy> {
    let waited = tokio::time::timeout(PLAN_WAIT, async {
        let turn = OwnersTurn::take(owner).await;
        let place = places().acquire_owned().await;
        (turn, place.expect("the plan semaphore is never closed"))
    })
    .await;
    let Ok((turn, place)) = waited else {
        tracing::warn!(wait = ?PLAN_WAIT, "no place for a plan came free; refused");
        return Err(PlansBusy);
    };
    let done = tokio::task::spawn_blocking(move || {
        let _held = (turn, place);
        work()
    })
    .await
    .unwrap_or_else(|err| std::panic::resume_unwind(err.into_panic()));
    Ok(done)
}
