//! Signing secrets read again when a delivery's signature fails. On Lambda they are read once
//! per cold start (`BRIDLE_SECRETS_ARN`), and a warm instance lives for hours: after the
//! operator rotates a platform's signing secret in Secrets Manager, every delivery signed with
//! the new one would be refused (401) until the instances happened to be replaced. Now a failed
//! signature reads the secrets again and checks once more with what they hold — at most once per
//! [`REKEY_EVERY`] per instance, whoever sends the failures, so junk cannot make the webhook
//! call Secrets Manager for every request.

use channels::Channel;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

/// The channels, by name.
pub(crate) type Channels = HashMap<&'static str, Arc<dyn Channel>>;

/// The channels built again from the secrets as they are now; `Err` is one line for the log
/// (it names no secret value).
pub type Fresh = Pin<Box<dyn Future<Output = Result<Vec<Arc<dyn Channel>>, String>> + Send>>;

/// How to read the secrets again: called at most once per [`REKEY_EVERY`].
pub type ReadAgain = Arc<dyn Fn() -> Fresh + Send + Sync>;

/// The least time between two reads of the secrets by one instance.
pub const REKEY_EVERY: Duration = Duration::from_secs(60);

/// How long a read of the secrets may take before the request goes on without it.
pub const REKEY_DEADLINE: Duration = Duration::from_secs(2);

/// The reader and when it last started (Unix ms of the request that started it).
pub(crate) struct Rekey {
    read: ReadAgain,
    last_ms: AtomicI64,
}

impl Rekey {
    pub(crate) fn new(read: ReadAgain) -> Self {
        Self {
            read,
            last_ms: AtomicI64::new(i64::MIN),
        }
    }

    /// Whether a read may start at `now_ms`: none started in the last [`REKEY_EVERY`]. Of
    /// requests failing at once, one wins.
    fn may_read(&self, now_ms: i64) -> bool {
        let every_ms = REKEY_EVERY.as_millis() as i64;
        let last = self.last_ms.load(Ordering::SeqCst);
        if last != i64::MIN && now_ms.saturating_sub(last) < every_ms {
            return false;
        }
        self.last_ms
            .compare_exchange(last, now_ms, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// The channels as the secrets hold them now, if a read may start at `now_ms` and succeeds.
    pub(crate) async fn read(&self, now_ms: i64) -> Option<Channels> {
        if !self.may_read(now_ms) {
            return None;
        }
        // A deadline, as every outside call has: the request waits on it (a platform retries
        // one not answered in its few seconds, Slack's 3).
        let read = tokio::time::timeout(REKEY_DEADLINE, (self.read)())
            .await
            .unwrap_or_else(|_| Err("the secrets store did not answer in time".to_owned()));
        match read {
            Ok(fresh) if !fresh.is_empty() => {
                let fresh: Channels = fresh.into_iter().map(|c| (c.name(), c)).collect();
                let mut names: Vec<&str> = fresh.keys().copied().collect();
                names.sort_unstable();
                tracing::info!(
                    channels = ?names,
                    "a signature failed: the signing secrets were read again"
                );
                Some(fresh)
            }
            Ok(_) => {
                tracing::warn!(
                    "a signature failed, and the secrets read again configure no channel; the ones read before stay"
                );
                None
            }
            Err(problem) => {
                tracing::warn!(
                    problem,
                    "a signature failed, and the signing secrets could not be read again; the ones read before stay"
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secrets store that never answers holds the request for [`REKEY_DEADLINE`], not for
    /// the function's whole timeout: the channels read before stay.
    #[tokio::test]
    async fn a_read_that_never_answers_gives_up_at_its_deadline() {
        let never: ReadAgain = Arc::new(|| Box::pin(std::future::pending()));
        let rekey = Rekey::new(never);
        let started = std::time::Instant::now();
        assert!(rekey.read(0).await.is_none());
        let waited = started.elapsed();
        assert!(
            waited >= REKEY_DEADLINE && waited < REKEY_DEADLINE + Duration::from_secs(2),
            "{waited:?}"
        );
    }
}
