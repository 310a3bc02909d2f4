use async_trait::async_trait;
use std::time::Duration;

/// A button as offered to the user (at most 3, titles at most 20 characters; the reply shaper
/// enforces both before a sender sees them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Button {
    /// What comes back as `button_id` when it is pressed.
    pub id: String,
    pub title: String,
}

/// A reply to deliver, already shaped (markers stripped, limits applied).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outgoing {
    pub conversation_key: String,
    pub external_user_id: String,
    /// The platform message this answers (for reactions and threading).
    pub in_reply_to: String,
    /// The text; a sender splits it into the platform's message size on paragraph boundaries
    /// and sends the pieces in order. May be empty when only a reaction is sent.
    pub text: String,
    /// Sent with the last piece only.
    pub buttons: Vec<Button>,
    /// How to answer, for a channel without buttons (SMS), sent in place of the buttons'
    /// numbered lines; `None`: the numbered lines. Channels with buttons ignore it.
    pub typed_answer: Option<String>,
    /// An emoji to put on the user's message, where the platform has reactions.
    pub reaction: Option<String>,
    /// When the user last wrote (Unix ms), for platforms with a reply window (WhatsApp: 24 h).
    pub user_last_message_ms: Option<i64>,
}

/// What actually went out, to be recorded in the visible transcript (so a retried turn never
/// sends it again); while a reply is being sent, what went out of it so far
/// ([`Sender::send_from`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Delivered {
    /// The text pieces sent, in order.
    pub pieces: Vec<String>,
    /// Whether the reaction was placed.
    pub reacted: bool,
}

impl Delivered {
    /// Whether nothing went out. A sender does what comes before the text (the reaction) only
    /// then: an attempt that got as far as the text placed it, or had it refused.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty() && !self.reacted
    }

    /// Of a reply's `pieces`, the ones still to send, with their index: those after the ones
    /// that went out.
    pub fn rest<'a, T>(
        &self,
        pieces: &'a [T],
    ) -> impl Iterator<Item = (usize, &'a T)> + use<'a, T> {
        pieces.iter().enumerate().skip(self.pieces.len())
    }
}

/// Why a reply could not be delivered, phrased as what to do.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The platform is rate limiting: wait, then retry.
    #[error("rate limited by the platform (retry after {retry_after:?})")]
    RateLimited { retry_after: Option<Duration> },
    /// The platform failed (5xx, timeout): retrying may work.
    #[error("the platform did not accept the reply for now (HTTP {status})")]
    Retryable { status: u16 },
    /// The platform refused it (blocked user, bad request): retrying will not help.
    #[error("the platform refused the reply (HTTP {status}): {reason}")]
    Rejected { status: u16, reason: String },
    /// The platform refused Bridle's own credentials (a token expired, revoked or rotated):
    /// nothing this reply could change, and nothing its user did. Retryable: the job fails,
    /// is retried and ends in the dead letters, from where it is sent again once the
    /// operator has fixed the token; no reply is dropped for it.
    #[error(
        "the platform refused Bridle's credentials: {reason} (fix the channel's token, then send the dead letters again)"
    )]
    Unauthorized { reason: String },
    /// WhatsApp: more than 24 h since the user's last message; only a template may be sent.
    #[error("outside the platform's customer-service window; only a template may be sent")]
    OutsideWindow,
    #[error("could not reach the platform")]
    Transport(#[source] reqwest::Error),
}

impl SendError {
    /// Whether sending the same thing again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            SendError::RateLimited { .. }
                | SendError::Retryable { .. }
                | SendError::Transport(_)
                | SendError::Unauthorized { .. }
        )
    }

    /// How long the platform asked to be left alone, when it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            SendError::RateLimited { retry_after } => *retry_after,
            _ => None,
        }
    }
}

/// Delivers replies on one platform.
#[async_trait]
pub trait Sender: Send + Sync {
    /// The longest text piece the platform takes, in characters.
    fn max_chars(&self) -> usize;

    /// Whether the platform has reactions.
    fn has_reactions(&self) -> bool;

    /// Whether a message sent to `address` (one of the platform account's addresses, where one
    /// webhook hears several: [`InboundMessage::addressed_to`](crate::InboundMessage)) is this
    /// sender's to answer. Only where a channel's webhook hears more than its sender speaks for
    /// does this say no; by default every message is.
    fn answers_to(&self, address: &str) -> bool {
        let _ = address;
        true
    }

    /// The message segments the platform bills for `piece` sent as one message, when it bills
    /// per segment (SMS); 0, by default, for a platform whose replies cost nothing each.
    fn billed_segments(&self, piece: &str) -> u32 {
        let _ = piece;
        0
    }

    /// Send the reply: the reaction (if any) first, then the text pieces in order, buttons on
    /// the last. `sent` holds what an earlier attempt at this same reply sent (empty for a
    /// first attempt): that is not sent again — no reaction once anything went out, and the
    /// first `sent.pieces.len()` pieces are skipped. Each piece is added to `sent` as the
    /// platform takes it, so on error `sent` tells the caller what went out, and passing it
    /// back sends only the rest. Senders fail before sending anything where they can (e.g.
    /// window checks).
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError>;

    /// Send the whole reply ([`Sender::send_from`] from nothing) and return what went out.
    async fn send(&self, reply: &Outgoing) -> Result<Delivered, SendError> {
        let mut sent = Delivered::default();
        self.send_from(reply, &mut sent).await?;
        Ok(sent)
    }
}
