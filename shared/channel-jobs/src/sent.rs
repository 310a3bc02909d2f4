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
//! In memory only: the store is what is down. `bridle serve` is one process, so there this
//! holds until a restart; on Lambda, only when the retry lands in the same warm environment.
//! Bounded (the oldest is dropped past [`KEPT`]): an entry outlives its write only when the
//! record failed.
//!
//! It also remembers a reply cut off part way — some of its pieces went out, then the platform
//! failed or the attempt's deadline passed — so that a retry here sends only the rest
//! ([`channels::Sender::send_from`]).
//!
//! [`ChannelJobs::recording`]: crate::ChannelJobs

use channels::Delivered;
use std::collections::VecDeque;
use std::sync::Mutex;

/// How many unrecorded replies are remembered at most.
pub const KEPT: usize = 256;

/// What an attempt sent of a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    /// The reply's text as it was given to the sender.
    pub text: String,
    pub delivered: Delivered,
    /// Whether all of it went out; else only `delivered` did.
    pub whole: bool,
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
}
