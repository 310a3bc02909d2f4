//! A conversation's lease around a turn, and the turn's closing writes: the reply's record,
//! the lease given up, the job marked done.

#[cfg(doc)]
use crate::JobOptions;
use crate::claim::LeaseNow;
use crate::{ChannelJobs, JobError, settle};
use queue::TurnJob;
use std::future::Future;
use std::time::Duration;
use store::{Lease, StoreError, TurnFinish, VisibleEntry, VisibleRole};
use transcript::ConversationId;

/// When an attempt's time is up: its budget from its start ([`ChannelJobs::run`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    pub(crate) at: tokio::time::Instant,
    pub(crate) budget: Duration,
}

impl Deadline {
    /// Waits until the deadline; then the error the attempt ends with.
    async fn reached(self) -> JobError {
        tokio::time::sleep_until(self.at).await;
        JobError::Deadline(self.budget)
    }
}

/// How long past its deadline an attempt may take to give its lease back before it is cut
/// from outside (the lease then lapses on its own, within [`JobOptions::lease_ttl`]).
pub const RELEASE_GRACE: Duration = Duration::from_secs(1);

impl ChannelJobs {
    /// Run `work` holding `conversation`'s lease, so turns of one conversation from different
    /// entrances (or functions) never interleave: take it unless `lease` says the claim took it
    /// already, waiting while another turn holds it; renew it
    /// every third of its lifetime while `work` runs, release it after. A holder that died
    /// stops renewing; its lease lapses within [`JobOptions::lease_ttl`]. An entry `work`
    /// returns (the reply that went out) is recorded as the lease is released
    /// ([`ChannelJobs::finish_turn`]); the flag says whether the job was marked done with it.
    /// At `deadline` the wait or the work is cut, and the lease given back.
    pub(crate) async fn leased<T>(
        &self,
        job: &TurnJob,
        conversation: &ConversationId,
        lease: LeaseNow,
        deadline: Deadline,
        work: impl Future<Output = Result<(T, Option<VisibleEntry>), JobError>>,
    ) -> Result<(T, bool), JobError> {
        let o = &self.options;
        let holder = job.dedupe_key();
        let acquire = async {
            if lease == LeaseNow::Held {
                return Ok(());
            }
            self.take_lease(conversation, &holder)
                .await
                .map_err(JobError::from)
        };
        tokio::select! {
            acquired = acquire => acquired?,
            _ = abandoned(&o.abandon) => {
                // The cut may have come as the lease was taken: give it up if it is ours.
                let _ = self.store.release_lease(conversation, &holder).await;
                return Err(JobError::CutShort);
            }
            why = deadline.reached() => {
                let _ = self.store.release_lease(conversation, &holder).await;
                return Err(why);
            }
        }
        let renew = async {
            let mut every = tokio::time::interval((o.lease_ttl / 3).max(Duration::from_millis(1)));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            every.tick().await;
            loop {
                every.tick().await;
                match self.lease_for_a_ttl(conversation, &holder).await {
                    Ok(Lease::Held) => {}
                    Ok(Lease::Busy { holder: other, .. }) => {
                        return JobError::LeaseLost(other);
                    }
                    // Keep working: the lease is still ours until it expires.
                    Err(e) => {
                        tracing::warn!(error = %e, job = %holder, "could not renew the conversation's lease")
                    }
                }
            }
        };
        let result = tokio::select! {
            result = work => result,
            lost = renew => Err(lost),
            _ = abandoned(&o.abandon) => Err(JobError::CutShort),
            why = deadline.reached() => Err(why),
        };
        match result {
            Ok((value, Some(entry))) => {
                let finished = self.finish_turn(job, conversation, &holder, &entry).await?;
                if let Some(key) = crate::sent::SentReplies::key(job, entry.turn) {
                    self.options.sent.forget(&key);
                }
                Ok((value, finished))
            }
            other => {
                self.release_lease(conversation, &holder).await;
                other.map(|(value, _)| (value, false))
            }
        }
    }

    /// Take (or renew) `conversation`'s lease for `holder` from now for
    /// [`JobOptions::lease_ttl`], unless another holder has it: one conditional write.
    async fn lease_for_a_ttl(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<Lease, StoreError> {
        let now = (self.options.clock)();
        let ttl = self.options.lease_ttl.as_millis() as i64;
        self.store
            .acquire_lease(conversation, holder, now, now + ttl)
            .await
    }

    /// Take `conversation`'s lease for `holder`, waiting while another turn holds it (25 ms,
    /// doubling to 1 s, between looks).
    async fn take_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<(), StoreError> {
        let mut wait = Duration::from_millis(25);
        loop {
            match self.lease_for_a_ttl(conversation, holder).await? {
                Lease::Held => return Ok(()),
                Lease::Busy {
                    holder: other,
                    until_ms,
                } => {
                    tracing::info!(job = %holder, held_by = %other, until_ms, "another turn of this conversation is running; waiting for it");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// Record the reply that went out, give the lease up and mark the job done: one write
    /// where the store offers it ([`store::TurnWrites`]), else the record and the release one
    /// after the other, and `false` (the caller marks the job done, as after any turn). A
    /// refused combined write (the position taken, the lease lapsed) falls back to the
    /// writes one by one, which report what they found.
    /// The record is tried again while the store is unavailable ([`ChannelJobs::recording`]).
    async fn finish_turn(
        &self,
        job: &TurnJob,
        conversation: &ConversationId,
        holder: &str,
        entry: &VisibleEntry,
    ) -> Result<bool, JobError> {
        if let Some(writes) = self.store.turn_writes() {
            let o = &self.options;
            let finish = TurnFinish {
                entry,
                conversation,
                holder,
                job_key: holder,
                keep_until_ms: (o.clock)() + o.keep_done.as_millis() as i64,
            };
            match self.recording(job, || writes.finish_turn(&finish)).await {
                Ok(()) => return Ok(true),
                Err(StoreError::Conflict { what }) => {
                    tracing::info!(job = %holder, what, "the turn's closing writes were refused together; one by one");
                }
                Err(e) => {
                    self.release_lease(conversation, holder).await;
                    return Err(e.into());
                }
            }
        }
        let recorded = match self
            .recording(job, || self.store.append_visible(entry))
            .await
        {
            Err(StoreError::Conflict { what }) => {
                tracing::warn!(job = %holder, what, "the reply's position was taken while its record waited; recording it after what came since");
                self.record_after_others(job, conversation, holder, entry)
                    .await
            }
            other => other,
        };
        self.release_lease(conversation, holder).await;
        recorded.map_err(JobError::from)?;
        Ok(false)
    }

    /// Record a reply that went out although its position was taken: the lease lapsed while
    /// the record waited (the store unavailable for longer than [`JobOptions::lease_ttl`]) and
    /// another turn of the conversation went on. Sending it again would show the user a second
    /// copy, so it is recorded after what came since, under the lease taken again (waiting for
    /// that turn to end), unless it is there already (an earlier try whose answer was lost).
    /// The only place a turn reads the whole visible transcript: it happens only on this path.
    async fn record_after_others(
        &self,
        job: &TurnJob,
        conversation: &ConversationId,
        holder: &str,
        entry: &VisibleEntry,
    ) -> Result<(), StoreError> {
        self.recording(job, || self.take_lease(conversation, holder))
            .await?;
        let seen = self
            .recording(job, || self.store.visible(conversation))
            .await?;
        if seen
            .iter()
            .any(|e| e.turn == entry.turn && e.role == VisibleRole::Assistant)
        {
            return Ok(());
        }
        let late = VisibleEntry {
            position: seen.last().map_or(0, |e| e.position + 1),
            ..entry.clone()
        };
        self.recording(job, || self.store.append_visible(&late))
            .await
    }

    /// Give `conversation`'s lease up if `holder` still holds it.
    /// Crash story: a holder that dies before this leaves the lease to lapse; the next turn
    /// waits at most `lease_ttl`.
    async fn release_lease(&self, conversation: &ConversationId, holder: &str) {
        let retry_for = self.options.settle_retry_for;
        let released = settle::retried(
            "the conversation's lease",
            retry_for,
            settle::store_transient,
            || self.store.release_lease(conversation, holder),
        )
        .await;
        if let Err(e) = released {
            tracing::warn!(error = %e, job = %holder, "could not release the conversation's lease; it will lapse");
        }
    }
}

/// Resolves once `abandon` is set.
async fn abandoned(abandon: &tokio::sync::watch::Sender<bool>) {
    let mut set = abandon.subscribe();
    if set.wait_for(|set| *set).await.is_err() {
        std::future::pending::<()>().await;
    }
}
