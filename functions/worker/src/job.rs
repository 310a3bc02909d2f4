//! One record: decode, claim, resolve the conversation, run the turn, send, mark done.

use crate::Worker;
use aws_lambda_events::sqs::SqsMessage;
use channels::{Button, Delivered, Outgoing, Sender};
use engine::lines;
use engine::{NullSink, TurnInput};
use queue::TurnJob;
use store::Claim;
use store::{VisibleEntry, VisibleRole};
use tokio::time::Instant;
use tools::ActionId;
use transcript::ConversationId;

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
        if self.engine.records_replies() {
            // The worker records what actually went out; an engine that records too would make
            // every reply look delivered before it was sent.
            return Err("misconfigured: the worker's engine must have record_reply off".into());
        }
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
        let conversation = input.conversation_id.clone();
        let started = Instant::now();
        let outcome = self
            .engine
            .run_turn(input, &NullSink)
            .await
            .map_err(|e| format!("turn failed: {e}"))?;
        self.options
            .metrics
            .turn(&crate::turn_metrics(job, &outcome, started.elapsed()));
        self.deliver(job, &conversation, outcome, sender.as_ref())
            .await?;
        Ok(JobOutcome::Done)
    }

    /// Send the reply unless an earlier attempt already did, then record what went out.
    async fn deliver(
        &self,
        job: &TurnJob,
        conversation: &ConversationId,
        outcome: engine::TurnOutcome,
        sender: &dyn Sender,
    ) -> Result<(), String> {
        let store_error = |e: store::StoreError| format!("store failed: {e}");
        let conv = self
            .store
            .conversation(conversation)
            .await
            .map_err(store_error)?
            .ok_or("the conversation disappeared")?;
        let visible = self
            .store
            .visible(conversation)
            .await
            .map_err(store_error)?;
        if visible
            .iter()
            .any(|e| e.turn == conv.turn && e.role == VisibleRole::Assistant)
        {
            tracing::info!(job = %job.dedupe_key(), "reply already delivered; not sending again");
            return Ok(());
        }
        let buttons: Vec<Button> = outcome
            .buttons
            .iter()
            .map(|b| Button {
                id: b.id.clone(),
                title: b.title.clone(),
            })
            .collect();
        let mut reply = Outgoing {
            conversation_key: job.conversation_key.clone(),
            external_user_id: job.external_user_id.clone(),
            in_reply_to: job.message_id.clone(),
            text: outcome.reply.clone(),
            buttons: buttons.clone(),
            reaction: None,
            user_last_message_ms: Some(job.received_at_ms),
        };
        if outcome.silent && sender.has_reactions() {
            reply.text.clear();
            reply.buttons.clear();
            reply.reaction = Some(lines::ACKNOWLEDGED.to_owned());
        }
        let send_error = |e: channels::SendError| format!("sending the reply failed: {e}");
        let nothing_to_send = reply.text.trim().is_empty() && reply.reaction.is_none();
        let mut delivered = if nothing_to_send {
            Delivered::default()
        } else {
            sender.send(&reply).await.map_err(send_error)?
        };
        if !delivered.reacted && (reply.reaction.is_some() || reply.text.trim().is_empty()) {
            // The reaction did not go out (or there was nothing to say): never leave the user
            // hanging.
            let text = if outcome.reply.trim().is_empty() {
                lines::ACKNOWLEDGED.to_owned()
            } else {
                outcome.reply.clone()
            };
            let fallback = Outgoing {
                text,
                reaction: None,
                buttons,
                ..reply.clone()
            };
            let more: Delivered = sender.send(&fallback).await.map_err(send_error)?;
            delivered.pieces.extend(more.pieces);
        }
        let entry = VisibleEntry {
            conversation_id: conversation.clone(),
            position: self
                .store
                .next_visible_position(conversation)
                .await
                .map_err(store_error)?,
            role: VisibleRole::Assistant,
            text: delivered.pieces.join("\n\n"),
            buttons: outcome
                .buttons
                .iter()
                .map(|b| store::Button {
                    id: b.id.clone(),
                    title: b.title.clone(),
                })
                .collect(),
            reaction: delivered.reacted.then(|| lines::ACKNOWLEDGED.to_owned()),
            turn: conv.turn,
            created_at_ms: (self.options.clock)(),
        };
        self.store.append_visible(&entry).await.map_err(store_error)
    }
}
