//! One record: decode, claim, resolve the conversation, run the turn, send, mark done.

use crate::Worker;
use aws_lambda_events::sqs::SqsMessage;
use channels::Outgoing;
use engine::{NullSink, TurnInput};
use queue::TurnJob;
use store::Claim;
use tokio::time::Instant;
use tools::ActionId;

/// What became of one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// The turn ran (or resumed) and its reply was sent.
    Done,
    /// Nothing to do: the job was done before, or is not for us.
    Skipped(&'static str),
    /// Not done: report it failed so SQS redelivers it (or dead-letters it in the end).
    Failed(String),
}

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
        let o = &self.options;
        let left = deadline
            .saturating_duration_since(Instant::now())
            .saturating_sub(o.safety_margin);
        let budget = left.min(o.max_turn);
        if budget.is_zero() {
            return JobOutcome::Failed("no time left in this invocation".into());
        }
        let key = job.dedupe_key();
        let now = (o.clock)();
        let expires = now + (budget + o.claim_slack).as_millis() as i64;
        match self.store.claim_job(&key, now, expires).await {
            Ok(Claim::Done) => return JobOutcome::Skipped("already done"),
            Ok(Claim::Busy { .. }) => {
                return JobOutcome::Failed("another worker holds this job".into());
            }
            Ok(Claim::TakenOver { attempt }) => {
                tracing::warn!(job = %key, attempt, "taking over a job whose worker died");
            }
            Ok(Claim::Fresh) => {}
            Err(e) => return JobOutcome::Failed(format!("claim failed: {e}")),
        }
        match tokio::time::timeout(budget, self.run_turn(&job)).await {
            Ok(Ok(JobOutcome::Done)) => {}
            Ok(Ok(other)) => return other,
            Ok(Err(why)) => return JobOutcome::Failed(why),
            Err(_) => {
                // The claim stays until it expires; the redelivery then resumes the turn.
                return JobOutcome::Failed(format!("turn deadline of {budget:?} passed"));
            }
        }
        let keep_until = (o.clock)() + o.keep_done.as_millis() as i64;
        if let Err(e) = self.store.finish_job(&key, keep_until).await {
            return JobOutcome::Failed(format!("could not mark the job done: {e}"));
        }
        JobOutcome::Done
    }

    async fn run_turn(&self, job: &TurnJob) -> Result<JobOutcome, String> {
        let Some(conversation) = self
            .conversation_for(job)
            .await
            .map_err(|e| format!("conversation lookup failed: {e}"))?
        else {
            return Ok(JobOutcome::Skipped("sender does not own the conversation"));
        };
        let Some(sender) = self.senders.get(&job.channel) else {
            tracing::error!(channel = %job.channel, "no sender configured for this channel");
            return Ok(JobOutcome::Skipped("no sender for this channel"));
        };
        let text = match (&job.button_id, job.text.trim().is_empty()) {
            (Some(button), true) => format!("[pressed button {button}]"),
            _ => job.text.clone(),
        };
        let input = TurnInput {
            conversation_id: conversation,
            text,
            action_id: ActionId(job.dedupe_key()),
        };
        let outcome = self
            .engine
            .run_turn(input, &NullSink)
            .await
            .map_err(|e| format!("turn failed: {e}"))?;
        if !outcome.reply.trim().is_empty() {
            let reply = Outgoing {
                conversation_key: job.conversation_key.clone(),
                external_user_id: job.external_user_id.clone(),
                in_reply_to: job.message_id.clone(),
                text: outcome.reply,
                ..Outgoing::default()
            };
            sender
                .send(&reply)
                .await
                .map_err(|e| format!("sending the reply failed: {e}"))?;
        }
        Ok(JobOutcome::Done)
    }
}
