//! A job's claim. Where the store takes a job's claim and its conversation's lease in one write
//! ([`store::TurnWrites::claim_with_lease`]) and the conversation is known (a web job names it;
//! its owner is checked under the lease, by the turn's start read) or known by one read (a
//! channel job whose text holds no link code: [`identity::resolve_by_reading`]), that read
//! comes first and both are taken together. Otherwise — and whenever the store does not take both (a
//! takeover, the conversation busy) — the claim alone, then the lease once the conversation is
//! known ([`ChannelJobs::leased`]). Reading the sender first writes nothing, so a duplicate
//! delivery costs that read and nothing else.

use crate::identity::{self, Resolved};
use crate::{ChannelJobs, conversation, web};
use queue::TurnJob;
use store::{Claim, ClaimWithLease, ClaimedWithLease, StartRead, StoreError};
use transcript::{ConversationId, UserId};

/// Whether the job's conversation's lease is still to take.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaseNow {
    /// Take it (and wait for it) before the work.
    #[default]
    ToTake,
    /// Taken with the claim: the work starts at once.
    Held,
}

/// What a claim learnt besides the claim.
#[derive(Debug, Default)]
pub(crate) struct Early {
    /// The sender, when read before the claim (the answer does not read it again).
    pub(crate) resolved: Option<Resolved>,
    /// A web job's user and conversation, when read before the claim: `Some(None)` when the
    /// conversation is not the job's user's. A web job claimed with its lease is not read
    /// before: its owner is checked under the lease.
    pub(crate) owned: Option<Option<(UserId, ConversationId)>>,
    pub(crate) lease: LeaseNow,
    /// The turn's start, read with the claim and the lease where the store reads inside that
    /// write ([`store::TurnWrites::claim_with_lease_reading`]): not read again under the lease.
    pub(crate) start: Option<StartRead>,
    /// The context block's facts, read beside a claim that took the lease too
    /// ([`engine::Engine::context_facts`]); else the turn reads them.
    pub(crate) facts: Option<Result<engine::ContextFacts, String>>,
}

impl ChannelJobs {
    /// Claim `job` (its key `key`) at `now` until `expires`, with its conversation's lease where
    /// the store takes both at once.
    pub(crate) async fn claim(
        &self,
        job: &TurnJob,
        key: &str,
        now: i64,
        expires: i64,
    ) -> (Result<Claim, StoreError>, Early) {
        let mut early = Early::default();
        if let Some(writes) = self.store.turn_writes() {
            let target = if job.channel == web::WEB_CHANNEL {
                // Its owner is checked under the lease, by the turn's start read (`answer`).
                Some((
                    ConversationId(job.conversation_key.clone()),
                    UserId(job.external_user_id.clone()),
                ))
            } else {
                match identity::resolve_by_reading(self.store.as_ref(), job).await {
                    Ok(resolved) => early.resolved = resolved,
                    Err(e) => return (Err(e), early),
                }
                match &early.resolved {
                    Some(Resolved::Bound(user)) => {
                        Some((conversation::user_conversation_id(job, user), user.clone()))
                    }
                    _ => None,
                }
            };
            if let Some((conversation, user)) = target {
                let start = ClaimWithLease {
                    job_key: key,
                    now_ms: now,
                    claim_until_ms: expires,
                    conversation: &conversation,
                    holder: key,
                    lease_until_ms: now + self.options.lease_ttl.as_millis() as i64,
                };
                // Where asked, the context block's facts are read beside the claim, not after
                // it: a claim that takes the lease found no turn of this conversation running,
                // and the queue gives a conversation its next job only once the one before is
                // acknowledged, so none ran during the read either (the user's records are
                // changed by their other conversations without this lease in any case).
                let beside = async {
                    if self.options.context_beside_claim {
                        self.engine.context_facts(&user, &conversation).await
                    } else {
                        None
                    }
                };
                let (claimed, facts) =
                    tokio::join!(writes.claim_with_lease_reading(&start, &user), beside);
                match claimed {
                    Ok((ClaimedWithLease::Both, read)) => {
                        early.lease = LeaseNow::Held;
                        early.start = read;
                        early.facts = facts;
                        return (Ok(Claim::Fresh), early);
                    }
                    Ok((ClaimedWithLease::Refused(found), _)) => return (Ok(found), early),
                    // Nothing written: one by one, the lease waited for as always.
                    Ok((ClaimedWithLease::Apart, _)) => {}
                    // Unknown outcome, as a lone claim's failure: the claim and the lease (the
                    // job's own) may be there; the retry finds the claim and waits for its
                    // expiry, and renews the lease as its holder.
                    Err(e) => return (Err(e), early),
                }
            }
        }
        (self.store.claim_job(key, now, expires).await, early)
    }
}

/// The turn's start as the claim read it (`claimed`), else as the store reads it at once
/// ([`store::TurnWrites::conversation_and_account`]); `None` where it reads neither way.
pub(crate) async fn start_read(
    store: &dyn store::Store,
    id: &ConversationId,
    user: &UserId,
    claimed: Option<StartRead>,
) -> Result<Option<StartRead>, StoreError> {
    Ok(match (claimed, store.turn_writes()) {
        (Some(read), _) => Some(read),
        (None, Some(both)) => Some(both.conversation_and_account(id, user).await?),
        (None, None) => None,
    })
}
