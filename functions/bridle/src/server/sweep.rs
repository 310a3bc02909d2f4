//! Deleting what is past its date (an unknown sender's lobby, `store::Retention`): once when
//! the server starts, then every [`SWEEP_EVERY`], until it stops. SQLite deletes here; on
//! DynamoDB (the web function's store) TTL deletes and the sweep finds nothing to do.

use budget::Clock;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;

/// How often the server sweeps.
pub const SWEEP_EVERY: Duration = Duration::from_secs(3600);

/// Sweep now, then every `every`, until `stop` turns true (or its sender goes).
pub fn spawn_sweep(
    store: Arc<dyn Store>,
    clock: Clock,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    sweep_once(store.as_ref(), clock()).await;
                }
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return;
                    }
                }
            }
        }
    })
}

/// One sweep; a failure is logged and the next sweep tries again. Answers how many
/// conversations went.
pub async fn sweep_once(store: &dyn Store, now_ms: i64) -> u64 {
    match store.sweep_expired(now_ms).await {
        Ok(0) => 0,
        Ok(gone) => {
            tracing::info!(
                conversations = gone,
                "deleted unknown senders' conversations past their retention"
            );
            gone
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not delete expired conversations; trying again at the next sweep");
            0
        }
    }
}
