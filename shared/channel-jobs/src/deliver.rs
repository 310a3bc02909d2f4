//! Sending a reply and recording what went out. A turn's reply is sent unless an earlier
//! attempt already recorded it, or it is a refusal the sender got this hour already
//! ([`crate::hourly`]); a `<silent/>` reply is a reaction where the platform has one,
//! else a short text — the user is never left hanging.

use crate::sent::{Sent, SentReplies};
use crate::{ChannelJobs, JobError};
use channels::{Button, Delivered, Outgoing, SendError, Sender};
use engine::lines;
use queue::TurnJob;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use store::{VisibleEntry, VisibleRole};
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;
use transcript::{ConversationId, UserId};

/// How long a given-up job whose turn is in the transcript is kept done: past the longest a
/// dead letter waits to be sent again on AWS (SQS keeps a message 14 days at most).
const GIVEN_UP_KEEP: Duration = Duration::from_secs(30 * 24 * 3600);

fn outgoing(job: &TurnJob, text: String, buttons: Vec<Button>) -> Outgoing {
    Outgoing {
        conversation_key: job.conversation_key.clone(),
        external_user_id: job.external_user_id.clone(),
        in_reply_to: job.message_id.clone(),
        text,
        buttons,
        typed_answer: None,
        reaction: None,
        user_last_message_ms: Some(job.received_at_ms),
    }
}

/// Whose budget what a platform bills for a reply counts against ([`ChannelJobs::charge`]):
/// the conversation's user (`None`: a sender not linked yet) and the conversation; and where
/// the charges run, each on a task of its own that the attempt awaits as it ends
/// ([`crate::attempt::Attempt`]).
#[derive(Clone, Copy)]
pub(crate) struct Payer<'a> {
    pub user: Option<&'a UserId>,
    pub conversation: &'a ConversationId,
    pub charges: &'a TaskTracker,
}

impl Payer<'_> {
    /// Start charging `segments`: on a task of its own, which a step cut off while it waits
    /// does not cancel; `None` when that bills nothing, or there is no runtime to run it (a
    /// drop as the process ends).
    fn start_charge(&self, engine: &Arc<engine::Engine>, segments: u32) -> Option<JoinHandle<()>> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        if segments == 0 {
            return None;
        }
        let engine = engine.clone();
        let user = self.user.cloned();
        let conversation = self.conversation.clone();
        let charge = async move {
            engine
                .charge_segments(user.as_ref(), &conversation, segments)
                .await;
        };
        Some(self.charges.spawn_on(charge, &runtime))
    }
}

/// How far apart the webhook's clock (a job's `received_at_ms`) and a worker's may be, for
/// telling an earlier attempt's record of a harness reply from the same words said before.
const CLOCKS_APART_MS: i64 = 5_000;

impl ChannelJobs {
    /// Count what the platform bills for `pieces`, which just went out (SMS segments), in the
    /// budget's dollar buckets, so a sender who asks for long answers by text message is
    /// stopped by the caps as one who asks for long model calls is.
    pub(crate) async fn charge(&self, sender: &dyn Sender, payer: Payer<'_>, pieces: &[String]) {
        let segments = pieces.iter().map(|p| sender.billed_segments(p)).sum();
        if let Some(charge) = payer.start_charge(&self.engine, segments) {
            let _ = charge.await;
        }
    }

    /// Send the turn's reply unless an earlier attempt already did, and return what went out,
    /// for the caller to record (with the turn's closing writes: [`ChannelJobs::finish_turn`]).
    /// `None`: nothing went out to record.
    pub(crate) async fn deliver_turn(
        &self,
        job: &TurnJob,
        payer: Payer<'_>,
        outcome: &engine::TurnOutcome,
        sender: &dyn Sender,
    ) -> Result<Option<VisibleEntry>, JobError> {
        let conversation = payer.conversation;
        // The turn this outcome is of, as the engine left the conversation (no second read).
        let turn = outcome.turn;
        let position = match outcome.reply_position {
            // This run wrote the user's entry (a new turn): no attempt recorded the reply yet,
            // and it goes right after that entry. A retry after a crash past sending resumes
            // the turn, so it gets `None` and reads.
            Some(position) => position,
            // The turn's reply, once recorded, is the last entry: the lease keeps every other
            // turn of this conversation out until this one is done. One bounded read, however
            // long the transcript, that also gives the next entry's position.
            None => {
                let last = self
                    .store
                    .last_visible(conversation)
                    .await
                    .map_err(JobError::from)?;
                if last
                    .as_ref()
                    .is_some_and(|e| e.turn == turn && e.role == VisibleRole::Assistant)
                {
                    tracing::info!(job = %job.dedupe_key(), "reply already delivered; not sending again");
                    if let Some(key) = SentReplies::key(job, turn) {
                        self.options.sent.forget(&key);
                    }
                    return Ok(None);
                }
                last.map_or(0, |e| e.position + 1)
            }
        };
        // A retry (the turn resumed, so no position came with it) on a messaging channel may
        // find its reply sent by an attempt whose record was cut off, or part of it sent by an
        // attempt cut off part way (`sent`).
        let sent_key = SentReplies::key(job, turn);
        // Both this process's memory and what the last attempt to release the job kept with
        // its claim (one read, on a resumed turn only): an attempt elsewhere may have got
        // further than the one this process remembers.
        let earlier = match sent_key
            .as_ref()
            .filter(|_| outcome.reply_position.is_none())
        {
            Some(key) => {
                // Unreadable, memory alone decides (the store may be what is down, which is
                // what the memory is for).
                let kept = match self.store.reply_sent(&job.dedupe_key()).await {
                    Ok(kept) => kept.map(Sent::from),
                    Err(err) => {
                        tracing::warn!(job = %job.dedupe_key(), error = %err, "what an earlier attempt sent is unreadable; going by this process's memory");
                        None
                    }
                };
                let this_turn = |sent: &Sent| sent.turn == turn;
                crate::sent::further(
                    self.options.sent.get(key).filter(this_turn),
                    kept.filter(this_turn),
                )
            }
            None => None,
        };
        if let Some(earlier) = earlier.as_ref().filter(|e| e.whole) {
            tracing::info!(job = %job.dedupe_key(), "the platform took this reply in an attempt whose record was cut off; recording it, not sending it again");
            return Ok(Some(self.reply_entry(
                conversation,
                position,
                outcome,
                &earlier.delivered,
            )));
        }
        if !outcome.silent && outcome.reply.trim().is_empty() {
            // The turn said nothing on purpose (a paused conversation): nothing to deliver.
            tracing::info!(job = %job.dedupe_key(), end = ?outcome.end, "the turn has no reply to deliver");
            return Ok(None);
        }
        // A refusal this sender was given this hour already is not sent again (`hourly`).
        // On a channel that bills each message (SMS), once an hour per account, not per
        // sender: an account with many numbers linked, each refused once an hour, would spend
        // past its dollar cap and everyone's on the sentence that it is over them. Elsewhere
        // per sender (a refusal by SMS does not silence the account's free chats).
        if let Some(limit) = crate::hourly::refusal_limit(job, outcome) {
            let who = match payer.user {
                Some(user) if sender.billed_segments(&outcome.reply) > 0 => {
                    format!("user#{}", user.0)
                }
                _ => format!("{}#{}", job.channel, job.external_user_id),
            };
            if self.take_hourly_for(job, &limit, &who).await.is_none() {
                return Ok(None);
            }
        }
        let buttons: Vec<Button> = outcome
            .buttons
            .iter()
            .map(|b| Button {
                id: b.id.clone(),
                title: b.title.clone(),
            })
            .collect();
        let mut reply = outgoing(job, outcome.reply.clone(), buttons.clone());
        reply.typed_answer = crate::press::typed_answer(
            &job.channel,
            &reply.buttons,
            self.options.confirm_code_key.as_ref(),
        );
        if outcome.silent && sender.has_reactions() {
            reply.text.clear();
            reply.buttons.clear();
            reply.reaction = Some(lines::ACKNOWLEDGED.to_owned());
        }
        let nothing_to_send = reply.text.trim().is_empty() && reply.reaction.is_none();
        // What an attempt cut off part way sent of this same reply is not sent again.
        let from = earlier
            .filter(|e| e.text == reply.text)
            .map(|e| e.delivered)
            .unwrap_or_default();
        if !from.is_empty() {
            tracing::info!(job = %job.dedupe_key(), pieces = from.pieces.len(), "an earlier attempt sent part of this reply; sending the rest");
        }
        let mut delivered = if nothing_to_send {
            Delivered::default()
        } else {
            let remember = sent_key.clone().map(|key| (key, turn));
            match self
                .send_reply(job, remember, sender, &reply, from, payer)
                .await?
            {
                Some(delivered) => delivered,
                None => {
                    let said = Delivered {
                        pieces: vec![outcome.reply.clone()],
                        reacted: false,
                    };
                    return Ok(Some(self.reply_entry(
                        conversation,
                        position,
                        outcome,
                        &said,
                    )));
                }
            }
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
            let more = self
                .send_reply(job, None, sender, &fallback, Delivered::default(), payer)
                .await?
                .unwrap_or_default();
            delivered.pieces.extend(more.pieces);
        }
        if let Some(key) = sent_key {
            let sent = Sent {
                turn,
                text: reply.text.clone(),
                delivered: delivered.clone(),
                whole: true,
            };
            self.options.sent.remember(key, sent);
        }
        Ok(Some(self.reply_entry(
            conversation,
            position,
            outcome,
            &delivered,
        )))
    }

    /// The visible entry of a turn's reply that went out as `delivered`.
    fn reply_entry(
        &self,
        conversation: &ConversationId,
        position: u64,
        outcome: &engine::TurnOutcome,
        delivered: &Delivered,
    ) -> VisibleEntry {
        VisibleEntry {
            conversation_id: conversation.clone(),
            // Known before sending: nothing else writes this conversation's transcript while
            // the turn holds its lease, and a taken position is a `Conflict`, never an overwrite.
            position,
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
            turn: outcome.turn,
            created_at_ms: (self.options.clock)(),
        }
    }

    /// Send one of the harness's own replies (no model call), then record the exchange in the
    /// visible transcript as a turn of its own. The claim keeps a redelivery from sending it
    /// again. A `retry` (an earlier attempt's claim was taken over) whose reply is the
    /// conversation's last entry finds it recorded by that attempt, which died before marking
    /// the job done: nothing is sent or recorded again; one that finds only the user's line
    /// recorded records just the reply after it. Only a worker that dies between sending and
    /// recording repeats the reply.
    pub(crate) async fn deliver_harness_reply(
        &self,
        job: &TurnJob,
        payer: Payer<'_>,
        text: &str,
        sender: &dyn Sender,
        retry: bool,
    ) -> Result<(), JobError> {
        let conversation = payer.conversation;
        let last = match retry {
            true => self
                .store
                .last_visible(conversation)
                .await
                .map_err(JobError::from)?,
            false => None,
        };
        // Only an entry written since this message came can be an earlier attempt's record of
        // it: the same words said in the chat before (another sender's onboarding in a group
        // chat, a stale code's reply a while ago) are not, and leave this reply to be sent.
        // "Since" allows for the webhook's and this worker's clocks a few seconds apart: an
        // earlier attempt's record dated before its message by a clock behind would otherwise
        // have the reply sent twice.
        let last = last.filter(|l| {
            job.received_at_ms <= 0 || l.created_at_ms + CLOCKS_APART_MS >= job.received_at_ms
        });
        if let Some(last) = &last
            && last.role == VisibleRole::Assistant
            && last.text == text
        {
            tracing::info!(job = %job.dedupe_key(), "an earlier attempt sent and recorded this reply; not sending it again");
            return Ok(());
        }
        // An earlier attempt recorded the user's line (and its turn), then died before the
        // reply's: only the reply is recorded now, after it.
        let user_recorded = last.filter(|l| l.role == VisibleRole::User && l.text == job.text);
        let reply = outgoing(job, text.to_owned(), Vec::new());
        let delivered = self
            .send_reply(job, None, sender, &reply, Delivered::default(), payer)
            .await?
            .unwrap_or_else(|| Delivered {
                pieces: vec![text.to_owned()],
                reacted: false,
            });
        // The platform took it: from here each step is tried again while the store is
        // unavailable (`recording`); each is one read or one idempotent write.
        let said = (VisibleRole::Assistant, delivered.pieces.join("\n\n"));
        let (turn, first, entries) = match user_recorded {
            Some(user) => (user.turn, user.position + 1, vec![said]),
            None => {
                let mut conv = self
                    .recording(job, || self.store.conversation(conversation))
                    .await
                    .map_err(JobError::from)?
                    .ok_or_else(|| JobError::ConversationGone(conversation.clone()))?;
                conv.turn += 1;
                self.recording(job, || self.store.update_conversation(&conv))
                    .await
                    .map_err(JobError::from)?;
                // One read for both entries: the job holds the conversation's lease, so no
                // other writer takes the positions in between (a taken one is a `Conflict`).
                let first = self
                    .recording(job, || self.store.next_visible_position(conversation))
                    .await
                    .map_err(JobError::from)?;
                (
                    conv.turn,
                    first,
                    vec![(VisibleRole::User, job.text.clone()), said],
                )
            }
        };
        let now = (self.options.clock)();
        for (position, (role, text)) in (first..).zip(entries) {
            let entry = VisibleEntry {
                conversation_id: conversation.clone(),
                position,
                role,
                text,
                buttons: Vec::new(),
                reaction: None,
                turn,
                created_at_ms: now,
            };
            self.recording(job, || self.store.append_visible(&entry))
                .await
                .map_err(JobError::from)?;
        }
        Ok(())
    }
}

impl ChannelJobs {
    /// `op`, one step of recording a reply that went out for `job`, tried again while the store
    /// is unavailable. A platform took the reply, takes no idempotency key, and only the record
    /// tells a later attempt not to send it again: so on a messaging channel until the
    /// attempt's deadline cuts it off (an outage shorter than the turn's budget costs a wait,
    /// not a second message); on the web chat, whose retry sends nothing anyone sees twice, for
    /// the settling window only, so the browser hears of the failure.
    pub(crate) async fn recording<T, Fut>(
        &self,
        job: &TurnJob,
        op: impl FnMut() -> Fut,
    ) -> Result<T, store::StoreError>
    where
        Fut: Future<Output = Result<T, store::StoreError>>,
    {
        let retry_for = if job.channel == crate::web::WEB_CHANNEL {
            self.options.settle_retry_for
        } else {
            Duration::MAX
        };
        crate::settle::retried(
            "the reply's record",
            retry_for,
            crate::settle::store_transient,
            op,
        )
        .await
    }
}

impl ChannelJobs {
    /// The job failed on its last attempt (it goes to the dead letters): close its turn in the
    /// transcript so the next one is coherent, tell the user in one calm sentence (best effort
    /// on a messaging channel; the web chat's stream gets it from the worker), and record what
    /// they saw. Returns whether a turn was closed.
    ///
    /// A turn that had ended with its answer (the attempt failed after it, marking the job
    /// done, say) tells the user nothing more when its reply went out: recorded already, or
    /// remembered as sent whole (in this process, or kept with the job's claim), when it is
    /// recorded now as what they saw; nor when later turns have run since (a dead letter sent
    /// again, whose user was told when it was first given up, if the platform took it then).
    pub async fn give_up_for_good(&self, job: &TurnJob) -> Result<bool, JobError> {
        if let Err(crate::NotAnswered::SentElsewhere) = self.sender_for(job) {
            // Never run here, and not this deployment's to answer: nobody is told anything.
            return Ok(false);
        }
        let owned = if job.channel == crate::web::WEB_CHANNEL {
            crate::web::owned_conversation(self.store.as_ref(), job)
                .await
                .map_err(JobError::from)?
        } else {
            self.store
                .identity(&job.channel, &job.external_user_id)
                .await
                .map_err(JobError::from)?
                .map(|user| {
                    let id = ConversationId(format!(
                        "{}:{}@{}",
                        job.channel,
                        crate::conversation::escape_key(&job.conversation_key),
                        user.0
                    ));
                    (user, id)
                })
        };
        let conversation = owned.as_ref().map(|(_, id)| id.clone());
        // The apology's segments count where its user's replies do (an unlinked sender's go
        // uncounted: one sentence, at most once per message), on a task of its own that a
        // give-up cut off by its deadline right after the send does not cancel.
        let charges = TaskTracker::new();
        let payer = owned.as_ref().map(|(user, id)| Payer {
            user: Some(user),
            conversation: id,
            charges: &charges,
        });
        let abandoned = match &conversation {
            Some(id) => self
                .engine
                .close_abandoned_turn(
                    id,
                    &tools::ActionId(job.dedupe_key()),
                    lines::GAVE_UP,
                    Some(job.received_at_ms).filter(|ms| *ms > 0),
                )
                .await
                .map_err(JobError::from)?,
            None => engine::Abandoned::NotStored,
        };
        let told = self
            .tell_given_up(job, conversation.as_ref(), payer, abandoned)
            .await;
        if abandoned != engine::Abandoned::NotStored && matches!(told, Ok((_, true))) {
            // Its turn is in the transcript, ended or closed now, and its user was told (or had
            // its answer): sent again from the dead letters (by hand, maybe days later), it is
            // skipped at its claim, reading nothing. One whose message was never stored runs
            // when sent again, as a new turn; one whose user could not be told resumes its
            // closed turn, which says the apology (or, overtaken since, runs nothing).
            let keep_until = (self.options.clock)() + GIVEN_UP_KEEP.as_millis() as i64;
            if let Err(e) = self.store.finish_job(&job.dedupe_key(), keep_until).await {
                tracing::warn!(job = %job.dedupe_key(), error = %e, "could not mark the given-up job done; sent again, it resumes its closed turn");
            }
        }
        told.map(|(closed, _)| closed)
    }

    /// Tell the user of `job` (given up, its turn found as `abandoned`) that their message
    /// failed, unless they had its answer or were told already: whether its turn was closed
    /// now, and whether the user has been told or had the answer (`false`: the apology did not
    /// go out).
    async fn tell_given_up(
        &self,
        job: &TurnJob,
        conversation: Option<&ConversationId>,
        payer: Option<Payer<'_>>,
        abandoned: engine::Abandoned,
    ) -> Result<(bool, bool), JobError> {
        if abandoned == engine::Abandoned::Overtaken {
            // A later message's turn has begun (under way, or moved on past a compaction): told
            // on a messaging channel, with nothing recorded (an entry now would land in that
            // turn, or stand in for its reply). A message found past a compaction may have had
            // its answer before; it is told all the same (its state was not read).
            // The web chat's page was told by the failed attempt's stream.
            if job.channel != crate::web::WEB_CHANNEL
                && let Some(sender) = self.senders.get(&job.channel)
            {
                match sender
                    .send(&outgoing(job, lines::GAVE_UP.to_owned(), Vec::new()))
                    .await
                {
                    Ok(delivered) => {
                        if let Some(payer) = payer {
                            self.charge(sender.as_ref(), payer, &delivered.pieces).await;
                        }
                    }
                    Err(e) => {
                        tracing::error!(job = %job.dedupe_key(), error = %e, "could not tell the user their message was given up");
                    }
                }
            }
            // Sent again, such a turn runs nothing and says nothing: done, told or not.
            return Ok((false, true));
        }
        let closed = abandoned == engine::Abandoned::Closed;
        if abandoned == (engine::Abandoned::Finished { latest: false }) {
            // A dead letter sent again after later turns of its conversation ran: its user had
            // its reply, or was told when it was first given up (if the platform took it then),
            // and a sentence now would be about a message long past, after answers to newer
            // ones.
            tracing::info!(job = %job.dedupe_key(), "given up again after later turns; the user is not told again");
            return Ok((false, true));
        }
        // Its reply, when recorded, is the conversation's last entry: the turn is the latest.
        if abandoned == (engine::Abandoned::Finished { latest: true })
            && let Some(id) = &conversation
        {
            if self.answer_went_out(job, id).await? {
                return Ok((false, true));
            }
            // Its reply never reached them: what it held for a yes is confirmed by no "ok" to
            // the sentence below, nor by a message of theirs before it (the platform back, the
            // sentence not sent). Voided first: a void that fails fails the give-up before
            // anything is said, and its retry voids again. A reply that goes out later (a dead
            // letter sent again once a token is fixed) asks its question again on a yes.
            self.engine
                .void_held(id, &tools::ActionId(job.dedupe_key()))
                .await
                .map_err(JobError::from)?;
        }
        let mut shown = lines::GAVE_UP.to_owned();
        if job.channel != crate::web::WEB_CHANNEL
            && let Some(sender) = self.senders.get(&job.channel)
        {
            match sender
                .send(&outgoing(job, lines::GAVE_UP.to_owned(), Vec::new()))
                .await
            {
                Ok(delivered) => {
                    if let Some(payer) = payer {
                        self.charge(sender.as_ref(), payer, &delivered.pieces).await;
                    }
                    shown = delivered.pieces.join("\n\n");
                }
                Err(e) => {
                    tracing::error!(job = %job.dedupe_key(), error = %e, "could not tell the user their message was given up");
                    return Ok((closed, false));
                }
            }
        }
        // What the user saw ends their turn in the visible transcript, unless it has its reply.
        // (Its reply, once recorded, is the last entry, as in `deliver_turn`.) A message never
        // stored has no turn to end: recorded, the apology would land in another message's
        // (one under way, run without this give-up's lease) and stand in for its reply.
        // The user has been told now: a record that fails is logged, and the job still marked
        // done (sent again, it would say the apology twice).
        if let Some(id) = conversation.filter(|_| abandoned != engine::Abandoned::NotStored)
            && let Err(e) = self.record_given_up(id, shown).await
        {
            tracing::error!(job = %job.dedupe_key(), error = %e, "the user was told their message was given up; recording it failed");
        }
        Ok((closed, true))
    }

    /// Record `shown` as what the user saw last of the conversation's turn, unless it has its
    /// reply.
    async fn record_given_up(&self, id: &ConversationId, shown: String) -> Result<(), JobError> {
        if let Some(conv) = self.store.conversation(id).await.map_err(JobError::from)?
            && let last = self.store.last_visible(id).await.map_err(JobError::from)?
            && !last
                .as_ref()
                .is_some_and(|e| e.turn == conv.turn && e.role == VisibleRole::Assistant)
        {
            self.record_said(id, last.as_ref(), conv.turn, shown)
                .await?;
        }
        Ok(())
    }

    /// Record `text` as what the user saw last of turn `turn`, after `last`.
    async fn record_said(
        &self,
        id: &ConversationId,
        last: Option<&VisibleEntry>,
        turn: u64,
        text: String,
    ) -> Result<(), JobError> {
        let entry = VisibleEntry {
            conversation_id: id.clone(),
            position: last.map_or(0, |e| e.position + 1),
            role: VisibleRole::Assistant,
            text,
            buttons: Vec::new(),
            reaction: None,
            turn,
            created_at_ms: (self.options.clock)(),
        };
        self.store
            .append_visible(&entry)
            .await
            .map_err(JobError::from)
    }
}

impl ChannelJobs {
    /// Whether the reply of `job`'s finished turn (the conversation's latest) reached the user:
    /// recorded as its last visible entry, or remembered as sent whole and recorded now.
    async fn answer_went_out(&self, job: &TurnJob, id: &ConversationId) -> Result<bool, JobError> {
        let Some(conv) = self.store.conversation(id).await.map_err(JobError::from)? else {
            return Ok(false);
        };
        let last = self.store.last_visible(id).await.map_err(JobError::from)?;
        if last
            .as_ref()
            .is_some_and(|e| e.turn == conv.turn && e.role == VisibleRole::Assistant)
        {
            tracing::info!(job = %job.dedupe_key(), "given up after its answer was sent and recorded: nothing more is said");
            return Ok(true);
        }
        let Some(key) = SentReplies::key(job, conv.turn) else {
            return Ok(false);
        };
        let kept = match self.store.reply_sent(&job.dedupe_key()).await {
            Ok(kept) => kept.map(Sent::from),
            Err(_) => None,
        };
        let this_turn = |s: &Sent| s.turn == conv.turn && s.whole;
        let Some(sent) = crate::sent::further(
            self.options.sent.get(&key).filter(this_turn),
            kept.filter(this_turn),
        ) else {
            return Ok(false);
        };
        tracing::info!(job = %job.dedupe_key(), "given up after its answer was sent, unrecorded: recording it, nothing more is said");
        let said = sent.delivered.pieces.join("\n\n");
        self.record_said(id, last.as_ref(), conv.turn, said).await?;
        self.options.sent.forget(&key);
        Ok(true)
    }
}

/// How many times a reply cut off part way is sent on from where it stopped within one attempt
/// before the attempt gives up (and its retry sends the rest, [`SentReplies`]).
const PART_RETRIES: u32 = 3;

/// The first wait before sending on a reply cut off part way; it doubles each time.
const PART_BACKOFF: Duration = Duration::from_millis(500);

/// The longest rate-limit wait taken within an attempt; a longer one ends the attempt.
const PART_MAX_WAIT: Duration = Duration::from_secs(30);

impl ChannelJobs {
    /// Send `reply`, all but what `from` holds (what an earlier attempt sent of it), and return
    /// what went out. `None` when the platform refused it for good (a blocked user, a bad
    /// request, WhatsApp's closed window): a retry would be refused the same way, after sending
    /// again whatever went out before the refusal, so the caller records the reply as said and
    /// the job ends, and the operator is told here.
    ///
    /// A failure before anything went out is the job's, to retry whole. One after some pieces
    /// went out (a 5xx, a rate limit between pieces) is sent on from the piece that failed, here
    /// and a few times, so the user is not left with half a reply nor sent its start twice; if
    /// that does not get it out, or the attempt's deadline cuts it off, what went out is
    /// remembered under `key` (with its turn) for the retry ([`SentReplies`]). A piece whose
    /// request timed out after it was sent may have arrived all the same; it counts as not
    /// sent, and goes again (platforms take no idempotency key: one line twice, never a reply
    /// lost).
    async fn send_reply(
        &self,
        job: &TurnJob,
        key: Option<(String, u64)>,
        sender: &dyn Sender,
        reply: &Outgoing,
        from: Delivered,
        payer: Payer<'_>,
    ) -> Result<Option<Delivered>, JobError> {
        // What goes out from here is charged (`Sending::charge_sent`) before the attempt can
        // wait, and before it ends; what an attempt dropped mid-send had sent, as it drops.
        let charged = from.pieces.len();
        let mut sending = Sending {
            replies: &self.options.sent,
            key,
            text: &reply.text,
            so_far: from,
            ended: false,
            complete: false,
            fees: Fees {
                engine: &self.engine,
                sender,
                payer,
                charged,
            },
        };
        let mut tries = 0;
        loop {
            let err = match sender.send_from(reply, &mut sending.so_far).await {
                Ok(()) => {
                    // Charged first: dropped while charging, the reply is still remembered
                    // (as sent whole).
                    sending.complete = true;
                    sending.charge_sent().await;
                    return Ok(Some(sending.end()));
                }
                Err(err) => err,
            };
            sending.charge_sent().await;
            if !err.is_retryable() {
                tracing::error!(job = %job.dedupe_key(), error = %err, "the platform refused the reply for good; recorded, not tried again");
                sending.end();
                return Ok(None);
            }
            if let SendError::Unauthorized { .. } = &err {
                // Nothing a wait here changes: the job fails, is retried, and waits in the
                // dead letters for the operator's fix.
                tracing::error!(job = %job.dedupe_key(), error = %err, pieces_sent = sending.so_far.pieces.len(), "the platform refused the channel's credentials; the reply is not dropped: the job is retried, then kept in the dead letters");
                return Err(err.into());
            }
            let wait = match &err {
                SendError::RateLimited {
                    retry_after: Some(wait),
                } => *wait,
                _ => PART_BACKOFF * 2u32.pow(tries),
            };
            if sending.so_far.is_empty() || tries == PART_RETRIES || wait > PART_MAX_WAIT {
                return Err(err.into());
            }
            tracing::warn!(job = %job.dedupe_key(), error = %err, pieces_sent = sending.so_far.pieces.len(), ?wait, "the platform failed part way through a reply; sending on from where it stopped");
            tries += 1;
            tokio::time::sleep(wait).await;
        }
    }
}

/// A reply being sent: what went out of it so far, remembered for a retry if the attempt ends
/// (an error, or its deadline dropping it) before all of it went out.
struct Sending<'a> {
    replies: &'a SentReplies,
    /// Where it is remembered, and its turn; `None`: not remembered (the web chat, the
    /// harness's own replies).
    key: Option<(String, u64)>,
    text: &'a str,
    so_far: Delivered,
    ended: bool,
    /// All of it went out.
    complete: bool,
    fees: Fees<'a>,
}

/// What the platform bills for the pieces of a reply being sent, and how many are charged.
struct Fees<'a> {
    engine: &'a Arc<engine::Engine>,
    sender: &'a dyn Sender,
    payer: Payer<'a>,
    /// Pieces of `so_far` already charged (an earlier attempt charged what it sent).
    charged: usize,
}

impl Sending<'_> {
    /// All of it went out, or the platform refused the rest for good: nothing to remember.
    fn end(&mut self) -> Delivered {
        self.ended = true;
        std::mem::take(&mut self.so_far)
    }

    /// The segments of the pieces sent since the last charge, now counted as charged.
    fn uncharged(&mut self) -> u32 {
        let new = self
            .so_far
            .pieces
            .get(self.fees.charged..)
            .unwrap_or_default();
        self.fees.charged = self.so_far.pieces.len();
        new.iter()
            .map(|p| self.fees.sender.billed_segments(p))
            .sum()
    }

    /// Charge what went out since the last charge, once: on a task of its own, which an
    /// attempt cut off while it waits does not cancel.
    async fn charge_sent(&mut self) {
        if let Some(charge) = self.charge_task() {
            let _ = charge.await;
        }
    }

    /// The charge of what went out since the last charge, started (see
    /// [`Payer::start_charge`]).
    fn charge_task(&mut self) -> Option<JoinHandle<()>> {
        let segments = self.uncharged();
        self.fees.payer.start_charge(self.fees.engine, segments)
    }
}

impl Drop for Sending<'_> {
    fn drop(&mut self) {
        // Dropped mid-send (the attempt's deadline, a lost lease): what went out is charged
        // still, on its own task, which the attempt awaits as it ends (a process ending first
        // may never run it).
        drop(self.charge_task());
        if !self.ended
            && !self.so_far.is_empty()
            && let Some((key, turn)) = self.key.take()
        {
            let sent = Sent {
                turn,
                text: self.text.to_owned(),
                delivered: std::mem::take(&mut self.so_far),
                whole: self.complete,
            };
            self.replies.remember(key, sent);
        }
    }
}
