//! Replies a platform took whose record is not written yet. Platforms take no idempotency key,
//! and the visible transcript's record is what tells a later attempt that a reply went out. Its
//! write is tried again until the attempt's deadline ([`ChannelJobs::recording`]); when the
//! store stays unavailable past that, the attempt fails with the reply sent and unrecorded, and
//! its retry, finding no record, would send it a second time. So this process remembers each
//! reply from the moment the platform takes it until its record is written, and a retry that
//! runs here records the remembered reply instead of sending it again.
//!
//! Messaging channels only: a web chat retry shows its reply in a browser that already reads
//! the recorded history, so sending it again costs nothing anyone sees twice.
//!
//! In memory: the store may be what is down. `bridle serve` is one process, so there this
//! holds until a restart; on Lambda, only when the retry lands in the same warm environment.
//! Bounded (the oldest is dropped past [`KEPT`]): an entry outlives its write only when the
//! record failed.
//!
//! It also remembers a reply cut off part way — some of its pieces went out, then the platform
//! failed or the attempt's deadline passed — so that a retry here sends only the rest
//! ([`channels::Sender::send_from`]). An attempt that ends without finishing also keeps what
//! it remembers of its reply with the job's claim as it releases it
//! ([`store::JobClaims::release_job`]), so a retry in another process — another Lambda
//! environment, a restarted server — sends only the rest too; only an attempt that dies
//! outright (the process killed) leaves that to memory.
//!
//! [`ChannelJobs::recording`]: crate::ChannelJobs

use channels::Delivered;
use std::collections::VecDeque;
use std::sync::Mutex;
use store::ReplySent;

/// How many unrecorded replies are remembered at most.
pub const KEPT: usize = 256;

/// What an attempt sent of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    /// The turn whose reply it is.
    pub turn: u64,
    /// The reply's text as it was given to the sender.
    pub text: String,
    pub delivered: Delivered,
    /// Whether all of it went out; else only `delivered` did.
    pub whole: bool,
}

impl Sent {
    /// How far it got, to compare two records of one job's reply: a later turn's is ahead;
    /// in one turn a whole reply is ahead of a part, and more pieces ahead of fewer.
    pub(crate) fn progress(&self) -> (u64, bool, usize) {
        (self.turn, self.whole, self.delivered.pieces.len())
    }
}

/// The further of two records of one job's reply (`a` when they are level).
pub(crate) fn further(a: Option<Sent>, b: Option<Sent>) -> Option<Sent> {
    match (a, b) {
        (Some(a), Some(b)) if b.progress() > a.progress() => Some(b),
        (Some(a), _) => Some(a),
        (None, b) => b,
    }
}

impl From<ReplySent> for Sent {
    fn from(kept: ReplySent) -> Self {
        Self {
            turn: kept.turn,
            text: kept.text,
            delivered: Delivered {
                pieces: kept.pieces,
                reacted: kept.reacted,
            },
            whole: kept.whole,
        }
    }
}

impl From<Sent> for ReplySent {
    fn from(sent: Sent) -> Self {
        Self {
            turn: sent.turn,
            text: sent.text,
            pieces: sent.delivered.pieces,
            reacted: sent.delivered.reacted,
            whole: sent.whole,
        }
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct SentReplies(Mutex<VecDeque<(String, Sent)>>);

impl SentReplies {
    /// The key of `job`'s reply in turn `turn`; `None` on the web chat, whose replies are not
    /// remembered.
    pub(crate) fn key(job: &queue::TurnJob, turn: u64) -> Option<String> {
        (job.channel != crate::web::WEB_CHANNEL).then(|| format!("{}#{turn}", job.dedupe_key()))
    }

    /// The platform took `sent` for `key`.
    pub(crate) fn remember(&self, key: String, sent: Sent) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(k, _)| *k != key);
        if kept.len() >= KEPT {
            kept.pop_front();
        }
        kept.push_back((key, sent));
    }

    /// What the platform took for `key` in an attempt whose record was not written.
    pub(crate) fn get(&self, key: &str) -> Option<Sent> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter().find(|(k, _)| k == key).map(|(_, s)| s.clone())
    }

    /// What is remembered of the reply of the job whose dedupe key is `job_key`, in its latest
    /// turn: for its attempt that ends without finishing to keep with the claim.
    pub(crate) fn of_job(&self, job_key: &str) -> Option<Sent> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .filter(|(k, _)| k.rsplit_once('#').is_some_and(|(job, _)| job == job_key))
            .map(|(_, s)| s)
            .max_by_key(|s| s.turn)
            .cloned()
    }

    /// `key`'s record is written.
    pub(crate) fn forget(&self, key: &str) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.retain(|(k, _)| k != key);
    }

    /// How many are remembered.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(text: &str) -> Sent {
        Sent {
            turn: 1,
            text: text.into(),
            delivered: Delivered {
                pieces: vec![text.into()],
                reacted: false,
            },
            whole: true,
        }
    }

    #[test]
    fn a_reply_is_remembered_until_recorded_and_the_oldest_goes_first() {
        let kept = SentReplies::default();
        kept.remember("a#1".into(), sent("one"));
        assert_eq!(kept.get("a#1"), Some(sent("one")));
        assert_eq!(kept.get("a#2"), None);
        kept.forget("a#1");
        assert!(kept.is_empty());
        for n in 0..KEPT + 3 {
            kept.remember(format!("j{n}#1"), sent("x"));
        }
        assert_eq!(kept.len(), KEPT);
        assert_eq!(kept.get("j0#1"), None, "the oldest were dropped");
        assert!(kept.get(&format!("j{}#1", KEPT + 2)).is_some());
    }

    #[test]
    fn a_jobs_reply_is_found_by_the_job_in_its_latest_turn() {
        let kept = SentReplies::default();
        kept.remember(
            "telegram#1:7#4".into(),
            Sent {
                turn: 4,
                ..sent("four")
            },
        );
        kept.remember(
            "telegram#1:7#5".into(),
            Sent {
                turn: 5,
                ..sent("five")
            },
        );
        kept.remember("telegram#1:77#6".into(), sent("other job"));
        assert_eq!(
            kept.of_job("telegram#1:7").map(|s| s.text),
            Some("five".into())
        );
        assert_eq!(kept.of_job("telegram#1"), None);
        let back: Sent = ReplySent::from(sent("x")).into();
        assert_eq!(back, sent("x"));
    }

    #[test]
    fn the_further_record_of_a_reply_wins() {
        let part = |n: usize| Sent {
            whole: false,
            delivered: Delivered {
                pieces: vec!["p".into(); n],
                reacted: false,
            },
            ..sent("x")
        };
        assert_eq!(further(Some(part(1)), Some(part(2))), Some(part(2)));
        assert_eq!(further(Some(part(2)), Some(part(1))), Some(part(2)));
        assert_eq!(
            further(Some(part(2)), Some(sent("x"))),
            Some(sent("x")),
            "whole is ahead"
        );
        let later = Sent { turn: 2, ..part(1) };
        assert_eq!(further(Some(sent("x")), Some(later.clone())), Some(later));
        assert_eq!(further(None, Some(part(1))), Some(part(1)));
        assert_eq!(further(Some(part(1)), None), Some(part(1)));
    }
}
