//! Which conversation a job belongs to. A linked sender's conversation is per channel chat and
//! per user (`{channel}:{conversation key}@{user}`), owned by the bound user: linking the
//! account to someone else starts a fresh conversation and never shows them the earlier
//! owner's history. Before linking, the harness's replies are recorded in the chat's *lobby*
//! (`{channel}:{conversation key}`), which belongs to no user and never reaches the model.
//!
//! A lobby holds what an unknown sender wrote, so it is not kept for ever: it expires
//! [`JobOptions::lobby_retention`](crate::JobOptions::lobby_retention) (30 days by default,
//! `BRIDLE_LOBBY_RETENTION_DAYS`) after its last message — row, visible entries and any
//! messages ([`store::Retention`]: DynamoDB's TTL, a periodic sweep on SQLite). Linking does not
//! keep it: the linked sender's words go to their own conversation from then on, which never
//! expires; the lobby keeps only the exchanges before linking and expires as any other.

use crate::ChannelJobs;
use queue::TurnJob;
use std::time::Duration;
use store::{Account, StoreError};
use transcript::{Conversation, ConversationId, UserId};

/// The purpose (tool catalogue and prompt) of conversations that arrive through channels.
pub const CHANNEL_PURPOSE: &str = "chat";

/// How long an unknown sender's lobby is kept after its last message: 30 days.
pub const DEFAULT_LOBBY_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);

/// `BRIDLE_LOBBY_RETENTION_DAYS`: days from 1 to 3650; unset or blank is
/// [`DEFAULT_LOBBY_RETENTION`]. The error is the sentence to report.
pub fn lobby_retention_from_setting(days: Option<&str>) -> Result<Duration, String> {
    let Some(days) = days.map(str::trim).filter(|d| !d.is_empty()) else {
        return Ok(DEFAULT_LOBBY_RETENTION);
    };
    match days.parse::<u64>() {
        Ok(n @ 1..=3650) => Ok(Duration::from_secs(n * 24 * 3600)),
        _ => Err(format!(
            "BRIDLE_LOBBY_RETENTION_DAYS={days:?} is not a whole number of days from 1 to 3650 \
             (how long an unknown sender's messages are kept)"
        )),
    }
}

/// The bound user's conversation in this chat, created on first contact.
pub async fn user_conversation(
    jobs: &ChannelJobs,
    job: &TurnJob,
    user: &UserId,
) -> Result<ConversationId, StoreError> {
    user_conversation_row(jobs, job, user, None, None)
        .await
        .map(|c| c.conversation.id)
}

/// The id of the bound user's conversation in this chat (it names the user).
pub(crate) fn user_conversation_id(job: &TurnJob, user: &UserId) -> ConversationId {
    ConversationId(format!(
        "{}:{}@{}",
        job.channel,
        escape_key(&job.conversation_key),
        user.0
    ))
}

/// [`user_conversation`], as read (or created): read under the conversation's lease, the turn
/// starts from it.
pub(crate) async fn user_conversation_row(
    jobs: &ChannelJobs,
    job: &TurnJob,
    user: &UserId,
    claimed: Option<store::StartRead>,
    facts: Option<Result<engine::ContextFacts, String>>,
) -> Result<engine::TurnRead, StoreError> {
    let id = user_conversation_id(job, user);
    // Read with the user's account where the store reads both at once (the turn needs it too),
    // unless the claim read them (`claimed`).
    let both = crate::claim::start_read(jobs.store.as_ref(), &id, user, claimed).await?;
    let (read, account, next_visible, messages) = match both {
        Some(read) => (
            read.conversation,
            Some(read.account),
            read.next_visible,
            read.messages,
        ),
        None => (jobs.store.conversation(&id).await?, None, None, None),
    };
    // The account is made on first contact only (before the conversation exists, so a crash
    // in between leaves no conversation without its account), not on every message.
    let (conv, account, next_visible, messages) = match read {
        Some(conv) => (conv, account, next_visible, messages),
        None => {
            ensure_account(jobs, user, &job.external_user_id).await?;
            (
                ensure(jobs, &id, user, &job.channel).await?,
                None,
                None,
                None,
            )
        }
    };
    if &conv.user_id != user {
        // The id names the user, so only a corrupt row gets here; never answer into it.
        return Err(StoreError::Conflict {
            what: format!("conversation {id} of another user"),
        });
    }
    Ok(engine::TurnRead {
        conversation: conv,
        account,
        next_visible,
        messages,
        facts,
    })
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
    // A lobby past its date is gone before it is looked at (SQLite deletes it now; on DynamoDB
    // it reads as absent), so a sender who returns later starts afresh.
    keep_lobby(jobs, &id).await?;
    let conv = ensure(jobs, &id, &owner, &job.channel).await?;
    if conv.user_id != owner {
        // Only a corrupt row gets here (keys are escaped); never answer into it.
        return Err(StoreError::Conflict {
            what: format!("lobby {id} owned by another"),
        });
    }
    // A lobby just created gets its date too (a crash before this leaves it undated until the
    // sender's next message).
    keep_lobby(jobs, &id).await?;
    Ok(id)
}

/// Move the lobby's date to [`JobOptions::lobby_retention`](crate::JobOptions::lobby_retention)
/// from now, for everything in it — called again after each exchange is recorded, so the
/// entries just written expire too.
pub async fn keep_lobby(jobs: &ChannelJobs, lobby: &ConversationId) -> Result<(), StoreError> {
    let now = (jobs.options.clock)();
    let keep = i64::try_from(jobs.options.lobby_retention.as_millis()).unwrap_or(i64::MAX);
    jobs.store
        .expire_conversation(lobby, now.saturating_add(keep), now)
        .await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lobby_retention_is_whole_days_thirty_by_default() {
        let day = Duration::from_secs(86_400);
        assert_eq!(lobby_retention_from_setting(None), Ok(30 * day));
        assert_eq!(lobby_retention_from_setting(Some(" ")), Ok(30 * day));
        assert_eq!(lobby_retention_from_setting(Some("7")), Ok(7 * day));
        for bad in ["0", "-1", "1.5", "3651", "a week"] {
            let problem = lobby_retention_from_setting(Some(bad)).unwrap_err();
            assert!(
                problem.starts_with("BRIDLE_LOBBY_RETENTION_DAYS="),
                "{problem}"
            );
        }
    }
}
