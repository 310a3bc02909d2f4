//! Replies a sender gets at most once an hour, so a sender cannot make us send (and, on SMS,
//! pay for) one per message: the harness's own replies to someone not linked
//! ([`Resolved::hourly_reply`](crate::identity::Resolved::hourly_reply): onboarding, "that code
//! did not work", "too many codes"), and on a messaging channel a guard's refusal that is the
//! whole reply (a cap reached, an account paused): the first is sent, and the same refusal is
//! not sent again within the hour, however many messages come (to a linked sender, once an hour
//! per account, whichever of its chats they come from). Refusals on the web chat cost
//! nothing to show and are shown every time.
//!
//! Each is one conditional write, a claim on `<limit>#<channel>#<sender>` that lasts the hour,
//! taken before sending. If the platform does not take the reply, or the worker dies before
//! sending it, the job's retry still sends it: a harness reply's claim is given back when the
//! send fails (a crash in between leaves that sender without it for the hour, never with two);
//! a refusal's retry resumes its turn as finished (the refusal is recorded), which is not
//! taken for a new refusal and is delivered unless already recorded.

use crate::{ChannelJobs, STRANGER_REPLY_EVERY, web};
use engine::{TurnEnd, TurnOutcome};
use queue::TurnJob;
use sha2::{Digest, Sha256};
use store::Claim;

/// This hour's one reply `limit` for a sender, taken ([`ChannelJobs::give_back_hourly`] when the
/// platform does not take it).
#[derive(Debug)]
pub(crate) struct Taken {
    key: String,
    /// The claim's attempt; 0 when the store could not say (nothing to give back).
    attempt: u32,
}

impl ChannelJobs {
    /// Take this hour's reply `limit` for `job`'s sender: `None` when they got it this hour
    /// already. A store failure errs towards sending.
    pub(crate) async fn take_hourly(&self, job: &TurnJob, limit: &str) -> Option<Taken> {
        let sender = format!("{}#{}", job.channel, job.external_user_id);
        self.take_hourly_for(job, limit, &sender).await
    }

    /// [`ChannelJobs::take_hourly`] for `who` (a sender, `{channel}#{id}`, or an account,
    /// `user#{id}`, whichever of its chats the job came from).
    pub(crate) async fn take_hourly_for(
        &self,
        job: &TurnJob,
        limit: &str,
        who: &str,
    ) -> Option<Taken> {
        let now = (self.options.clock)();
        let key = format!("{limit}#{who}");
        let until = now + STRANGER_REPLY_EVERY.as_millis() as i64;
        let attempt = match self.store.claim_job(&key, now, until).await {
            Ok(Claim::Fresh) => 1,
            Ok(Claim::TakenOver { attempt }) => attempt,
            Ok(Claim::Busy { .. } | Claim::Done) => {
                tracing::info!(job = %job.dedupe_key(), limit, "this sender got this reply this hour already; not again");
                return None;
            }
            Err(e) => {
                tracing::warn!(job = %job.dedupe_key(), limit, error = %e, "could not check the hourly reply; sending it");
                0
            }
        };
        Some(Taken { key, attempt })
    }

    /// The platform did not take the reply `taken` was for: the job's retry may send it.
    pub(crate) async fn give_back_hourly(&self, taken: Taken) {
        if taken.attempt == 0 {
            return;
        }
        let now = (self.options.clock)();
        if let Err(e) = self
            .store
            .release_job(&taken.key, taken.attempt, now, None)
            .await
        {
            tracing::warn!(key = %taken.key, error = %e, "could not give back an hourly reply; the sender may miss it this hour");
        }
    }
}

/// The hourly limit of a turn's reply on a messaging channel, when the reply is a guard's
/// refusal and nothing else (no model call was made in this turn): named by the refusal's
/// words, so a different refusal (the month's allowance after the hour's) is still said once.
/// A turn resumed as finished ends `Answered`, so a retry delivering a refusal an earlier
/// attempt recorded is not held back by the claim that attempt took.
pub(crate) fn refusal_limit(job: &TurnJob, outcome: &TurnOutcome) -> Option<String> {
    let only_a_refusal = outcome.end == TurnEnd::Denied && outcome.model_calls == 0;
    (only_a_refusal && job.channel != web::WEB_CHANNEL).then(|| {
        let digest = Sha256::digest(outcome.reply.trim().as_bytes());
        format!("refusal-{}", hex::encode(&digest[..8]))
    })
}
