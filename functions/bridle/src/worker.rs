//! The local worker: takes turn jobs off the embedded queue and runs them, one conversation at a
//! time (the queue delivers at most one job per conversation) and several conversations at once.
//! Every job — web chat and messaging channel alike — runs through [`ChannelJobs`], the same job
//! path as the worker Lambda (claim, identity, turn, deliver, record); a web job's sender is the
//! browser stream, to which its turn's events go as they happen.

use crate::hub::Hub;
use channel_jobs::settle::{queue_transient, retried};
use channel_jobs::web::WEB_CHANNEL;
use channel_jobs::{ChannelJobs, JobError, JobOutcome};
use engine::{EventSink, NullSink, TurnEnd, TurnEvent, lines};
use futures::FutureExt;
use queue::{Delivery, JobQueue};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// How long one receive waits for work before checking for shutdown.
const POLL: Duration = Duration::from_millis(500);

/// A uniform number in `0.0..=1.0` for the retry backoff's jitter.
fn jitter() -> f64 {
    let mut b = [0u8; 4];
    match getrandom::fill(&mut b) {
        Ok(()) => f64::from(u32::from_le_bytes(b)) / f64::from(u32::MAX),
        Err(_) => 0.5,
    }
}

/// Runs turn jobs from a queue.
pub struct Worker {
    pub queue: Arc<dyn JobQueue>,
    pub hub: Arc<Hub>,
    /// The one job path.
    pub jobs: Arc<ChannelJobs>,
    /// Deliveries after which a failing job goes to the dead letters (the queue's setting).
    pub max_receives: u32,
    pub max_concurrent: usize,
    /// Longest one attempt of a job may run before it is cut off.
    pub job_budget: Duration,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("max_concurrent", &self.max_concurrent)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// Receive and run jobs until `shutdown` turns true; then wait for running turns to finish.
    pub async fn run(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let permits = Arc::new(Semaphore::new(self.max_concurrent.max(1)));
        let mut running = JoinSet::new();
        while !*shutdown.borrow() {
            let first = tokio::select! {
                p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                _ = shutdown.changed() => break,
            };
            let room = 1 + permits.available_permits();
            let deliveries = tokio::select! {
                r = self.queue.receive(room, POLL) => r,
                _ = shutdown.changed() => break,
            };
            let deliveries = match deliveries {
                Ok(d) => d,
                Err(err) => {
                    tracing::error!(error = %err, "queue receive failed; backing off");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut first = Some(first);
            for delivery in deliveries {
                let permit = match first.take() {
                    Some(p) => p,
                    None => permits
                        .clone()
                        .try_acquire_owned()
                        .expect("receive asked for no more than the free permits"),
                };
                let me = self.clone();
                running.spawn(async move {
                    me.handle(delivery).await;
                    drop(permit);
                });
            }
            while running.try_join_next().is_some() {}
        }
        while running.join_next().await.is_some() {}
    }

    /// One job through the one job path. A web job's events stream to the browser request
    /// waiting for them; a channel job's reply goes out through its platform.
    async fn handle(&self, delivery: Delivery) {
        let key = delivery.job.dedupe_key();
        let web = (delivery.job.channel == WEB_CHANNEL).then(|| self.hub.sink(&key));
        let sink: &dyn EventSink = match &web {
            Some(sink) => sink,
            None => &NullSink,
        };
        let clock = &self.jobs.options.clock;
        let (outcome, claim_lapses_in) =
            AssertUnwindSafe(self.jobs.run_streamed(&delivery.job, self.job_budget, sink))
                .catch_unwind()
                .await
                .map(|ran| {
                    let lapses_in = ran.claim_lapses_in(clock());
                    (ran.outcome, lapses_in)
                })
                .unwrap_or_else(|_| (JobOutcome::Failed(JobError::Panicked), None));
        if outcome == JobOutcome::Failed(JobError::CutShort) {
            // Cut short by a stop past its grace period: lease and claim are released; the job
            // is visible again, this delivery not counted, and the next start resumes it. A
            // waiting browser stream is told by the server's drain.
            tracing::warn!(job = %key, "turn cut short by the stop; it resumes at the next start");
            if let Err(err) = self.queue.put_back(&delivery.receipt).await {
                tracing::warn!(error = %err, job = %key, "could not put the job back in the queue");
            }
            return;
        }
        let last_attempt = delivery.receive_count >= self.max_receives;
        // A job another attempt holds (`Busy`) is that attempt's to finish: giving it up here
        // would close its turn while it runs.
        if let (JobOutcome::Failed(why), true) = (&outcome, last_attempt)
            && why != &JobError::Busy
        {
            tracing::error!(job = %key, conversation = %delivery.job.conversation_key, channel = %delivery.job.channel, cause = %why, receive_count = delivery.receive_count, "job failed on its last attempt: it goes to the dead letters (bridle jobs dead; bridle jobs retry)");
            self.jobs
                .options
                .metrics
                .job_given_up(&delivery.job.channel);
            if let Err(e) = self.jobs.give_up_for_good(&delivery.job).await {
                tracing::error!(job = %key, error = %e, "could not close the given-up turn");
            }
        }
        if let Some(sink) = &web {
            if let JobOutcome::Failed(why) = &outcome {
                // The browser gets a calm sentence now. Before the last attempt a retry resumes
                // and records the turn by itself, so the user is not asked to send it again
                // (a second copy would be answered twice); `retrying` tells the page to look
                // for the recorded answer.
                let (message, end) = if last_attempt && why != &JobError::Busy {
                    (lines::GAVE_UP, TurnEnd::BackendFailed)
                } else {
                    (lines::RETRYING, TurnEnd::Retrying)
                };
                sink.emit(TurnEvent::Error {
                    message: message.to_owned(),
                });
                sink.emit(TurnEvent::Done { end });
            }
            // Ends the browser's stream whatever happened (a skipped job has no events).
            self.hub.forget(&key);
        }
        let retry_for = self.jobs.options.settle_retry_for;
        let settled = match &outcome {
            JobOutcome::Failed(why) if why != &JobError::Busy && claim_lapses_in.is_some() => {
                // This attempt's own claim could not be released. Released now, the job would
                // come back to it, find it busy and spend its deliveries on that until the dead
                // letters; left in flight, it comes back after the visibility timeout, when the
                // claim has expired, or at once after a restart (which releases the claims of
                // the jobs in flight).
                tracing::warn!(job = %key, reason = %why, "job failed and its claim is still held; it is retried once both have lapsed");
                return;
            }
            JobOutcome::Failed(why) => {
                // After the last attempt there is nothing to wait for: the queue moves the job
                // to the dead letters when it next looks. A job another attempt holds comes
                // back once that claim has lapsed, not to find it busy again.
                let backoff = if last_attempt {
                    Duration::ZERO
                } else {
                    // Not before the claim lapses, nor before a platform's asked-for wait.
                    queue::retry_backoff(delivery.receive_count, queue::MAX_RETRY_BACKOFF, jitter())
                        .max(claim_lapses_in.max(why.retry_after()).unwrap_or_default())
                };
                tracing::warn!(job = %key, reason = %why, receive_count = delivery.receive_count, ?backoff, "job failed; it will be retried");
                retried("the job's release", retry_for, queue_transient, || {
                    self.queue.release_after(&delivery.receipt, backoff)
                })
                .await
            }
            other => {
                tracing::info!(job = %key, outcome = ?other, "job handled");
                retried(
                    "the job's acknowledgement",
                    retry_for,
                    queue_transient,
                    || self.queue.ack(&delivery.receipt),
                )
                .await
            }
        };
        if let Err(err) = settled {
            tracing::warn!(error = %err, job = %key, "could not settle the job with the queue");
        }
    }
}
