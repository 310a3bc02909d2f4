use serde::{Deserialize, Serialize};

/// A webhook delivery as it arrived: nothing decoded, nothing re-serialised.
#[derive(Debug, Clone, Copy)]
pub struct RawRequest<'a> {
    pub method: &'a str,
    pub path: &'a str,
    /// The raw query string, without `?`.
    pub query: Option<&'a str>,
    /// Header names are matched case-insensitively.
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    /// The scheme and host the platform called (`https://<domain>`), where the server in front
    /// says so itself (API Gateway's request context: never a header the caller chose); what
    /// a channel that signs the URL it called (Twilio) checks against when it is configured
    /// with no public URL of its own.
    pub origin: Option<&'a str>,
}

impl RawRequest<'_> {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One user message, in neutral form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundMessage {
    pub channel: String,
    /// The sender as the platform identifies them (verified by the signature).
    pub external_user_id: String,
    /// The thread it belongs to on the platform (a chat, a DM, a phone number pair).
    pub conversation_key: String,
    /// The platform's id of the message: the dedupe key.
    pub message_id: String,
    pub text: String,
    pub button_id: Option<String>,
    /// Attachments, by reference (a platform media id or file URL; fetched by the worker).
    pub media: Vec<InboundMedia>,
    /// Which of the platform account's addresses it was sent to, where one webhook hears
    /// several (WhatsApp's `metadata.phone_number_id`: a Meta app's every number posts to the
    /// same webhook); `None` where the channel has one. Only the sender configured for that
    /// address answers it ([`Sender::answers_to`](crate::Sender::answers_to)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressed_to: Option<String>,
}

/// The longest id (sender, conversation, message) a delivery may carry, in bytes. Every platform's
/// ids are far shorter; the generic channel's are its integrator's, and they end up in store keys
/// (DynamoDB refuses a sort key over 1,024 bytes, and the ids are escaped and combined there),
/// so a longer one is refused at the door rather than failing every try of its job.
pub const MAX_ID_BYTES: usize = 256;

impl InboundMessage {
    /// The name of the first of its ids longer than [`MAX_ID_BYTES`], if any.
    pub fn oversized_id(&self) -> Option<&'static str> {
        [
            ("user", &self.external_user_id),
            ("conversation", &self.conversation_key),
            ("id", &self.message_id),
        ]
        .into_iter()
        .find(|(_, id)| id.len() > MAX_ID_BYTES)
        .map(|(name, _)| name)
    }
}

/// An attachment as the platform names it; the bytes are fetched later, with size caps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InboundMedia {
    /// The platform's handle: a WhatsApp media id, a Telegram file id, a Slack or Twilio URL.
    pub reference: String,
    pub mime_type: String,
    pub size_bytes: Option<u64>,
}

/// What a verified delivery carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// User messages to answer (a platform may batch several).
    Messages(Vec<InboundMessage>),
    /// Not a user message (a status, an echo, an edit...): acknowledge and drop.
    Ignored { reason: &'static str },
    /// A handshake: answer 200 with this body.
    Challenge(String),
}

/// Why a delivery was refused. The webhook maps each to one HTTP status in one place.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// Missing, malformed or wrong signature, or a stale timestamp: 401.
    #[error("signature check failed: {0}")]
    BadSignature(&'static str),
    /// The body does not parse as this platform's payload: 400.
    #[error("malformed payload: {0}")]
    Malformed(String),
}

/// An inbound platform.
pub trait Channel: Send + Sync {
    /// The route segment: `POST /webhooks/{name}`.
    fn name(&self) -> &'static str;

    /// Check the platform's signature on the raw bytes. `now_s` is the current Unix time.
    fn verify(&self, request: &RawRequest<'_>, now_s: i64) -> Result<(), ChannelError>;

    /// Parse a verified delivery.
    fn parse(&self, request: &RawRequest<'_>) -> Result<Inbound, ChannelError>;

    /// When the delivery's newest user message was sent, in Unix seconds, as the platform wrote
    /// it into the verified body (WhatsApp `messages[].timestamp`, Telegram `message.date`), so
    /// the webhook can drop an old delivery replayed after its dedupe record is gone. `None`
    /// where the platform puts no time on the message itself: Twilio's form carries none (its
    /// `MessageSid` dedupe is the only protection), a Telegram button press has only the time of
    /// the bot's message it belongs to, and the generic channel and Slack sign their own
    /// timestamp, already held to 5 minutes by [`Channel::verify`].
    fn sent_at_s(&self, request: &RawRequest<'_>) -> Option<i64> {
        let _ = request;
        None
    }

    /// When each of `messages`, this delivery's, was sent, in Unix seconds, where the platform
    /// says so of each message: a delivery may carry several sent at different times (WhatsApp
    /// batches them), or say nothing of its own (Slack signs a retry anew). What a job is dated
    /// by: a "yes" typed before the question it would answer must not pass for one typed after
    /// it because its delivery came late. By default the delivery's [`Channel::sent_at_s`].
    fn sent_at_each(
        &self,
        request: &RawRequest<'_>,
        messages: &[InboundMessage],
    ) -> Vec<Option<i64>> {
        vec![self.sent_at_s(request); messages.len()]
    }

    /// Whether the platform sends GET requests to the webhook (WhatsApp's verification
    /// handshake); for the others a GET is refused before verification.
    fn accepts_get(&self) -> bool {
        false
    }

    /// The body to acknowledge a delivery with, as `(content type, body)`, when the platform
    /// wants something other than JSON (Twilio expects TwiML).
    fn acknowledgement(&self) -> Option<(&'static str, &'static str)> {
        None
    }
}
