//! Which conversation a job belongs to. A linked sender's conversation is per channel chat and
//! per user (`{channel}:{conversation key}@{user}`), owned by the bound user: linking the
//! account to someone else starts a fresh conversation and never shows them the earlier
//! owner's history. Before linking, the harness's replies are recorded in the chat's *lobby*
//! (`{channel}:{conversation key}`), which belongs to no user and never reaches the model.

use crate::ChannelJobs;
use queue::TurnJob;
use store::{Account, StoreError};
use transcript::{Conversation, ConversationId, UserId};

/// The purpose (tool catalogue and prompt) of conversations that arrive through channels.
pub const CHANNEL_PURPOSE: &str = "chat";

/// The bound user's conversation in this chat, created on first contact.
pub async fn user_conversation(
    jobs: &ChannelJobs,
    job: &TurnJob,
    user: &UserId,
) -> Result<ConversationId, StoreError> {
    let id = ConversationId(format!(
        "{}:{}@{}",
        job.channel,
        escape_key(&job.conversation_key),
        user.0
    ));
    // The account is looked at on first contact only (before the conversation exists, so a
    // crash in between leaves no conversation without its account), not on every message.
    let conv = match jobs.store.conversation(&id).await? {
        Some(conv) => conv,
        None => {
            ensure_account(jobs, user, &job.external_user_id).await?;
            ensure(jobs, &id, user, &job.channel).await?
        }
    };
    if &conv.user_id != user {
        // The id names the user, so only a corrupt row gets here; never answer into it.
        return Err(StoreError::Conflict {
            what: format!("conversation {id} of another user"),
        });
    }
    Ok(id)
}

/// The chat's lobby: where replies to a sender that is not linked are recorded.
pub async fn lobby_conversation(
    jobs: &ChannelJobs,
    job: &TurnJob,
) -> Result<ConversationId, StoreError> {
    let id = ConversationId(format!(
        "{}:{}",
        job.channel,
        escape_key(&job.conversation_key)
    ));
    let owner = UserId(format!("unlinked:{}", id.0));
    let conv = ensure(jobs, &id, &owner, &job.channel).await?;
    if conv.user_id != owner {
        // Only a corrupt row gets here (keys are escaped); never answer into it.
        return Err(StoreError::Conflict {
            what: format!("lobby {id} owned by another"),
        });
    }
    Ok(id)
}

/// A platform's conversation key as it goes into a conversation id: `%` and `@` escaped, so no
/// key can end in `@<user>` and name another owner's conversation (`room@local` is
/// `room%40local`). Keys without either (every platform's usual ids) are unchanged.
pub fn escape_key(key: &str) -> String {
    if !key.contains(['%', '@']) {
        return key.to_owned();
    }
    key.replace('%', "%25").replace('@', "%40")
}

async fn ensure(
    jobs: &ChannelJobs,
    id: &ConversationId,
    user: &UserId,
    channel: &str,
) -> Result<Conversation, StoreError> {
    if let Some(c) = jobs.store.conversation(id).await? {
        return Ok(c);
    }
    let mut conv = Conversation::new(id.clone(), user.clone(), channel, CHANNEL_PURPOSE);
    conv.created_at_ms = (jobs.options.clock)();
    match jobs.store.create_conversation(&conv).await {
        Ok(()) => Ok(conv),
        // Created concurrently: read the winner's.
        Err(StoreError::Conflict { .. }) => jobs
            .store
            .conversation(id)
            .await?
            .ok_or_else(|| StoreError::NotFound { what: id.0.clone() }),
        Err(e) => Err(e),
    }
}

/// A linked user gets an active account on first contact (the product UI would create it);
/// an existing one — paused or not — is left alone.
async fn ensure_account(
    jobs: &ChannelJobs,
    user: &UserId,
    display_name: &str,
) -> Result<(), StoreError> {
    if jobs.store.account(user).await?.is_none() {
        jobs.store
            .put_account(&Account {
                created_at_ms: (jobs.options.clock)(),
                ..Account::new(user.clone(), display_name)
            })
            .await?;
    }
    Ok(())
}
