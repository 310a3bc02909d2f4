//! The owner's side of a risky MCP call ([`crate::confirm`]): Bridle's page shows the question
//! stored for the call and turns it into an approval, or drops it. Scoped to the signed-in
//! owner: another owner's token, one revoked or expired, and a question answered, expired or
//! never asked all read as not found.

use crate::confirm::{APPROVAL_TTL_MS, approval_key, token_conversation};
use store::{Confirmations, McpToken, Pending, StoreError, Tokens};
use transcript::UserId;

/// A question as the page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// What the call would do, built from the database when it was made.
    pub description: String,
    /// The token's name ("Claude Desktop at home").
    pub client: String,
    pub expires_at_ms: i64,
}

/// What became of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// The call runs when the client makes it again (within [`APPROVAL_TTL_MS`]).
    Approved,
    /// The question is gone; the call, made again, asks again.
    Declined,
    /// The call was made again since the page was read and would now do something else: the
    /// question stays, to be read again.
    Changed,
    NotFound,
}

/// Which question: call `hash` of `user`'s token `token_id` (as the page's address names them).
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    pub user: &'a UserId,
    pub token_id: &'a str,
    pub hash: &'a str,
}

/// Whether `token_id` and `hash` have the shapes Bridle makes ([`crate::new_token_id`],
/// [`engine::call_hash`]): anything else is no question, and is not looked up.
pub fn may_be_asked(token_id: &str, hash: &str) -> bool {
    let hex = |s: &str, len: usize| {
        s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    token_id.strip_prefix("tok_").is_some_and(|t| hex(t, 12)) && hex(hash, 64)
}

/// The token `token_id` when it is `user`'s and live.
async fn owned_live(
    tokens: &dyn Tokens,
    user: &UserId,
    token_id: &str,
    now_ms: i64,
) -> Result<Option<McpToken>, StoreError> {
    Ok(tokens
        .token(token_id)
        .await?
        .filter(|t| &t.user == user && t.is_live(now_ms)))
}

/// The question waiting for the call `asked` names.
pub async fn question(
    tokens: &dyn Tokens,
    pending: &dyn Confirmations,
    asked: Asked<'_>,
    now_ms: i64,
) -> Result<Option<Question>, StoreError> {
    let Asked {
        user,
        token_id,
        hash,
    } = asked;
    if !may_be_asked(token_id, hash) {
        return Ok(None);
    }
    let Some(token) = owned_live(tokens, user, token_id, now_ms).await? else {
        return Ok(None);
    };
    Ok(pending
        .read_pending(&token_conversation(token_id), hash, now_ms)
        .await?
        .map(|q| Question {
            description: q.description,
            client: token.name,
            expires_at_ms: q.expires_at_ms,
        }))
}

/// The owner's answer to the question `asked` names, as the page showed it (`seen`: the
/// description the person read; an approval is of that, a decline of whatever is asked).
/// Taken once: of two answers at once, one finds it.
pub async fn answer(
    tokens: &dyn Tokens,
    pending: &dyn Confirmations,
    asked: Asked<'_>,
    seen: &str,
    approve: bool,
    action_id: &str,
    now_ms: i64,
) -> Result<Answered, StoreError> {
    let Asked {
        user,
        token_id,
        hash,
    } = asked;
    if !may_be_asked(token_id, hash) || owned_live(tokens, user, token_id, now_ms).await?.is_none()
    {
        return Ok(Answered::NotFound);
    }
    let question = pending
        .take_pending(&token_conversation(token_id), hash, action_id, now_ms)
        .await?;
    if !approve {
        // A no needs no comparing: the question goes, and so does an approval of the same
        // call given a moment before (from another tab), so "declined" holds.
        let approval = pending
            .take_pending(&approval_key(token_id), hash, action_id, now_ms)
            .await?;
        if question.is_none() && approval.is_none() {
            return Ok(Answered::NotFound);
        }
        tracing::info!(%token_id, "a risky MCP call declined on the page");
        return Ok(Answered::Declined);
    }
    let Some(question) = question else {
        return Ok(Answered::NotFound);
    };
    if question.description != seen {
        // Put back as it was: the person approves what they read, or nothing.
        pending.put_pending(&question).await?;
        return Ok(Answered::Changed);
    }
    pending
        .put_pending(&Pending {
            conversation: approval_key(token_id),
            hash: hash.to_owned(),
            created_on_action: action_id.to_owned(),
            description: question.description,
            expires_at_ms: now_ms + APPROVAL_TTL_MS,
        })
        .await?;
    tracing::info!(%token_id, "a risky MCP call approved on the page");
    Ok(Answered::Approved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_of_bridles_shapes_are_looked_up() {
        let token = crate::new_token_id();
        let hash = engine::call_hash("cancel_event", &serde_json::json!({"event_id": "ev_1"}));
        assert!(may_be_asked(&token, &hash));
        assert!(!may_be_asked("..", &hash));
        assert!(!may_be_asked(&token, "conversations"));
        assert!(!may_be_asked(&format!("{token}0"), &hash));
        assert!(!may_be_asked(&token, &hash.to_uppercase()));
        assert!(!may_be_asked(&token, &"a".repeat(3000)));
    }
}
