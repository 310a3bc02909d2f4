//! Settling a job after its attempt — its claim and its conversation's lease released, the job
//! acknowledged or released with the queue — tried again while the store or the queue is
//! unavailable (a full disk, a moment's outage), for up to [`JobOptions::settle_retry_for`]
//! ([`LOCAL_RETRY_FOR`] in `bridle serve`). The record of a reply a platform took is tried
//! the same way, on a messaging channel until the attempt's deadline (`ChannelJobs::recording`
//! in `deliver.rs`: a turn's closing writes, and each step after a harness reply's send).
//!
//! Given up at once, each of these leaves its record to lapse on its own: a lease within a
//! minute, a claim with the attempt's budget, a delivery with the queue's visibility timeout (15
//! minutes), and every later message of the conversation waits behind it, after the user was
//! told to try again. A few tries keep a short outage of a local disk from becoming that stall;
//! past the window the records lapse as before, which is also what a crash leaves. Off by
//! default: the worker Lambda's AWS clients retry on their own, and SQS redelivers.
//!
//! [`JobOptions::settle_retry_for`]: crate::JobOptions::settle_retry_for

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// How long `bridle serve` tries a settling write again while its database is unavailable.
pub const LOCAL_RETRY_FOR: Duration = Duration::from_secs(15);

/// The first wait before trying again; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(100);
const MAX_WAIT: Duration = Duration::from_secs(5);

/// Run `op`; while it fails with an error `transient` accepts, try again after a growing wait,
/// until `retry_for` has passed (zero: once). The first failure is logged with its cause (`what`
/// names the write), and a success after failures too, so an operator sees both ends.
pub async fn retried<T, E, Fut>(
    what: &'static str,
    retry_for: Duration,
    transient: impl Fn(&E) -> bool,
    mut op: impl FnMut() -> Fut,
) -> Result<T, E>
where
    E: Display,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let mut wait = FIRST_WAIT;
    let mut tries = 1u32;
    loop {
        match op().await {
            Ok(done) => {
                if tries > 1 {
                    tracing::info!(what, tries, "settled once the storage was back");
                }
                return Ok(done);
            }
            Err(e) if transient(&e) && started.elapsed() + wait <= retry_for => {
                if tries == 1 {
                    tracing::warn!(what, error = %e, "storage unavailable while settling a job; trying again");
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(MAX_WAIT);
                tries += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a store error may pass if tried again.
pub fn store_transient(e: &store::StoreError) -> bool {
    matches!(e, store::StoreError::Unavailable(_))
}

/// Whether a queue error may pass if tried again.
pub fn queue_transient(e: &queue::QueueError) -> bool {
    matches!(e, queue::QueueError::Unavailable(_))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_tried_again_until_it_passes() {
        let tries = Cell::new(0);
        let started = Instant::now();
        let out: Result<u32, String> = retried(
            "test",
            LOCAL_RETRY_FOR,
            |_| true,
            || {
                tries.set(tries.get() + 1);
                let n = tries.get();
                async move { if n < 4 { Err("full".to_owned()) } else { Ok(n) } }
            },
        )
        .await;
        assert_eq!(out, Ok(4));
        // 100 + 200 + 400 ms of waiting before the fourth try.
        assert_eq!(started.elapsed(), Duration::from_millis(700));
    }

    /// `retried` over a write that always fails with `error`: its outcome, how many times it
    /// was tried, and how long it took (on the paused clock).
    async fn always_failing(
        error: &str,
        window: Duration,
        transient: impl Fn(&String) -> bool,
    ) -> (Result<(), String>, u32, Duration) {
        let tries = Cell::new(0u32);
        let started = Instant::now();
        let out = retried("test", window, transient, || {
            tries.set(tries.get() + 1);
            let error = error.to_owned();
            async move { Err(error) }
        })
        .await;
        (out, tries.get(), started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_that_lasts_is_given_up_within_the_window() {
        let (out, tries, took) = always_failing("still full", LOCAL_RETRY_FOR, |_| true).await;
        assert_eq!(out, Err("still full".to_owned()));
        assert!(took <= LOCAL_RETRY_FOR, "{took:?}");
        // Tries at 0, 0.1, 0.3, 0.7, 1.5, 3.1, 6.3 and 11.3 s: the next 5 s wait would pass
        // the window.
        assert_eq!(tries, 8);
        assert_eq!(took, Duration::from_millis(11_300));
    }

    #[tokio::test(start_paused = true)]
    async fn a_failure_that_retrying_cannot_mend_is_returned_at_once() {
        let (out, tries, _) =
            always_failing("stale receipt", LOCAL_RETRY_FOR, |e| e != "stale receipt").await;
        assert_eq!(out, Err("stale receipt".to_owned()));
        assert_eq!(tries, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_window_it_is_tried_once() {
        let (out, tries, _) = always_failing("full", Duration::ZERO, |_| true).await;
        assert_eq!(out, Err("full".to_owned()));
        assert_eq!(tries, 1);
    }
}
