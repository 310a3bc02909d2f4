use serde::{Deserialize, Serialize};

/// A media attachment, by reference (the webhook never downloads bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMedia {
    /// Where the worker fetches it: a platform media id or URL, or a blob-store key.
    pub reference: String,
    pub mime_type: String,
    pub size_bytes: Option<u64>,
}

/// One user message to answer: the only thing the webhook tells the worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnJob {
    /// `web`, `whatsapp`, `telegram`, `slack`, `sms`.
    pub channel: String,
    /// The platform's id of this message (WhatsApp `messages[].id`, Telegram `update_id`, Slack
    /// `event_id`, Twilio `MessageSid`, a client-made id on the web). The dedupe key.
    pub message_id: String,
    /// The conversation it belongs to; the FIFO group.
    pub conversation_key: String,
    /// Who sent it, as the platform identifies them (verified by the webhook).
    pub external_user_id: String,
    pub text: String,
    /// The id of a pressed button, when the message is a button press.
    pub button_id: Option<String>,
    pub media: Vec<JobMedia>,
    pub received_at_ms: i64,
}

impl TurnJob {
    /// Same platform message → same key → at most one turn.
    pub fn dedupe_key(&self) -> String {
        format!("{}#{}", self.channel, self.message_id)
    }

    /// The ordering group: one conversation on one channel.
    pub fn group(&self) -> String {
        format!("{}#{}", self.channel, self.conversation_key)
    }
}
