//! The worker function: an SQS FIFO batch in, a partial-batch response out.
//!
//! - **In order**: records are handled one after another, as delivered. Once a record of a
//!   conversation fails, the later records of that conversation in the batch are reported failed
//!   too (without running), so SQS redelivers them in order; other conversations carry on. (A
//!   record given up on its last receive holds nothing back: see below.)
//! - **Idempotent per job**: a claim record (one conditional write) guards each job. A job whose
//!   claim is done is skipped; a live claim means another worker has it; an expired claim (the
//!   Lambda died) is taken over, and the engine resumes from the stored transcript.
//! - **Identity from the sender**: link codes, onboarding and the turn as the bound user, in
//!   [`channel_jobs`] (the same code `bridle serve` runs).
//! - **Backoff, not a stall**: a failed record is made visible again after a short backoff
//!   (`ChangeMessageVisibility`, [`retry`]), not the queue's visibility timeout; its claim was
//!   released by the job path, so the redelivery takes the job over at once and resumes it.
//!   A claim still held (its release failed, or another attempt has it) holds the record back
//!   until the claim lapses, so it does not spend its receives on finding the job busy.
//! - **Bounded**: each turn gets a deadline below the function's remaining time; a turn that
//!   runs out is reported failed and its claim expires, so the redelivery resumes it.
//! - **Nobody left unanswered**: on its last receive (`maxReceiveCount`) a record goes to the
//!   dead letters next if it fails, so it is given up first — the user told, its turn closed —
//!   whether it ran and failed or did not run at all (no time left, or held behind an earlier
//!   record; then under its claim, so not while another attempt runs it, and within the time
//!   left less a reserve for answering the batch). A record given up does not hold its
//!   conversation's later records back: they run. A job another attempt holds is never given
//!   up.
//!
//! [`Worker::handle_batch`] takes its dependencies as arguments (ports), so tests run it on
//! SQLite and the scripted model, and end to end on moto and the fake Bedrock.

pub mod config;
pub mod http;
mod job;
pub mod media;
mod retry;

pub use channel_jobs::{ChannelJobs, JobOptions, JobOutcome};

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use std::collections::HashSet;
use std::time::Duration;
use tokio::time::Instant;

/// The worker's knobs besides the jobs' own ([`JobOptions`]).
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Longest a single turn may run, whatever time the function has left.
    pub max_turn: Duration,
    /// Kept back from the function's remaining time for bookkeeping after the last turn.
    pub safety_margin: Duration,
    /// The queue's `maxReceiveCount` (5 in the templates): a job failing on that receive goes
    /// to the dead-letter queue, so the user is told and the turn closed first.
    pub max_receives: u32,
    /// The client that sets a failed record's backoff on its queue (named by the record's
    /// `eventSourceARN`). `None`: a failed record comes back after the queue's visibility
    /// timeout.
    pub sqs: Option<aws_sdk_sqs::Client>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            max_turn: Duration::from_secs(10 * 60),
            safety_margin: Duration::from_secs(5),
            max_receives: 5,
            sqs: None,
        }
    }
}

/// Everything a batch needs, built once per cold start.
#[derive(Debug)]
pub struct Worker {
    /// Claim → identity → turn → deliver → record, shared with `bridle serve`.
    pub jobs: ChannelJobs,
    pub options: WorkerOptions,
}

impl Worker {
    /// Run a batch; `deadline` is when the function will be stopped.
    pub async fn handle_batch(&self, event: SqsEvent, deadline: Instant) -> SqsBatchResponse {
        let mut failed_groups: HashSet<String> = HashSet::new();
        let mut failures = Vec::new();
        for record in event.records {
            let id = record.message_id.clone().unwrap_or_default();
            let group = record
                .attributes
                .get("MessageGroupId")
                .cloned()
                .unwrap_or_default();
            // A failed conversation's later records did not run: visible again at once, SQS
            // keeps them behind the failed one, which is in flight for its backoff.
            let last = retry::receive_count(&record) >= self.options.max_receives;
            let (outcome, delay) = if failed_groups.contains(&group) {
                (
                    JobOutcome::Failed(channel_jobs::JobError::EarlierFailed),
                    Duration::ZERO,
                )
            } else {
                let (outcome, claim_lapses_in) = self.run_record(&record, deadline).await;
                // A platform that asked for a wait (a rate limit) is not asked again sooner.
                let asked = match &outcome {
                    JobOutcome::Failed(why) => why.retry_after(),
                    _ => None,
                };
                (
                    outcome,
                    self.retry_delay(&record, claim_lapses_in.max(asked)),
                )
            };
            match &outcome {
                JobOutcome::Failed(why) => {
                    tracing::warn!(message_id = %id, %group, reason = %why, ?delay, "job failed; SQS will redeliver it");
                    if last
                        && matches!(
                            why,
                            channel_jobs::JobError::EarlierFailed | channel_jobs::JobError::NoTime
                        )
                    {
                        self.give_up_unrun(&record, why, deadline).await;
                    }
                    self.redeliver_after(&record, delay).await;
                    // Given up on its last receive, it goes to the dead letters: nothing of
                    // its conversation need wait behind it. (One another attempt holds is
                    // not given up: it is still running.)
                    let given_up = last && why != &channel_jobs::JobError::Busy;
                    if !given_up {
                        failed_groups.insert(group);
                    }
                    let mut failure = BatchItemFailure::default();
                    failure.item_identifier = id;
                    failures.push(failure);
                }
                other => tracing::info!(message_id = %id, outcome = ?other, "job handled"),
            }
        }
        let mut response = SqsBatchResponse::default();
        response.batch_item_failures = failures;
        response
    }
}
