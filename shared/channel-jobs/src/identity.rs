//! Who is writing. Identity comes from the verified sender (channel + external id) and the
//! store, never from the model: a link code found in the text is redeemed (one conditional
//! write) and binds the account; otherwise the bound user is looked up.

use channels::link_code;
use queue::TurnJob;
use store::{Store, StoreError};
use transcript::UserId;

/// Link codes tried per message.
pub const MAX_CODES_PER_MESSAGE: usize = 2;

/// The sender of a job, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The account is bound to this user: run the turn as them.
    Bound(UserId),
    /// The message carried a live link code: the account is now bound to this user.
    Linked(UserId),
    /// The message was a link code that is unknown, expired or already used; `bound` is the
    /// user the account already belongs to, if any.
    StaleCode { bound: Option<UserId> },
    /// Nobody we know, and no code: the onboarding reply.
    Unknown,
}

impl Resolved {
    /// The user whose conversation the answer belongs to, if the account is bound.
    pub fn user(&self) -> Option<&UserId> {
        match self {
            Resolved::Bound(u) | Resolved::Linked(u) => Some(u),
            Resolved::StaleCode { bound } => bound.as_ref(),
            Resolved::Unknown => None,
        }
    }
}

/// Redeem a link code in the text, or look the account up.
///
/// The first [`MAX_CODES_PER_MESSAGE`] code-shaped tokens are tried (the first live one wins). A message that is only a code
/// that did not redeem is a failed linking attempt and is answered as such; so is any
/// code-shaped token from an account that is not bound (it is most likely a mistyped code). A
/// bound account whose longer message merely contains a code-shaped word is answered normally.
pub async fn resolve(
    store: &dyn Store,
    job: &TurnJob,
    now_ms: i64,
) -> Result<Resolved, StoreError> {
    // At most two code-shaped words are tried per message: a message stuffed with guesses
    // costs the same as an honest one, and cannot search the code space.
    let codes: Vec<_> = link_code::find(&job.text)
        .into_iter()
        .take(MAX_CODES_PER_MESSAGE)
        .collect();
    // Channel names never hold `#`, so this names one account.
    let redeemer = format!("{}#{}", job.channel, job.external_user_id);
    for code in &codes {
        if let Some(user) = store.consume_link_code(code, &redeemer, now_ms).await? {
            store
                .bind_identity(&job.channel, &job.external_user_id, &user, now_ms)
                .await?;
            tracing::info!(channel = %job.channel, user = %user.0, "channel account linked");
            return Ok(Resolved::Linked(user));
        }
    }
    let bound = store.identity(&job.channel, &job.external_user_id).await?;
    if !codes.is_empty() && (bound.is_none() || link_code::is_only_a_code(&job.text)) {
        return Ok(Resolved::StaleCode { bound });
    }
    Ok(match bound {
        Some(user) => Resolved::Bound(user),
        None => Resolved::Unknown,
    })
}
