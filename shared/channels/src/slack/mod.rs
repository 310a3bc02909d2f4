//! Slack, through the Events API and interactivity (inbound) and the Web API (outbound).
//!
//! **Signing.** Every request Slack sends carries `X-Slack-Request-Timestamp: <unix seconds>` and
//! `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret, "v0:{timestamp}:{raw body}")>`. The
//! check runs on the bytes exactly as received (never re-serialised), compares in constant time,
//! and refuses a timestamp that is not a plain number or is more than 5 minutes from now in
//! either direction ([`MAX_SKEW_S`]), so a captured request cannot be replayed. The
//! `url_verification` handshake is signed too and answers [`Inbound::Challenge`] once verified.
//! Slack redelivers an event up to 3 times (`X-Slack-Retry-Num`, see [`is_retry`]) when the
//! first answer was not a 2xx within 3 seconds; a retry is verified and parsed like the first
//! delivery and carries the same message id, so the queue's dedupe makes it a no-op.
//!
//! **Messages.** An `event_callback` whose event is a `message` (DMs have `channel_type: "im"`)
//! or an `app_mention` becomes one [`InboundMessage`](crate::InboundMessage): external user =
//! `event.user`; conversation key = `event.channel`, plus `:{thread_ts}` inside a thread
//! ([`conversation_key`]); text = `event.text` with a leading mention of the bot removed and
//! Slack's `&amp;`/`&lt;`/`&gt;` undone; files (`event.files[]`) by `url_private` (fetching it
//! needs the bot token), `mimetype` and `size`. A button press arrives as an interactivity
//! payload, form-encoded `payload={json}` with `type: "block_actions"`: button id =
//! `actions[0].value` (the id Bridle sent; `action_id` when empty), text = the button's label,
//! user = `user.id`, conversation = `channel.id` (or `container.channel_id`) plus the thread of
//! the message carrying the buttons. Every `message` event is answered, so the app's event
//! subscriptions decide where the bot speaks: `message.im` plus `app_mention` answers DMs and
//! mentions only; adding `message.channels` would answer every message in its channels.
//!
//! **Message ids** (the dedupe key, and [`Outgoing::in_reply_to`](crate::Outgoing) later) are
//! `{channel}:{ts}` for a message and `{channel}:{message_ts}:{action_ts}` for a press (the
//! press's `trigger_id` when `action_ts` is missing), not the envelope's `event_id`: the
//! message's `ts` is what `reactions.add` needs, a retry keeps it, and a channel message
//! delivered twice (once as `message`, once as `app_mention`, when both are subscribed) carries
//! the same one, so it starts one turn, not two. `action_ts` differs for every press.
//! [`reaction_target`] takes the `ts` back out.
//!
//! **Ignored**, with a 200 ([`Inbound::Ignored`]): messages with a `bot_id` or from the bot user
//! itself (answering them would loop), with any `subtype` except `file_share` (a user's upload)
//! and `thread_broadcast` (a thread reply also shown in the channel) — so `bot_message`,
//! `message_changed`, `message_deleted`, `channel_join`… (edits, deletions and notices are not
//! the user talking); `hidden` messages; messages with neither text nor files; every other event
//! (`member_joined_channel`, `reaction_added`, `app_home_opened`, …); `app_rate_limited`; other
//! interactions (`view_submission`, shortcuts, select menus) and slash commands (not offered).
//!
//! **Sending.** `POST {api_base}/chat.postMessage` with `Authorization: Bearer {bot token}` and
//! `{"channel", "text", "thread_ts"?, "unfurl_links": false, "parse": "none", "link_names":
//! false, "blocks"?}` (nothing in a reply is parsed as a mention: "@channel" from the model
//! notifies nobody; the section block's text is `verbatim`), where `channel` and
//! `thread_ts` are the two halves of the conversation key ([`split_conversation_key`]), so a
//! reply to a thread stays in it. Text goes through [`format()`] (Slack `mrkdwn`, every URL on
//! its own line) and is split into pieces of at most [`MAX_CHARS`] (3,000): the limit of a
//! section block's text, used for every piece so the last can always carry buttons (plain
//! `text` would take 40,000). The last piece carries up to [`MAX_BUTTONS`] buttons as a section
//! block plus an actions block, with the same text as the `text` fallback. A reaction goes
//! first, with `reactions.add` `{"channel", "timestamp", "name"}`, the name from a small emoji
//! table ([`reaction_name`]); an unknown emoji is skipped (`reacted: false`). Slack answers
//! failures with HTTP 200 and `{"ok": false, "error"}`: `ratelimited` (or HTTP 429 with
//! `Retry-After`) → `RateLimited`; `fatal_error`, `internal_error`, `service_unavailable`, HTTP
//! 5xx and 408 → `Retryable`; everything else → `Rejected` with the error code as the reason.
//!
//! The caller reads `SLACK_SIGNING_SECRET` (inbound), `SLACK_BOT_TOKEN` and `SLACK_API_BASE`
//! (outbound; [`DEFAULT_API_BASE`] when unset).

mod api_error;
mod emoji;
mod format;
mod parse;
mod send;
mod verify;

pub use emoji::reaction_name;
pub use format::format;
pub use send::{REQUEST_TIMEOUT, SlackSender};
pub use verify::{
    MAX_SKEW_S, RETRY_NUM_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, is_retry, sign,
};

use crate::{Channel, ChannelError, Inbound, RawRequest};

/// The channel's name: the route segment and [`InboundMessage::channel`](crate::InboundMessage).
pub const NAME: &str = "slack";
/// The longest text piece sent: Slack's limit for a section block's text.
pub const MAX_CHARS: usize = 3_000;
/// Buttons per message: what Bridle offers (Slack would take 25 in an actions block).
pub const MAX_BUTTONS: usize = 3;
/// The longest button label Slack takes (`plain_text` in a button).
pub const MAX_BUTTON_TITLE_CHARS: usize = 75;
/// The longest `action_id` Slack takes; a longer button id travels in `value` only.
pub const MAX_BUTTON_ID_CHARS: usize = 255;
/// The Web API's address, when `SLACK_API_BASE` is not set.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";

/// `{channel}` or, inside a thread, `{channel}:{thread_ts}`. Slack ids and timestamps never
/// contain `:`.
pub fn conversation_key(channel: &str, thread_ts: Option<&str>) -> String {
    match thread_ts.filter(|t| !t.is_empty()) {
        Some(ts) => format!("{channel}:{ts}"),
        None => channel.to_owned(),
    }
}

/// The inverse of [`conversation_key`]: the channel to post in, and the thread to post into.
pub fn split_conversation_key(key: &str) -> (&str, Option<&str>) {
    match key.split_once(':') {
        Some((channel, ts)) if !ts.is_empty() => (channel, Some(ts)),
        Some((channel, _)) => (channel, None),
        None => (key, None),
    }
}

/// The `ts` of the message a message id names (`{channel}:{ts}` or
/// `{channel}:{message_ts}:{action_ts}`; a bare `ts` is taken as is): what `reactions.add`
/// reacts to. `None` when there is none.
pub fn reaction_target(message_id: &str) -> Option<&str> {
    let ts = match message_id.split_once(':') {
        Some((_, rest)) => rest.split(':').next().unwrap_or(""),
        None => message_id,
    };
    Some(ts).filter(|t| !t.is_empty())
}

/// The inbound side: signed Events API and interactivity requests.
pub struct SlackChannel {
    signing_secret: Vec<u8>,
}

impl std::fmt::Debug for SlackChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlackChannel { signing_secret: [redacted] }")
    }
}

impl SlackChannel {
    /// `signing_secret` is the app's Signing Secret (`SLACK_SIGNING_SECRET`); an empty one
    /// refuses every request.
    pub fn new(signing_secret: impl Into<Vec<u8>>) -> Self {
        Self {
            signing_secret: signing_secret.into(),
        }
    }
}

impl Channel for SlackChannel {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Timestamp within [`MAX_SKEW_S`] of `now_s`, then `X-Slack-Signature` over the raw body.
    fn verify(&self, request: &RawRequest<'_>, now_s: i64) -> Result<(), ChannelError> {
        verify::check(&self.signing_secret, request, now_s)
    }

    /// A message event's own `ts` (`{channel}:{ts}` is its id; seconds before the dot): Slack
    /// signs a retry with a fresh timestamp, so only the message says when it was sent. A press
    /// (`{channel}:{message ts}:{press}`) is dated by its arrival, as before: its last part may
    /// be a `trigger_id`, which is no time.
    fn sent_at_each(
        &self,
        _request: &RawRequest<'_>,
        messages: &[crate::InboundMessage],
    ) -> Vec<Option<i64>> {
        let sent = |id: &str| match id.split(':').collect::<Vec<_>>().as_slice() {
            [_, ts] => ts.split('.').next()?.parse().ok(),
            _ => None,
        };
        messages.iter().map(|m| sent(&m.message_id)).collect()
    }

    fn parse(&self, request: &RawRequest<'_>) -> Result<Inbound, ChannelError> {
        parse::parse(request.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversation_keys_round_trip() {
        assert_eq!(conversation_key("C1", None), "C1");
        assert_eq!(conversation_key("C1", Some("")), "C1");
        assert_eq!(conversation_key("C1", Some("1.2")), "C1:1.2");
        assert_eq!(split_conversation_key("C1:1.2"), ("C1", Some("1.2")));
        assert_eq!(split_conversation_key("C1"), ("C1", None));
        assert_eq!(split_conversation_key("C1:"), ("C1", None));
    }

    #[test]
    fn reaction_targets_are_the_message_ts() {
        assert_eq!(
            reaction_target("C1:1531420618.000200"),
            Some("1531420618.000200")
        );
        assert_eq!(reaction_target("C1:1.2:3.4"), Some("1.2"));
        assert_eq!(reaction_target("1.2"), Some("1.2"));
        assert_eq!(reaction_target("C1::3.4"), None);
        assert_eq!(reaction_target(""), None);
    }

    #[test]
    fn debug_output_hides_the_secret() {
        assert!(!format!("{:?}", SlackChannel::new("s3cret")).contains("s3cret"));
    }
}
