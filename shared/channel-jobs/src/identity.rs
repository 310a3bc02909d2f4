//! Who is writing. Identity comes from the verified sender (channel + external id) and the
//! store, never from the model: a link code found in the text is redeemed (one conditional
//! write) and binds the account; otherwise the bound user is looked up. Codes are tried
//! sparingly: two per message ([`MAX_CODES_PER_MESSAGE`]) and five per sender and hour that do
//! not link ([`code_attempts`]).
//!
//! A chat linked to one account is never moved to another by a code it was sent: a code travels
//! in a deep link (`https://t.me/<bot>?start=CODE`, `https://wa.me/<n>?text=…` with any text
//! filled in), so anyone could send a linked person one tap that would make everything they
//! write from then on land in the sender's account. Such a chat is told whose account the code
//! is for, and given a move code of its own ([`MoveCode`], made only when that reply goes out):
//! only `MOVE <that code>`, from that sender in that chat, moves it. In a one-to-one chat nobody
//! else has seen the code, so nobody could have put it in a link; where others see the reply (a
//! group), the word is what a link cannot carry (a Telegram start link holds no space), and the
//! code works only in that chat ([`Resolved::MoveAsked`]).
//!
//! A chat that was never linked is linked by the first live code it sends, so someone who sends
//! a newcomer a link with their own code gets that newcomer's messages in their account. The
//! reply that says "Linked!" names the account, and a linked sender can undo it alone: the
//! word `UNLINK` (any case, `/unlink` too), typed by itself, unbinds their account at once
//! ([`Resolved::Unlinked`]), with no model call and no operator.
//!
//! Where the platform does not prove who sent a message (SMS: anyone can send a text whose
//! `From` is someone else's number, and Twilio signs only that it passed the text on), a code
//! links nothing by itself: the number is texted a code of its own ([`Resolved::LinkAsked`],
//! a [`MoveCode`] for a first link), and only that code from the number (alone, or after `LINK`)
//! links it. Whoever
//! forged the first text never sees that code, so nobody can link someone else's number to
//! their account (and have that person's texts land in it), nor link it again after forging
//! an `UNLINK`.

use crate::code_attempts::{self, Try};
use channels::link_code;
use queue::TurnJob;
use store::{Store, StoreError};
use transcript::UserId;

/// Link codes tried per message.
pub const MAX_CODES_PER_MESSAGE: usize = 2;

/// Whether `job` asks to unlink its sender's account: a typed message that is `UNLINK` alone,
/// in any case, with or without a leading slash (a Telegram command), blanks around. A button
/// press is never one, whatever its label (a button the model offered could read "Unlink"),
/// nor a command addressed to a bot by name (`/unlink@OtherBot` in a group is for that bot).
pub fn is_unlink(job: &TurnJob) -> bool {
    if job.button_id.is_some() {
        return false;
    }
    let word = job.text.trim();
    let word = word.strip_prefix('/').unwrap_or(word);
    word.eq_ignore_ascii_case("unlink")
}

/// The sender of a job, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// The account is bound to this user: run the turn as them.
    Bound(UserId),
    /// The message carried a live link code: the account is now bound to this user.
    Linked(UserId),
    /// The message carried a live code for another account than the one this chat is linked
    /// to (`bound`): nothing changed; the chat is told whose account `to` is, and given a
    /// [`MoveCode`] to move to it with.
    MoveAsked { bound: UserId, to: UserId },
    /// The message carried a live code that this account had redeemed already (sent again, or
    /// the linking message's job run again): it stays bound to this user, and is told so at
    /// most once an hour (a code stays live for its half hour, and each message would cost a
    /// reply).
    LinkedAgain(UserId),
    /// The message was a link code that is unknown, expired or already used; `bound` is the
    /// user the account already belongs to, if any.
    StaleCode { bound: Option<UserId> },
    /// The message was a link code, but this sender has tried too many codes that did not work
    /// this hour: it was not looked up. `bound` as for [`Resolved::StaleCode`].
    TooManyCodes { bound: Option<UserId> },
    /// Nobody we know, and no code: the onboarding reply.
    Unknown,
    /// The sender typed `UNLINK` ([`is_unlink`]) and their account was bound to this user: it
    /// is unbound now, and is told so (in the chat's lobby: it is a stranger's chat again).
    Unlinked(UserId),
    /// The message carried a live code for the account `to`, from a sender the platform does
    /// not prove ([`sender_is_proven`]) and bound to nobody: nothing is linked yet; the sender
    /// is texted a code of its own ([`MoveCode`], for a first link), which links sent back
    /// from there (alone, or as `LINK <code>`).
    LinkAsked { to: UserId },
    /// The sender typed `UNLINK` and their account is bound to nobody (never linked, unlinked
    /// already, or this very UNLINK run again after a crash that followed its unbinding): they
    /// are told so, as a stranger is answered, at most once an hour.
    NotLinked,
}

impl Resolved {
    /// The user whose conversation the answer belongs to, if the account is bound.
    pub fn user(&self) -> Option<&UserId> {
        match self {
            Resolved::Bound(u)
            | Resolved::Linked(u)
            | Resolved::LinkedAgain(u)
            | Resolved::MoveAsked { bound: u, .. } => Some(u),
            Resolved::StaleCode { bound } | Resolved::TooManyCodes { bound } => bound.as_ref(),
            Resolved::Unknown
            | Resolved::Unlinked(_)
            | Resolved::NotLinked
            | Resolved::LinkAsked { .. } => None,
        }
    }

    /// The user whose dollars a harness reply that costs (an SMS) counts in: the user the
    /// answer belongs to, and for a first link's code, the account whose link code asked for
    /// it (not the strangers': a crowd of strangers spending theirs would leave nobody able to
    /// link; and a forger's codes cost the forger).
    pub fn payer(&self) -> Option<&UserId> {
        match self {
            Resolved::LinkAsked { to } => Some(to),
            other => other.user(),
        }
    }

    /// The accounts the harness's reply names ([`crate::lines::account_label`]).
    pub fn named(&self) -> Vec<&UserId> {
        match self {
            Resolved::Linked(u) | Resolved::LinkedAgain(u) | Resolved::Unlinked(u) => vec![u],
            Resolved::MoveAsked { bound, to } => vec![bound, to],
            Resolved::LinkAsked { to } => vec![to],
            _ => Vec::new(),
        }
    }

    /// For a harness reply that is sent at most once an hour per sender, the name of its limit
    /// (a sender cannot make us send, and pay for, such a reply per message): onboarding and
    /// "that code did not work" to a sender who is not linked, "too many codes" to anyone, and
    /// "linked" again for a code the sender had redeemed already, and the question whether to
    /// move a linked chat to another account (a live code could otherwise be sent again and
    /// again for a reply each time).
    /// `None`: answered every time.
    pub fn hourly_reply(&self) -> Option<&'static str> {
        match self {
            Resolved::Unknown | Resolved::NotLinked => Some("stranger"),
            Resolved::LinkedAgain(_) => Some("linked-again"),
            Resolved::MoveAsked { .. } => Some("move-asked"),
            // Each live code for the number is a text to it: once an hour for each account
            // asking ([`crate::ChannelJobs`] adds the account to the limit's name), however
            // many codes a forger makes, and a forger's code does not keep the number's own
            // owner from being asked.
            Resolved::LinkAsked { .. } => Some("link-asked"),
            Resolved::StaleCode { bound: None } => Some("stale-code"),
            Resolved::TooManyCodes { .. } => Some("too-many-codes"),
            // Unlinked once per binding: the next UNLINK finds no binding (`NotLinked`).
            Resolved::Bound(_)
            | Resolved::Linked(_)
            | Resolved::Unlinked(_)
            | Resolved::StaleCode { bound: Some(_) } => None,
        }
    }
}

/// How much later than an `UNLINK` was sent a binding it removes may have been made by the
/// worker's clock: the clocks' difference (machines kept to the millisecond by NTP, the
/// platform's send time to the second), never the linking itself (a person unlinks after
/// reading "Linked!", which is sent after the binding).
const UNLINK_SLACK_MS: i64 = 5_000;

/// `UNLINK` from the verified sender: one conditional write. It unbinds only a binding made
/// before the message was sent (give or take [`UNLINK_SLACK_MS`]): run again after a crash that
/// followed its unbinding, once the sender had linked again (from another chat of theirs, say),
/// it leaves that newer link alone and says the chat is linked ([`Resolved::LinkedAgain`]);
/// with nothing bound, it says so ([`Resolved::NotLinked`]).
async fn unlink(store: &dyn Store, job: &TurnJob) -> Result<Resolved, StoreError> {
    let bound_by = match job.received_at_ms {
        0 => i64::MAX,
        came => came.saturating_add(UNLINK_SLACK_MS),
    };
    match store
        .unbind_identity_if(&job.channel, &job.external_user_id, bound_by)
        .await
    {
        Ok(Some(user)) => {
            tracing::info!(channel = %job.channel, user = %user, "a sender unlinked their account");
            Ok(Resolved::Unlinked(user))
        }
        Ok(None) => Ok(Resolved::NotLinked),
        Err(StoreError::Conflict { .. }) => {
            tracing::info!(channel = %job.channel, "an UNLINK older than the chat's link; left linked");
            Ok(
                match store.identity(&job.channel, &job.external_user_id).await? {
                    Some(user) => Resolved::LinkedAgain(user),
                    None => Resolved::NotLinked,
                },
            )
        }
        Err(e) => Err(e),
    }
}

/// The sender resolved by one read, when the text carries no code-shaped word (then
/// [`resolve`] writes nothing and reads only the binding); `None` when it does. A job whose
/// sender is known this way can claim its job and its conversation's lease together.
pub async fn resolve_by_reading(
    store: &dyn Store,
    job: &TurnJob,
) -> Result<Option<Resolved>, StoreError> {
    if is_unlink(job) || !link_code::find(&job.text).is_empty() {
        return Ok(None);
    }
    Ok(Some(
        match store.identity(&job.channel, &job.external_user_id).await? {
            Some(user) => Resolved::Bound(user),
            None => Resolved::Unknown,
        },
    ))
}

/// A code that moves one chat, linked already, to another account: made when the chat is told
/// whose account a code it sent is for, shown only in that reply, and taken only as
/// `MOVE <code>` from that sender in that chat. Kept as a link code (one use, 30 minutes, made
/// for that sender alone: nobody else in a group chat can use it up) whose
/// user names both the account and the chat (`move:<account>><chat>`, [`MoveCode::chat_of`]);
/// no account's id starts with `move:` (they are UUIDs, `u-…` and `local`) or holds `>`.
///
/// The same code links a chat bound to nobody whose sender the platform does not prove, sent
/// back alone or as `LINK <code>` ([`Resolved::LinkAsked`]; `first_link`, stored as
/// `link:<account>><chat>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveCode {
    pub to: UserId,
    /// The sender and chat it moves ([`MoveCode::chat_of`]).
    pub chat: String,
    /// It links a chat bound to nobody (texted to a sender the platform does not prove), not
    /// moves a linked one.
    pub first_link: bool,
}

/// How long a move code lives.
pub const MOVE_CODE_TTL_MS: i64 = 30 * 60 * 1000;

impl MoveCode {
    const PREFIX: &'static str = "move:";
    const FIRST_LINK_PREFIX: &'static str = "link:";

    /// What a redeemed code's user says, if it is a move (or first link) code.
    pub fn read(user: &UserId) -> Option<MoveCode> {
        let (first_link, rest) = match user.0.strip_prefix(Self::PREFIX) {
            Some(rest) => (false, rest),
            None => (true, user.0.strip_prefix(Self::FIRST_LINK_PREFIX)?),
        };
        let (to, chat) = rest.split_once('>')?;
        Some(MoveCode {
            to: UserId::from(to),
            chat: chat.to_owned(),
            first_link,
        })
    }

    /// The sender and chat of `job`: `{channel}#{external id}@{conversation key}`.
    pub fn chat_of(job: &TurnJob) -> String {
        format!(
            "{}#{}@{}",
            job.channel, job.external_user_id, job.conversation_key
        )
    }

    /// The user a move code is stored under.
    fn as_user(&self) -> UserId {
        let prefix = match self.first_link {
            true => Self::FIRST_LINK_PREFIX,
            false => Self::PREFIX,
        };
        UserId(format!("{prefix}{}>{}", self.to.0, self.chat))
    }

    /// Make a move code (a first link's, with `first_link`) for `job`'s chat to `to`, live
    /// for [`MOVE_CODE_TTL_MS`]; its text in canonical form.
    pub async fn make(
        store: &dyn Store,
        job: &TurnJob,
        to: &UserId,
        first_link: bool,
        now_ms: i64,
    ) -> Result<String, StoreError> {
        let moving = MoveCode {
            to: to.clone(),
            chat: Self::chat_of(job),
            first_link,
        };
        loop {
            let code = link_code::generate().map_err(|e| StoreError::Unavailable(Box::new(e)))?;
            match store
                .create_link_code_for(
                    &code,
                    &moving.as_user(),
                    &redeemer(job),
                    now_ms,
                    now_ms + MOVE_CODE_TTL_MS,
                )
                .await
            {
                Ok(()) => return Ok(code),
                // Taken by a live code (one chance in 31^8): another.
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// How far apart the webhook's and the worker's clocks may be when a link code's first
/// redemption (the worker's) is compared with when a message came (the webhook's).
const CLOCKS_APART_MS: i64 = 60_000;

/// The channel account that sent `job`, as a link code names its redeemer. Channel names
/// never hold `#`, so this names one account.
fn redeemer(job: &TurnJob) -> String {
    format!("{}#{}", job.channel, job.external_user_id)
}

/// Redeem a link code in the text, or look the account up.
///
/// The first [`MAX_CODES_PER_MESSAGE`] code-shaped tokens are tried (the first live one wins),
/// each counted against the sender's tries of the hour; once those are spent no code is looked
/// up. A message that is only a code that did not redeem is a failed linking attempt and is
/// answered as such; so is any code-shaped token from an account that is not bound (it is most
/// likely a mistyped code). A bound account whose longer message merely contains a code-shaped
/// word is answered normally.
pub async fn resolve(
    store: &dyn Store,
    job: &TurnJob,
    now_ms: i64,
) -> Result<Resolved, StoreError> {
    if is_unlink(job) {
        return unlink(store, job).await;
    }
    // At most two code-shaped words are tried per message: a message stuffed with guesses
    // costs the same as an honest one, and cannot search the code space.
    let codes: Vec<_> = link_code::find(&job.text)
        .into_iter()
        .take(MAX_CODES_PER_MESSAGE)
        .collect();
    let redeemer = redeemer(job);
    // Read once, before any code is tried, when there is one.
    let mut bound = if codes.is_empty() {
        None
    } else {
        store.identity(&job.channel, &job.external_user_id).await?
    };
    let mut spent = false;
    for code in &codes {
        if code_attempts::take(store, job, now_ms).await? == Try::Spent {
            spent = true;
            break;
        }
        if let Some(redeemed) = store.consume_link_code(code, &redeemer, now_ms).await? {
            // The binding is written only if it is still as read; changed in between (the
            // sender's job in another chat linked it first, an operator unlinked it), the code
            // is decided again against what it is now.
            for _ in 0..BIND_TRIES {
                let decided = redeemed_code(store, job, code, &redeemed, &bound, now_ms).await;
                let decided = match decided {
                    Ok(decided) => decided,
                    Err(err) => {
                        // The store failed, not the code: the retry takes its own try.
                        code_attempts::give_back(store, job, now_ms).await;
                        return Err(err);
                    }
                };
                if let Some(resolved) = decided {
                    // A code that linked, or asked to move the chat, is no failed try. One that
                    // did nothing (a move code not sent as `MOVE`, an old code after an unlink)
                    // counts as one: its reply is sent every time, and a live code could be
                    // sent again and again for a reply (an SMS) each.
                    if !matches!(resolved, Resolved::StaleCode { .. }) {
                        code_attempts::give_back(store, job, now_ms).await;
                    }
                    return Ok(resolved);
                }
                bound = store.identity(&job.channel, &job.external_user_id).await?;
            }
            // Tried again later: that try takes its own.
            code_attempts::give_back(store, job, now_ms).await;
            return Err(StoreError::Conflict {
                what: format!("identity {redeemer}"),
            });
        }
    }
    if spent {
        tracing::warn!(channel = %job.channel, "too many link codes that did not work from one sender this hour; codes not tried");
    }
    let bound = if codes.is_empty() {
        store.identity(&job.channel, &job.external_user_id).await?
    } else {
        bound
    };
    if !codes.is_empty()
        && (bound.is_none()
            || link_code::is_only_a_code(&job.text)
            || link_code::is_move(&job.text)
            || link_code::is_link(&job.text))
    {
        return Ok(if spent {
            Resolved::TooManyCodes { bound }
        } else {
            Resolved::StaleCode { bound }
        });
    }
    Ok(match bound {
        Some(user) => Resolved::Bound(user),
        None => Resolved::Unknown,
    })
}

/// Whether the platform proves who sent a message on `channel` (it signs what its user sent,
/// or the user signed in): not SMS, and not a channel not named here ([`crate::press`]'s
/// typed yes is trusted on the same ones).
pub fn sender_is_proven(channel: &str) -> bool {
    crate::press::typed_yes(channel) == engine::TypedYes::Confirms
}

/// How many times [`resolve`] decides a redeemed code before it gives up on a binding that
/// keeps changing (the job is then tried again later).
const BIND_TRIES: usize = 3;

/// What the redeemed `code` (of `redeemed`, the user it names) does for the chat bound to
/// `bound` as read: `None` when the binding changed before it could be written.
async fn redeemed_code(
    store: &dyn Store,
    job: &TurnJob,
    code: &str,
    redeemed: &UserId,
    bound: &Option<UserId>,
    now_ms: i64,
) -> Result<Option<Resolved>, StoreError> {
    let moving = MoveCode::read(redeemed);
    let user = match moving {
        // A first link's code links the chat it was texted to, as `LINK <code>` or alone (the
        // proof is having the code, which went only to that number; nobody else could have put
        // it in a link), while that chat is bound to nobody else.
        Some(ref m)
            if m.first_link
                && m.chat == MoveCode::chat_of(job)
                && (link_code::is_link(&job.text) || link_code::is_only_a_code(&job.text)) =>
        {
            if bound.as_ref().is_some_and(|b| b != &m.to) {
                tracing::warn!(channel = %job.channel, "a first link's code for a chat linked to another account since; not linked");
                return Ok(Some(Resolved::StaleCode {
                    bound: bound.clone(),
                }));
            }
            if made_before_signing_out(store, code, &m.to, MOVE_CODE_TTL_MS).await? {
                tracing::warn!(channel = %job.channel, "a first link's code made before its account signed out everywhere; not linked");
                return Ok(Some(Resolved::StaleCode {
                    bound: bound.clone(),
                }));
            }
            m.to.clone()
        }
        // A move code moves the chat it was made for, and only as `MOVE <code>`.
        Some(ref m)
            if !m.first_link
                && m.chat == MoveCode::chat_of(job)
                && link_code::is_move(&job.text) =>
        {
            // Bound to nobody now, the chat has nothing to move: it was unlinked since
            // the code was made, and the code does not link it again (a new link
            // code does).
            if bound.is_none() {
                tracing::warn!(channel = %job.channel, "a move code for a chat unlinked since; not linked");
                return Ok(Some(Resolved::StaleCode {
                    bound: bound.clone(),
                }));
            }
            // Asked for with a code a stolen session made, before its owner signed out
            // everywhere: it moves nothing to them now, as that code would link nothing.
            if made_before_signing_out(store, code, &m.to, MOVE_CODE_TTL_MS).await? {
                tracing::warn!(channel = %job.channel, "a move code made before its account signed out everywhere; not moved");
                return Ok(Some(Resolved::StaleCode {
                    bound: bound.clone(),
                }));
            }
            m.to.clone()
        }
        Some(_) => {
            tracing::warn!(channel = %job.channel, "a move or first link's code not sent as MOVE or LINK <code> by the chat it was made for");
            return Ok(Some(Resolved::StaleCode {
                bound: bound.clone(),
            }));
        }
        None if made_before_signing_out(store, code, redeemed, link_code::LIFETIME_MS).await? => {
            tracing::warn!(channel = %job.channel, "a link code made before its owner signed out everywhere; not linked");
            return Ok(Some(Resolved::StaleCode {
                bound: bound.clone(),
            }));
        }
        // From a sender the platform does not prove, bound to nobody: the number is asked
        // to prove it is theirs first (the code stays redeemed by this sender, so sent again it
        // asks again, at most once an hour).
        None if bound.is_none() && !sender_is_proven(&job.channel) => {
            tracing::info!(channel = %job.channel, "a link code from a sender the platform does not prove; a code of its own is texted to it");
            return Ok(Some(Resolved::LinkAsked {
                to: redeemed.clone(),
            }));
        }
        None => redeemed.clone(),
    };
    // A live code redeems again for the account that redeemed it (so a linking job
    // run again links): bound to that user already, nothing is written.
    if bound.as_ref() == Some(&user) {
        tracing::info!(channel = %job.channel, "a link code sent again by the account it linked");
        return Ok(Some(Resolved::LinkedAgain(user)));
    }
    // Bound to nobody now, by a code this account redeemed before this message came:
    // it was unlinked since (an operator's `identities unlink`: a lost phone, a number
    // that changed hands), and the code, live for its half hour and in the chat's
    // history, does not undo that (a code that asked to move the chat, sent before the
    // unlink, neither: a new code links). Redeemed first just now, by this very try,
    // it links whatever the clocks say. A job tried again came before its own first
    // redemption; the margin keeps two machines' clocks (the webhook's, the worker's)
    // from telling that apart from a message sent after it.
    if bound.is_none()
        && job.received_at_ms > 0
        && store
            .link_code_redeemed_at(code)
            .await?
            .is_some_and(|first| first != now_ms && first + CLOCKS_APART_MS < job.received_at_ms)
    {
        tracing::warn!(channel = %job.channel, "a link code redeemed before, sent again after its chat was unlinked; not linked again");
        return Ok(Some(Resolved::StaleCode { bound: None }));
    }
    if let Some(current) = bound
        && moving.is_none()
    {
        tracing::info!(channel = %job.channel, "a code for another account from a linked chat; asked before moving it");
        return Ok(Some(Resolved::MoveAsked {
            bound: current.clone(),
            to: user,
        }));
    }
    match store
        .bind_identity_if(
            &job.channel,
            &job.external_user_id,
            &user,
            bound.as_ref(),
            now_ms,
        )
        .await
    {
        Ok(()) => {}
        Err(StoreError::Conflict { .. }) => {
            tracing::info!(channel = %job.channel, "the channel account's binding changed while linking; deciding again");
            return Ok(None);
        }
        Err(e) => return Err(e),
    }
    tracing::info!(channel = %job.channel, user = %user.0, "channel account linked");
    Ok(Some(Resolved::Linked(user)))
}

/// Whether `code`, for `user` and live `lifetime_ms` from its making, was made at or before
/// `user` last signed out everywhere: a code a stolen session made and kept back (or a move code
/// it asked for with one) links nothing once its owner has signed out everywhere, as the
/// session and its access tokens open nothing. A code's lifetime is fixed (a plain one's
/// [`link_code::LIFETIME_MS`], from the web or the operator; a move code's
/// [`MOVE_CODE_TTL_MS`]), so its expiry tells when it was made. One account read per redeemed
/// code, and the code's read only for an account that has signed out everywhere.
async fn made_before_signing_out(
    store: &dyn Store,
    code: &str,
    user: &UserId,
    lifetime_ms: i64,
) -> Result<bool, StoreError> {
    let ended = match store.account(user).await? {
        Some(account) if account.sessions_ended_at_ms > 0 => account.sessions_ended_at_ms,
        _ => return Ok(false),
    };
    Ok(store
        .link_code_expires_at(code)
        .await?
        .is_some_and(|expires| expires - lifetime_ms <= ended))
}
