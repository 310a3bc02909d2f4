//! How many reply streams one user may hold open at once. Each message posted to the web chat
//! answers with a stream that stays open until its turn is done; turns in one conversation run
//! one after another, so a script posting within the write rate into one slow conversation
//! would pile up open streams (connection slots, memory) until nobody else could connect. Past
//! the cap ([`DEFAULT_PER_USER`], or `BRIDLE_STREAMS_PER_USER` on the local server) a message
//! is refused before it is queued — 429, nothing kept — and the client may send it again once a
//! stream has ended. Counted per process: the one local server, or one web Lambda environment.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use transcript::UserId;

/// Streams one user may hold open at once, unless configured otherwise.
pub const DEFAULT_PER_USER: usize = 8;

/// The open streams per user, and how many each may hold.
#[derive(Debug)]
pub struct OpenStreams {
    cap: usize,
    open: Mutex<HashMap<UserId, usize>>,
}

impl Default for OpenStreams {
    fn default() -> Self {
        Self::with_cap(DEFAULT_PER_USER)
    }
}

/// One open stream of a user; dropped with the stream (its turn done, or the client gone).
#[derive(Debug)]
pub struct Slot {
    streams: Arc<OpenStreams>,
    user: UserId,
}

impl OpenStreams {
    /// Each user may hold `cap` streams at once (at least one).
    pub fn with_cap(cap: usize) -> Self {
        OpenStreams {
            cap: cap.max(1),
            open: Mutex::default(),
        }
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
        })
    }

    /// How many of `user`'s streams are open.
    pub fn of(&self, user: &UserId) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(user).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
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
