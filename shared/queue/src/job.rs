use std::collections::BTreeMap;

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
    /// The trace this message started in, as W3C trace-context headers (`traceparent`,
    /// `tracestate`), so the worker's spans join the webhook's trace. Empty when tracing is off;
    /// absent from jobs written before it existed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub trace_context: BTreeMap<String, String>,
    /// Which of the platform account's addresses the message was sent to, where one webhook
    /// hears several (WhatsApp's phone number id); absent where the channel has one, and from
    /// jobs written before it existed. The worker answers only its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addressed_to: Option<String>,
}

impl TurnJob {
    /// Same platform message → same key → at most one turn.
    pub fn dedupe_key(&self) -> String {
        format!("{}#{}", self.channel, self.message_id)
    }

    /// The ordering group: one conversation, which on a messaging channel is one sender in one
    /// chat (a linked sender's conversation is theirs in that chat): in a group chat, each
    /// member's messages are in order, and no member's wait behind another's. (Strangers in
    /// one group chat share its lobby, whose lease takes their replies one at a time.)
    pub fn group(&self) -> String {
        format!(
            "{}#{}#{}",
            self.channel, self.conversation_key, self.external_user_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two members of one group chat are two ordering groups; one member's messages in two
    /// chats too; the same sender in the same chat is one.
    #[test]
    fn each_sender_in_each_chat_is_an_ordering_group() {
        let job = |key: &str, user: &str| TurnJob {
            addressed_to: None,
            trace_context: BTreeMap::new(),
            channel: "telegram".into(),
            message_id: "1".into(),
            conversation_key: key.into(),
            external_user_id: user.into(),
            text: "hi".into(),
            button_id: None,
            media: Vec::new(),
            received_at_ms: 0,
        };
        assert_ne!(job("-100", "ana").group(), job("-100", "bob").group());
        assert_ne!(job("-100", "ana").group(), job("-200", "ana").group());
        assert_eq!(job("-100", "ana").group(), job("-100", "ana").group());
    }

    #[test]
    fn a_job_written_before_trace_context_existed_still_decodes() {
        let old = r#"{"channel":"web","message_id":"m","conversation_key":"c",
            "external_user_id":"u","text":"hi","button_id":null,"media":[],"received_at_ms":1}"#;
        let job: TurnJob = serde_json::from_str(old).unwrap();
        assert!(job.trace_context.is_empty());
        let again = serde_json::to_string(&job).unwrap();
        assert!(
            !again.contains("trace_context"),
            "an empty trace context is not written: {again}"
        );
    }
}
