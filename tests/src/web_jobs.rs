//! The one job path for tests that drive the engine as the web chat does: a [`ChannelJobs`]
//! whose only sender is the browser stream, on a clock the test can move.

use channel_jobs::web::{BrowserStream, WEB_CHANNEL};
use channel_jobs::{ChannelJobs, JobOptions};
use engine::Engine;
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use store::Store;

/// Web jobs on `engine` and `store`; the clock starts at `clock`'s value and follows it.
pub fn web_jobs(engine: Arc<Engine>, store: Arc<dyn Store>, clock: Arc<AtomicI64>) -> ChannelJobs {
    let mut senders: HashMap<String, Arc<dyn channels::Sender>> = HashMap::new();
    senders.insert(WEB_CHANNEL.into(), Arc::new(BrowserStream));
    ChannelJobs {
        engine,
        store,
        senders,
        options: JobOptions {
            clock: Arc::new(move || clock.load(Ordering::SeqCst)),
            metrics: metrics::Metrics::off(),
            ..JobOptions::default()
        },
    }
}

/// A web chat message from `user` in `conversation`, as the web server enqueues it.
pub fn web_job(conversation: &str, user: &str, message_id: &str, text: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: WEB_CHANNEL.into(),
        message_id: message_id.into(),
        conversation_key: conversation.into(),
        external_user_id: user.into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    }
}
