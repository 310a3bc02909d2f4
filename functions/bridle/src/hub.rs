//! Routes a running turn's events to the browser request that is waiting for them.
//!
//! The web request subscribes under the job's dedupe key *before* enqueuing; the worker, when
//! it runs that job, emits into the subscription. Nobody listening (a reload, a redelivery after
//! a restart, a closed tab) is fine: the events are dropped and the turn still completes and is
//! persisted.

use engine::{EventSink, TurnEvent};
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

#[derive(Debug, Default)]
pub struct Hub {
    subscribers: Mutex<HashMap<String, UnboundedSender<TurnEvent>>>,
}

impl Hub {
    /// Listen for the events of the job with this key; `None` when someone already listens
    /// (the same message was posted twice).
    pub fn subscribe(&self, key: &str) -> Option<UnboundedReceiver<TurnEvent>> {
        let mut subs = self.subscribers.lock().unwrap();
        if subs.contains_key(key) {
            return None;
        }
        let (tx, rx) = unbounded_channel();
        subs.insert(key.to_owned(), tx);
        Some(rx)
    }

    /// Where the worker sends the events of the job with this key.
    pub fn sink(&self, key: &str) -> HubSink {
        HubSink(self.subscribers.lock().unwrap().get(key).cloned())
    }

    /// The job is over: drop its subscription.
    pub fn forget(&self, key: &str) {
        self.subscribers.lock().unwrap().remove(key);
    }

    /// Forgets the subscription under `key` when dropped, unless [`Unqueued::queued`] was
    /// called first: a post that stops before its job is queued (refused, or cut short because
    /// its client went away while the queue was asked) must not leave its key behind, or every
    /// later send of the same message would be refused as a duplicate of one never received.
    pub fn until_queued<'a>(&'a self, key: &'a str) -> Unqueued<'a> {
        Unqueued {
            hub: self,
            key,
            queued: false,
        }
    }

    /// The server is stopping: tell every request still waiting that its message will be
    /// answered after the restart, and end its stream. Returns how many were waiting.
    pub fn interrupt_all(&self) -> usize {
        let waiting: Vec<_> = self.subscribers.lock().unwrap().drain().collect();
        for (_, tx) in &waiting {
            let _ = tx.send(TurnEvent::Error {
                message: engine::lines::INTERRUPTED.to_owned(),
            });
            let _ = tx.send(TurnEvent::Done {
                end: engine::TurnEnd::Interrupted,
            });
        }
        waiting.len()
    }
}

/// A subscription whose job is not queued yet (see [`Hub::until_queued`]).
#[derive(Debug)]
pub struct Unqueued<'a> {
    hub: &'a Hub,
    key: &'a str,
    queued: bool,
}

impl Unqueued<'_> {
    /// The job is queued: the subscription stays until the worker has run it.
    pub fn queued(mut self) {
        self.queued = true;
    }
}

impl Drop for Unqueued<'_> {
    fn drop(&mut self) {
        if !self.queued {
            self.hub.forget(self.key);
        }
    }
}

/// Sends to the subscriber, if any; never blocks, never fails the turn.
#[derive(Debug)]
pub struct HubSink(Option<UnboundedSender<TurnEvent>>);

impl EventSink for HubSink {
    fn emit(&self, event: TurnEvent) {
        if let Some(tx) = &self.0 {
            let _ = tx.send(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subscription_is_kept_only_once_its_job_is_queued() {
        let hub = Hub::default();
        let _rx = hub.subscribe("web:c.m1").expect("the first send listens");
        drop(hub.until_queued("web:c.m1"));
        let _rx = hub
            .subscribe("web:c.m1")
            .expect("a send never queued leaves no subscription behind");
        hub.until_queued("web:c.m1").queued();
        assert!(
            hub.subscribe("web:c.m1").is_none(),
            "a queued job keeps its subscription: the same message again is a duplicate"
        );
    }
}
