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
