//! The local worker: takes turn jobs off the embedded queue and runs them, one conversation at a
//! time (the queue delivers at most one job per conversation) and several conversations at once.
//! Web chat jobs stream their turn to the waiting request; messaging-channel jobs run through
//! [`ChannelJobs`], the same code as the worker Lambda (claim, identity, turn, deliver, record).

use crate::hub::Hub;
use channel_jobs::{ChannelJobs, JobOutcome};
use engine::{Engine, EngineError, EventSink, TurnEnd, TurnEvent, TurnInput, lines};
use futures::FutureExt;
use queue::{Delivery, JobQueue, TurnJob};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tools::ActionId;

/// How long one receive waits for work before checking for shutdown.
const POLL: Duration = Duration::from_millis(500);

/// Longest a channel job may run before it is released for another try.
const CHANNEL_JOB_BUDGET: Duration = Duration::from_secs(10 * 60);

/// The channel name of web chat jobs.
const WEB: &str = "web";

/// Runs turn jobs from a queue.
pub struct Worker {
    pub queue: Arc<dyn JobQueue>,
    pub store: Arc<dyn Store>,
    pub engine: Arc<Engine>,
    pub hub: Arc<Hub>,
    pub channels: Arc<ChannelJobs>,
    pub max_concurrent: usize,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("max_concurrent", &self.max_concurrent)
            .finish_non_exhaustive()
    }
}

/// What became of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handled {
    Done,
    Retry,
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

    async fn handle(&self, delivery: Delivery) {
        if delivery.job.channel != WEB {
            return self.handle_channel_job(delivery).await;
        }
        let key = delivery.job.dedupe_key();
        let sink = self.hub.sink(&key);
        let outcome = AssertUnwindSafe(self.process(&delivery.job, &sink))
            .catch_unwind()
            .await;
        let handled = match outcome {
            Ok(Ok(())) => Handled::Done,
            Ok(Err(err)) => {
                tracing::error!(error = %err, source = ?std::error::Error::source(&err), job = %key, receive_count = delivery.receive_count, "turn failed; the job will be retried");
                Handled::Retry
            }
            Err(_) => {
                tracing::error!(job = %key, receive_count = delivery.receive_count, "turn panicked; the job will be retried");
                Handled::Retry
            }
        };
        if handled == Handled::Retry {
            sink.emit(TurnEvent::Error {
                message: lines::BACKEND_FAILED.to_owned(),
            });
            sink.emit(TurnEvent::Done {
                end: TurnEnd::BackendFailed,
            });
        }
        self.hub.forget(&key);
        let settled = match handled {
            Handled::Done => self.queue.ack(&delivery.receipt).await,
            Handled::Retry => self.queue.release(&delivery.receipt).await,
        };
        if let Err(err) = settled {
            tracing::warn!(error = %err, job = %key, "could not settle the job with the queue");
        }
    }

    async fn handle_channel_job(&self, delivery: Delivery) {
        let key = delivery.job.dedupe_key();
        let outcome = AssertUnwindSafe(self.channels.run(&delivery.job, CHANNEL_JOB_BUDGET))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| JobOutcome::Failed("the job panicked".into()));
        let settled = match &outcome {
            JobOutcome::Failed(why) => {
                tracing::warn!(job = %key, reason = %why, receive_count = delivery.receive_count, "channel job failed; it will be retried");
                self.queue.release(&delivery.receipt).await
            }
            other => {
                tracing::info!(job = %key, outcome = ?other, "channel job handled");
                self.queue.ack(&delivery.receipt).await
            }
        };
        if let Err(err) = settled {
            tracing::warn!(error = %err, job = %key, "could not settle the job with the queue");
        }
    }

    async fn process(&self, job: &TurnJob, sink: &dyn EventSink) -> Result<(), EngineError> {
        let id = transcript::ConversationId(job.conversation_key.clone());
        let Some(conversation) = self.store.conversation(&id).await? else {
            tracing::warn!(conversation = %id, "job for an unknown conversation dropped");
            return Ok(());
        };
        if conversation.user_id.0 != job.external_user_id || conversation.channel != job.channel {
            tracing::warn!(conversation = %id, "job whose sender does not own the conversation dropped");
            return Ok(());
        }
        let input = TurnInput {
            conversation_id: id,
            text: job.text.clone(),
            action_id: ActionId(job.dedupe_key()),
            attachments: Vec::new(),
            attachment_notes: Vec::new(),
        };
        self.engine.run_turn(input, sink).await.map(|_| ())
    }
}
