use crate::StoreError;
use async_trait::async_trait;
use serde::Serialize;
use transcript::UserId;

/// A channel account bound to a user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Binding {
    pub channel: String,
    pub external_id: String,
    pub user: UserId,
    pub bound_at_ms: i64,
}

/// Who a channel account belongs to, and the one-time codes that link an account to a user.
///
/// Linking: a signed-in user asks for a code ([`create_link_code`](Self::create_link_code)),
/// sends it from the channel account, and the job redeems it
/// ([`consume_link_code`](Self::consume_link_code)) and binds the account to that user, if it
/// is still bound as the job read it ([`bind_identity_if`](Self::bind_identity_if)). From then
/// on the channel's messages run as that user ([`identity`](Self::identity)).
///
/// A code is live while `now_ms < expires_at_ms`: from `expires_at_ms` on it can be neither
/// redeemed nor block a new code of the same string. Times are the caller's clock, as with
/// [`JobClaims`](crate::JobClaims); stores that delete expired records by themselves (DynamoDB
/// TTL) only ever remove records this rule already treats as absent.
///
/// `channel` is a channel name such as `whatsapp` or `telegram` and never contains `#`;
/// `external_id` is the platform's id of the account (a phone number, a chat id) and may hold
/// any character.
#[async_trait]
pub trait Identities: Send + Sync {
    /// Store a new link code for `user`, live until `expires_at_ms`.
    ///
    /// [`StoreError::Conflict`] when the code exists and is live at `now_ms`, whether redeemed
    /// or not (pick another code); the stored code is left alone. An expired code of the same
    /// string is replaced, with its redemption forgotten.
    async fn create_link_code(
        &self,
        code: &str,
        user: &UserId,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError>;

    /// [`Identities::create_link_code`] of a code only the channel account `redeemer` may
    /// redeem (a move code, made for the one sender it was shown to): to any other account it
    /// is as one redeemed already, and trying it changes nothing, so nobody else in a group
    /// chat can use it up.
    async fn create_link_code_for(
        &self,
        code: &str,
        user: &UserId,
        redeemer: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError>;

    /// Redeem a code for the channel account `redeemer` (`{channel}#{external_id}`): the user
    /// it was created for, or `None` when it is unknown, expired at `now_ms`, or already
    /// redeemed by (or made for) another account. One conditional write, so of any number of concurrent
    /// redemptions by different accounts exactly one gets the user.
    ///
    /// Redeeming again for the same account while the code is live gets the user again: a job
    /// that redeemed the code and died before binding the account can be retried.
    async fn consume_link_code(
        &self,
        code: &str,
        redeemer: &str,
        now_ms: i64,
    ) -> Result<Option<UserId>, StoreError>;

    /// When `code` was first redeemed (`now_ms` of its first [`consume_link_code`]
    /// (Self::consume_link_code)), whether or not it is live; `None` when it is unknown or was
    /// never redeemed.
    async fn link_code_redeemed_at(&self, code: &str) -> Result<Option<i64>, StoreError>;

    /// When `code` stops being live (its `expires_at_ms`), whether or not it was redeemed;
    /// `None` when it is unknown. A code's lifetime is fixed when it is made, so this also
    /// tells when it was made (how a code made before its owner signed out everywhere is told
    /// from one made after).
    async fn link_code_expires_at(&self, code: &str) -> Result<Option<i64>, StoreError>;

    /// Bind the account `external_id` on `channel` to `user`, recording `now_ms` as the time.
    ///
    /// An account belongs to one user at a time: binding an already bound account moves it to
    /// the new user (re-linking), and the earlier binding is gone. Binding it to the user it
    /// already belongs to is harmless.
    async fn bind_identity(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// As [`bind_identity`](Self::bind_identity), only while the account is still bound to
    /// `was` (`None`: to nobody), which its caller read before deciding, or to `user` already
    /// (the same write tried again): a [`StoreError::Conflict`], and nothing written, when
    /// another linking or an unlink came in between. One conditional write.
    async fn bind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        was: Option<&UserId>,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// The user the account `external_id` on `channel` is bound to, if any. The same external
    /// id on another channel is another account.
    async fn identity(
        &self,
        channel: &str,
        external_id: &str,
    ) -> Result<Option<UserId>, StoreError>;

    /// The bound channel accounts, of `user` or of everyone, ordered by user, channel and
    /// external id (byte order). A binding made a moment ago may take a moment to be listed
    /// (DynamoDB lists from an eventually consistent index); [`identity`](Self::identity) is
    /// always current.
    async fn bindings(&self, user: Option<&UserId>) -> Result<Vec<Binding>, StoreError>;

    /// Unbind the account `external_id` on `channel`: the user it was bound to, or `None` when
    /// it was not bound. Its messages are then treated as from a stranger again.
    async fn unbind_identity(
        &self,
        channel: &str,
        external_id: &str,
    ) -> Result<Option<UserId>, StoreError> {
        self.unbind_identity_if(channel, external_id, i64::MAX)
            .await
    }

    /// As [`unbind_identity`](Self::unbind_identity), only a binding made at or before
    /// `bound_by_ms`: a newer one (the account linked again since the asking message came) is
    /// left as it is, a [`StoreError::Conflict`]. One conditional write.
    async fn unbind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        bound_by_ms: i64,
    ) -> Result<Option<UserId>, StoreError>;

    /// Unbind the account `external_id` on `channel` only while it is bound to `user`:
    /// whether it was. Bound to someone else, or to nobody, it is left as it is. One
    /// conditional write, so no clock decides whose it is.
    async fn unbind_identity_of(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
    ) -> Result<bool, StoreError>;
}
