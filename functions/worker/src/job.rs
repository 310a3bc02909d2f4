//! One record: decode, then the shared channel job within this invocation's time.

use crate::{JobOutcome, Worker};
use aws_lambda_events::sqs::SqsMessage;
use channel_jobs::JobError;
use engine::NullSink;
use std::time::Duration;
use tokio::time::Instant;

/// Kept back from the function's deadline by a give-up of a record that did not run: the batch
/// must still be answered (and each failed record's visibility set) before Lambda stops the
/// function, or every record of it waits out the queue's whole visibility timeout.
pub(crate) const GIVE_UP_RESERVE: Duration = Duration::from_secs(2);

impl Worker {
    /// A record that did not run (`why`: no time was left, or an earlier record of its
    /// conversation held it back) on its last receive: SQS dead-letters it next, so it is given
    /// up as a job that failed every attempt is — the user told, its turn closed — within the
    /// time the function has, less [`GIVE_UP_RESERVE`] for answering the batch.
    pub(crate) async fn give_up_unrun(
        &self,
        record: &SqsMessage,
        why: &JobError,
        deadline: Instant,
    ) {
        let by = deadline.checked_sub(GIVE_UP_RESERVE).unwrap_or(deadline);
        let Ok(job) = queue_sqs::decode_job(record.body.as_deref().unwrap_or_default()) else {
            return;
        };
        tracing::error!(job = %job.dedupe_key(), conversation = %job.conversation_key, channel = %job.channel, cause = %why, "job did not run by its last receive: SQS moves it to the dead-letter queue");
        self.jobs.options.metrics.job_given_up(&job.channel);
        if by <= Instant::now() {
            tracing::error!(job = %job.dedupe_key(), "no time left to tell the user their message was given up");
            return;
        }
        let given_up = async {
            // Its claim first, as a run would: a copy of the job another attempt is running
            // (or has answered) is not given up under it. Released after, which leaves alone
            // the done mark a give-up that told its user of a stored turn writes
            // (`give_up_for_good`); any other dead letter can still be sent again and run.
            let key = job.dedupe_key();
            let now = (self.jobs.options.clock)();
            // Held as long as the give-up may take, and a little more.
            let hold = by.saturating_duration_since(Instant::now()) + Duration::from_secs(30);
            let until = now + hold.as_millis() as i64;
            let attempt = match self.jobs.store.claim_job(&key, now, until).await? {
                store::Claim::Fresh => 1,
                store::Claim::TakenOver { attempt } => attempt,
                store::Claim::Busy { .. } | store::Claim::Done => {
                    tracing::info!(job = %key, "held or answered by another attempt: not given up here");
                    return Ok(());
                }
            };
            let told = self.jobs.give_up_for_good(&job).await;
            let now = (self.jobs.options.clock)();
            if let Err(e) = self.jobs.store.release_job(&key, attempt, now, None).await {
                tracing::warn!(job = %key, error = %e, "could not release the given-up job's claim; it lapses");
            }
            told.map(|_| ())
        };
        match tokio::time::timeout_at(by, given_up).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::error!(job = %job.dedupe_key(), error = %e, "could not close the given-up turn");
            }
            Err(_) => {
                tracing::error!(job = %job.dedupe_key(), "no time left to tell the user their message was given up");
            }
        }
    }

    /// The record's outcome, and how long until a claim still held on its job lapses (see
    /// [`channel_jobs::Ran::claim_held_until`]).
    pub(crate) async fn run_record(
        &self,
        record: &SqsMessage,
        deadline: Instant,
    ) -> (JobOutcome, Option<Duration>) {
        let body = record.body.as_deref().unwrap_or_default();
        let job = match queue_sqs::decode_job(body) {
            Ok(job) => job,
            Err(e) => {
                tracing::error!(error = %e, "undecodable job; it will reach the dead-letter queue");
                return (JobOutcome::Failed(JobError::Undecodable), None);
            }
        };
        let left = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(self.options.safety_margin);
        let budget = left.min(self.options.max_turn);
        if budget.is_zero() {
            return (JobOutcome::Failed(JobError::NoTime), None);
        }
        let ran = self.jobs.run_streamed(&job, budget, &NullSink).await;
        let claim_lapses_in = ran.claim_lapses_in((self.jobs.options.clock)());
        let outcome = ran.outcome;
        // A job another attempt holds (`Busy`) is that attempt's to finish: giving it up here
        // would close its turn while it runs.
        if let JobOutcome::Failed(why) = &outcome
            && why != &JobError::Busy
        {
            let receives = crate::retry::receive_count(record);
            if receives >= self.options.max_receives {
                tracing::error!(job = %job.dedupe_key(), conversation = %job.conversation_key, channel = %job.channel, cause = %why, receives, "job failed on its last attempt: SQS moves it to the dead-letter queue");
                self.jobs.options.metrics.job_given_up(&job.channel);
                // Within the function's time, less the batch answer's reserve, as an unrun
                // record's give-up: a slow platform or table past it would have Lambda end the
                // function and lose the whole batch's answer (every record in it received again
                // after the visibility timeout).
                let by = deadline.checked_sub(GIVE_UP_RESERVE).unwrap_or(deadline);
                match tokio::time::timeout_at(by, self.jobs.give_up_for_good(&job)).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::error!(job = %job.dedupe_key(), error = %e, "could not close the given-up turn");
                    }
                    Err(_) => {
                        tracing::error!(job = %job.dedupe_key(), "no time left to tell the user their message was given up");
                    }
                }
            }
        }
        (outcome, claim_lapses_in)
    }
}
