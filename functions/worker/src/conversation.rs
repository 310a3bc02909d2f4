//! Which conversation a job belongs to. Identity comes from the verified job, never from the
//! model: the conversation is keyed by channel + the platform's conversation key, and belongs
//! to the channel user who started it.

use crate::Worker;
use queue::TurnJob;
use store::StoreError;
use transcript::{Conversation, ConversationId, UserId};

/// The purpose (tool catalogue and prompt) of conversations that arrive through channels.
pub const CHANNEL_PURPOSE: &str = "chat";

impl Worker {
    /// The job's conversation, created on first contact; `None` when it belongs to someone else.
    pub(crate) async fn conversation_for(
        &self,
        job: &TurnJob,
    ) -> Result<Option<ConversationId>, StoreError> {
        let id = ConversationId(format!("{}:{}", job.channel, job.conversation_key));
        let user = UserId(format!("{}:{}", job.channel, job.external_user_id));
        let existing = match self.store.conversation(&id).await? {
            Some(c) => c,
            None => {
                let mut conv =
                    Conversation::new(id.clone(), user.clone(), &job.channel, CHANNEL_PURPOSE);
                conv.created_at_ms = (self.options.clock)();
                crate::planning::ensure_account(self.store.as_ref(), &user, &job.external_user_id)
                    .await?;
                match self.store.create_conversation(&conv).await {
                    Ok(()) => conv,
                    // Created concurrently: read the winner's.
                    Err(StoreError::Conflict { .. }) => self
                        .store
                        .conversation(&id)
                        .await?
                        .ok_or_else(|| StoreError::NotFound { what: id.0.clone() })?,
                    Err(e) => return Err(e),
                }
            }
        };
        if existing.user_id != user {
            tracing::warn!(conversation = %id, "a job from a user who does not own the conversation was dropped");
            return Ok(None);
        }
        Ok(Some(id))
    }
}
