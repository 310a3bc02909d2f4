//! The web chat as an entrance of the one job path. Its identity is the signed-in user the web
//! server put on the job (never the model), its conversation is one that user created, and its
//! sender is the open browser stream: the reply's tokens reached the stream as they were made
//! (the job's sink), so "sending" hands the shown reply back whole, to be recorded as what the
//! user saw. A closed tab loses nothing: the turn runs and is recorded all the same.

use async_trait::async_trait;
use channels::{Delivered, Outgoing, SendError, Sender};
use engine::{EventSink, TurnEvent};
use queue::TurnJob;
use std::sync::Mutex;
use store::{StartRead, Store, StoreError};
use transcript::{ConversationId, UserId};

/// The channel name of web chat jobs. No webhook route has this name, so only the web server
/// enqueues such jobs.
pub const WEB_CHANNEL: &str = "web";

/// The browser stream as a [`Sender`]: no size limit, no reactions, nothing to call.
#[derive(Debug, Default, Clone, Copy)]
pub struct BrowserStream;

#[async_trait]
impl Sender for BrowserStream {
    fn max_chars(&self) -> usize {
        usize::MAX
    }

    fn has_reactions(&self) -> bool {
        false
    }

    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        if sent.pieces.is_empty() {
            sent.pieces.push(reply.text.clone());
        }
        Ok(())
    }
}

/// The web job's user and conversation: the conversation must exist, be a web conversation and
/// belong to the job's user; anything else reads as absent.
pub(crate) async fn owned_conversation(
    store: &dyn Store,
    job: &TurnJob,
) -> Result<Option<(UserId, ConversationId)>, StoreError> {
    let id = ConversationId(job.conversation_key.clone());
    let Some(conv) = store.conversation(&id).await? else {
        return Ok(None);
    };
    if conv.user_id.0 != job.external_user_id || conv.channel != WEB_CHANNEL {
        return Ok(None);
    }
    Ok(Some((conv.user_id, id)))
}

/// The web turn's start, read under the lease: the conversation with its owner's account and
/// next visible position, where the store reads them at once ([`store::TurnWrites`]) or read
/// them with the claim (`claimed`), and the context block's `facts` read beside the claim;
/// `None` (the turn reads them itself) where it does not, or when the conversation is gone or
/// is no longer `user`'s.
pub(crate) async fn turn_read(
    store: &dyn Store,
    id: &ConversationId,
    user: &UserId,
    claimed: Option<StartRead>,
    facts: Option<Result<engine::ContextFacts, String>>,
) -> Result<Option<engine::TurnRead>, StoreError> {
    let Some(read) = crate::claim::start_read(store, id, user, claimed).await? else {
        return Ok(None);
    };
    Ok(read
        .conversation
        .filter(|c| &c.user_id == user)
        .map(|conversation| engine::TurnRead {
            conversation,
            account: Some(read.account),
            next_visible: read.next_visible,
            messages: read.messages,
            facts,
        }))
}

/// Passes a turn's events through but holds its `done` back until the reply is recorded, so a
/// client that reloads on `done` finds the reply in the visible transcript.
pub(crate) struct HoldDone<'a> {
    inner: &'a dyn EventSink,
    done: Mutex<Option<TurnEvent>>,
}

impl<'a> HoldDone<'a> {
    pub(crate) fn new(inner: &'a dyn EventSink) -> Self {
        Self {
            inner,
            done: Mutex::new(None),
        }
    }

    /// Emit the held `done`, if the turn produced one.
    pub(crate) fn release(&self) {
        if let Some(done) = self.done.lock().unwrap().take() {
            self.inner.emit(done);
        }
    }
}

impl EventSink for HoldDone<'_> {
    fn emit(&self, event: TurnEvent) {
        if matches!(event, TurnEvent::Done { .. }) {
            *self.done.lock().unwrap() = Some(event);
        } else {
            self.inner.emit(event);
        }
    }

    fn listening(&self) -> bool {
        self.inner.listening()
    }
}
