//! One record: decode, then the shared channel job within this invocation's time.

use crate::{JobOutcome, Worker};
use aws_lambda_events::sqs::SqsMessage;
use tokio::time::Instant;

impl Worker {
    pub(crate) async fn run_record(&self, record: &SqsMessage, deadline: Instant) -> JobOutcome {
        let body = record.body.as_deref().unwrap_or_default();
        let job = match queue_sqs::decode_job(body) {
            Ok(job) => job,
            Err(e) => {
                tracing::error!(error = %e, "undecodable job; it will reach the dead-letter queue");
                return JobOutcome::Failed("undecodable job".into());
            }
        };
        let left = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(self.options.safety_margin);
        let budget = left.min(self.options.max_turn);
        if budget.is_zero() {
            return JobOutcome::Failed("no time left in this invocation".into());
        }
        self.jobs.run(&job, budget).await
    }
}
