//! Who owns which web conversation, as this process has read it. A conversation's owner and
//! channel are set when it is created and never change (nothing deletes or moves one), so an
//! owner once read is the owner for good, on every instance: a message posted into a
//! conversation its sender was seen to own goes to the queue without reading it again. Only
//! owners read (or created) are kept, never an absence, and at most [`CAPACITY`] of them, the
//! least recently used going first. The worker still checks the owner under the lease (the
//! turn's start read), so this saves a read and decides nothing on its own.

use lru::LruCache;
use std::num::NonZeroUsize;
use std::sync::Mutex;
use transcript::{ConversationId, UserId};

/// How many conversations' owners are kept (about 100 bytes each).
pub const CAPACITY: usize = 4096;

/// The owners of web conversations this process has read or created.
#[derive(Debug)]
pub struct Owners(Mutex<LruCache<ConversationId, UserId>>);

impl Default for Owners {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl Owners {
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self(Mutex::new(LruCache::new(capacity)))
    }

    /// The owner of web conversation `id`, if known here.
    pub fn get(&self, id: &ConversationId) -> Option<UserId> {
        self.0.lock().unwrap().get(id).cloned()
    }

    /// Keep `owner` as the owner of web conversation `id` (read from the store, or just made).
    pub fn remember(&self, id: ConversationId, owner: UserId) {
        self.0.lock().unwrap().put(id, owner);
    }

    pub fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(n: usize) -> ConversationId {
        ConversationId(format!("c{n}"))
    }

    #[test]
    fn an_owner_is_kept_and_the_least_recently_used_goes_first() {
        let owners = Owners::with_capacity(2);
        owners.remember(conv(1), UserId("a".into()));
        owners.remember(conv(2), UserId("b".into()));
        assert_eq!(owners.get(&conv(1)), Some(UserId("a".into())));
        owners.remember(conv(3), UserId("c".into()));
        assert_eq!(owners.len(), 2);
        assert_eq!(owners.get(&conv(2)), None, "the least recently used went");
        assert_eq!(owners.get(&conv(1)), Some(UserId("a".into())));
        assert_eq!(owners.get(&conv(3)), Some(UserId("c".into())));
    }
}
