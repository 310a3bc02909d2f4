//! The owner's side of a risky MCP call ([`crate::confirm`]): Bridle's page shows the question
//! stored for the call and turns it into an approval, or drops it. Scoped to the signed-in
//! owner: another owner's token, one revoked or expired, and a question answered, expired or
//! never asked all read as not found.

use crate::confirm::{APPROVAL_TTL_MS, approval_key, question_key};
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
    let Some(token) = owned_live(tokens, user, token_id, now_ms).await? else {
        return Ok(None);
    };
    Ok(pending
        .read_pending(&question_key(token_id), hash, now_ms)
        .await?
        .map(|q| Question {
            description: q.description,
            client: token.name,
            expires_at_ms: q.expires_at_ms,
        }))
}

/// The owner's answer to the question `asked` names, as the page showed it (`seen`: the
/// description the person read). Taken once: of two answers at once, one finds it.
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
    if owned_live(tokens, user, token_id, now_ms).await?.is_none() {
        return Ok(Answered::NotFound);
    }
    let Some(question) = pending
        .take_pending(&question_key(token_id), hash, action_id, now_ms)
        .await?
    else {
        return Ok(Answered::NotFound);
    };
    if question.description != seen {
        // Put back as it was: the person answers what they read, or nothing.
        pending.put_pending(&question).await?;
        return Ok(Answered::Changed);
    }
    if !approve {
        tracing::info!(%token_id, "a risky MCP call declined on the page");
        return Ok(Answered::Declined);
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
