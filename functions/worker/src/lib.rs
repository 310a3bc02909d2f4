//! The worker function: an SQS FIFO batch in, a partial-batch response out.
//!
//! - **In order**: records are handled one after another, as delivered. Once a record of a
//!   conversation fails, the later records of that conversation in the batch are reported failed
//!   too (without running), so SQS redelivers them in order; other conversations carry on.
//! - **Idempotent per job**: a claim record (one conditional write) guards each job. A job whose
//!   claim is done is skipped; a live claim means another worker has it; an expired claim (the
//!   Lambda died) is taken over, and the engine resumes from the stored transcript.
//! - **Bounded**: each turn gets a deadline below the function's remaining time; a turn that
//!   runs out is reported failed and its claim expires, so the redelivery resumes it.
//!
//! [`Worker::handle_batch`] takes its dependencies as arguments (ports), so tests run it on
//! SQLite and the scripted model, and end to end on moto and the fake Bedrock.

pub mod config;
mod conversation;
mod job;
pub mod planning;

pub use job::JobOutcome;

use aws_lambda_events::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use channels::Sender;
use engine::Engine;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::time::Instant;

/// The worker's knobs.
#[derive(Clone)]
pub struct WorkerOptions {
    /// Longest a single turn may run, whatever time the function has left.
    pub max_turn: Duration,
    /// Kept back from the function's remaining time for bookkeeping after the last turn.
    pub safety_margin: Duration,
    /// Added to a turn's deadline to make its claim's expiry.
    pub claim_slack: Duration,
    /// How long a done claim is remembered (duplicates arriving later are skipped).
    pub keep_done: Duration,
    /// Unix milliseconds now (injectable for tests).
    pub clock: Arc<dyn Fn() -> i64 + Send + Sync>,
    /// Where the turn metrics (EMF lines) go.
    pub metrics: metrics::Metrics,
}

impl std::fmt::Debug for WorkerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerOptions")
            .field("max_turn", &self.max_turn)
            .field("safety_margin", &self.safety_margin)
            .field("claim_slack", &self.claim_slack)
            .field("keep_done", &self.keep_done)
            .finish_non_exhaustive()
    }
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self {
            max_turn: Duration::from_secs(10 * 60),
            safety_margin: Duration::from_secs(5),
            claim_slack: Duration::from_secs(30),
            keep_done: Duration::from_secs(7 * 24 * 3600),
            clock: Arc::new(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0)
            }),
            metrics: metrics::Metrics::default(),
        }
    }
}

/// Everything a batch needs, built once per cold start.
pub struct Worker {
    pub engine: Arc<Engine>,
    pub store: Arc<dyn Store>,
    /// Reply senders by channel name.
    pub senders: HashMap<String, Arc<dyn Sender>>,
    pub options: WorkerOptions,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("senders", &self.senders.keys().collect::<Vec<_>>())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
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
            let outcome = if failed_groups.contains(&group) {
                JobOutcome::Failed("an earlier message of this conversation failed".into())
            } else {
                self.run_record(&record, deadline).await
            };
            match &outcome {
                JobOutcome::Failed(why) => {
                    tracing::warn!(message_id = %id, %group, reason = %why, "job failed; SQS will redeliver it");
                    failed_groups.insert(group);
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

/// The metrics of one turn: model calls and tokens by kind from the outcome. Tool errors are not
/// in `TurnOutcome` yet, and the cost is left out until the budget work provides prices
/// (`estimated_usd`), so neither is reported rather than reported as zero.
pub fn turn_metrics(
    job: &queue::TurnJob,
    outcome: &engine::TurnOutcome,
    took: std::time::Duration,
) -> metrics::TurnMetrics {
    metrics::TurnMetrics {
        channel: job.channel.clone(),
        model_calls: outcome.model_calls,
        input_tokens: outcome.usage.input_tokens,
        output_tokens: outcome.usage.output_tokens,
        cache_read_tokens: outcome.usage.cache_read_tokens,
        cache_write_tokens: outcome.usage.cache_write_tokens,
        tool_errors: None,
        estimated_usd: None,
        duration_ms: took.as_millis() as u64,
    }
}
