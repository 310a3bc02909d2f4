//! How many reply streams one user may hold open at once. Each message posted to the web chat
//! answers with a stream that stays open until its turn is done; turns in one conversation run
//! one after another, so a script posting within the write rate into one slow conversation
//! would pile up open streams (connection slots, memory) until nobody else could connect. Past
//! the cap ([`DEFAULT_PER_USER`], or `BRIDLE_STREAMS_PER_USER` on the local server) a message
//! is refused before it is queued — 429, nothing kept — and the client may send it again once a
//! stream has ended.
//!
//! Counted in this process, which on the local server is all of them. The web Lambda serves one
//! request per environment, so there each stream also holds one of the user's [`cap`] slots in
//! the store ([`Shared`]), so that one user cannot hold more than [`cap`] invocations, each
//! waiting up to its turn budget (269 s) behind a slow turn. Slot `k` is a lease (`store::Leases`) on the name
//! `streams:<user>#<k>` (no channel is called `streams`, so no conversation has such an id),
//! taken for at most as long as the function may run: one conditional write for a free slot,
//! up to [`cap`] when all are held. It is given back as the stream's last step (one delete),
//! before an answer that opens no stream, or, for a stream whose client went away, once its
//! turn is done (the turn runs on: a client that hangs up after `queued` does not free its
//! place for another turn at once); if the environment froze first, its lease lapses.
//!
//! [`cap`]: OpenStreams::cap

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{Lease, Leases, StoreError};
use transcript::{ConversationId, UserId};

/// Streams one user may hold open at once, unless configured otherwise.
pub const DEFAULT_PER_USER: usize = 8;

/// The open streams per user, and how many each may hold.
#[derive(Debug)]
pub struct OpenStreams {
    cap: usize,
    open: Mutex<HashMap<UserId, usize>>,
    shared: Option<Shared>,
}

impl Default for OpenStreams {
    fn default() -> Self {
        Self::with_cap(DEFAULT_PER_USER)
    }
}

/// The user's slots in the store, for processes that serve one request at a time.
#[derive(Clone)]
pub struct Shared {
    pub leases: Arc<dyn Leases>,
    /// The longest a stream may live: its slot's lease lapses after it.
    pub hold: Duration,
    pub clock: budget::Clock,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("hold", &self.hold)
            .finish_non_exhaustive()
    }
}

/// One open stream of a user; dropped with the stream (its turn done, or the client gone).
#[derive(Debug)]
pub struct Slot {
    streams: Arc<OpenStreams>,
    user: UserId,
    /// Its slot in the store, while held.
    held: Option<Held>,
}

/// A slot in the store: the lease's name and holder.
#[derive(Debug)]
struct Held {
    name: ConversationId,
    holder: String,
}

impl Shared {
    /// The name of `user`'s slot `k`. Not a conversation: no channel is called `streams`.
    fn name(user: &UserId, k: usize) -> ConversationId {
        ConversationId(format!("streams:{user}#{k}"))
    }

    /// One of `user`'s `cap` slots, looked for from a random one (a conditional write each);
    /// `None` when all are held.
    async fn hold(&self, user: &UserId, cap: usize) -> Result<Option<Held>, StoreError> {
        let id = uuid::Uuid::new_v4();
        let (holder, first) = (id.to_string(), (id.as_u128() % cap as u128) as usize);
        let now = (self.clock)();
        let until = now + self.hold.as_millis() as i64;
        for i in 0..cap {
            let name = Self::name(user, (first + i) % cap);
            if matches!(
                self.leases
                    .acquire_lease(&name, &holder, now, until)
                    .await?,
                Lease::Held
            ) {
                return Ok(Some(Held { name, holder }));
            }
        }
        Ok(None)
    }
}

impl OpenStreams {
    /// Each user may hold `cap` streams at once (at least one).
    pub fn with_cap(cap: usize) -> Self {
        OpenStreams {
            cap: cap.max(1),
            open: Mutex::default(),
            shared: None,
        }
    }

    /// As [`OpenStreams::with_cap`], each stream also holding one of the user's slots in the
    /// store (see the module docs).
    pub fn shared(cap: usize, shared: Shared) -> Self {
        OpenStreams {
            shared: Some(shared),
            ..Self::with_cap(cap)
        }
    }

    /// A slot for one more of `user`'s streams, in this process and (when shared) in the
    /// store; `None` when they hold the cap.
    pub async fn take(self: &Arc<Self>, user: &UserId) -> Result<Option<Slot>, StoreError> {
        let Some(mut slot) = self.open(user) else {
            return Ok(None);
        };
        if let Some(shared) = &self.shared {
            match shared.hold(user, self.cap).await? {
                Some(held) => slot.held = Some(held),
                None => return Ok(None),
            }
        }
        Ok(Some(slot))
    }

    /// How many streams one user may hold open at once.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// A slot for one more of `user`'s streams; `None` when they hold the cap.
    pub fn open(self: &Arc<Self>, user: &UserId) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let n = open.entry(user.clone()).or_default();
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            streams: self.clone(),
            user: user.clone(),
            held: None,
        })
    }

    /// How many of `user`'s streams are open.
    pub fn of(&self, user: &UserId) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(user).copied().unwrap_or(0)
    }
}

impl Slot {
    /// Give the slot back: in the store now (the stream's last step, or before an answer that
    /// opens no stream, so a Lambda invocation does not end first), in this process as it
    /// drops. Cut short, the drop gives it back on the side.
    pub async fn release(mut self) {
        if let (Some(held), Some(shared)) = (&self.held, &self.streams.shared) {
            give_back(shared, held).await;
            self.held = None;
        }
    }
}

async fn give_back(shared: &Shared, held: &Held) {
    if let Err(e) = shared.leases.release_lease(&held.name, &held.holder).await {
        tracing::warn!(error = %e, slot = %held.name, "could not give a stream's slot back; it lapses");
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Dropped unreleased (the client went away): give the store's slot back on the side.
        // Best effort: an environment frozen first leaves it to lapse.
        if let (Some(held), Some(shared), Ok(runtime)) = (
            self.held.take(),
            self.streams.shared.clone(),
            tokio::runtime::Handle::try_current(),
        ) {
            runtime.spawn(async move { give_back(&shared, &held).await });
        }
        let mut open = self.streams.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.remove(&self.user);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_holds_at_most_the_cap_and_a_closed_stream_frees_its_slot() {
        let streams = Arc::new(OpenStreams::default());
        assert_eq!(streams.cap(), DEFAULT_PER_USER);
        let (ana, bo) = (UserId::from("ana"), UserId::from("bo"));
        let mut held: Vec<Slot> = (0..DEFAULT_PER_USER)
            .map(|_| streams.open(&ana).expect("under the cap"))
            .collect();
        assert!(streams.open(&ana).is_none(), "at the cap");
        assert!(streams.open(&bo).is_some(), "another user is not held up");
        held.pop();
        assert_eq!(streams.of(&ana), DEFAULT_PER_USER - 1);
        assert!(streams.open(&ana).is_some());
        held.clear();
        assert_eq!(streams.of(&ana), 0);
    }

    #[test]
    fn no_channel_names_a_slot() {
        let slot = Shared::name(&UserId::from("ana"), 3);
        assert!(slot.0.starts_with("streams:"));
        assert!(
            !crate::channel_setup::CHANNEL_NAMES.contains(&"streams")
                && channel_jobs::web::WEB_CHANNEL != "streams",
            "a slot's lease must never be a conversation's"
        );
    }

    #[test]
    fn the_cap_is_the_configured_one_and_never_zero() {
        let streams = Arc::new(OpenStreams::with_cap(64));
        let ana = UserId::from("ana");
        let held: Vec<Slot> = (0..64).map(|_| streams.open(&ana).unwrap()).collect();
        assert!(streams.open(&ana).is_none());
        drop(held);
        let one = Arc::new(OpenStreams::with_cap(0));
        let _slot = one.open(&ana).expect("a cap of 0 is read as 1");
        assert!(one.open(&ana).is_none());
    }
}
