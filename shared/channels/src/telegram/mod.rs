//! Telegram, through the Bot API.
//!
//! **Inbound: what Telegram proves, and what it does not.** Telegram does not sign webhook
//! deliveries. When the webhook is registered with `setWebhook(url, secret_token=…)`, every
//! delivery carries that token in `X-Telegram-Bot-Api-Secret-Token`; [`TelegramChannel`]
//! requires the header exactly once and equal to the configured token (hashed, then compared in
//! constant time, so neither content nor length leaks). That only proves the request was sent to
//! the URL by someone who knows the token — in practice, Telegram delivering to the webhook you
//! registered. The **body is not authenticated**: nothing binds it to the token, there is no
//! timestamp and so no replay window, and a party able to read a delivery in flight (TLS
//! terminates at your edge) could replay or alter it. Keep the token secret like a password,
//! serve the webhook over HTTPS only. Against replays there is the dedupe key, and a message's
//! own `date`: the webhook drops a delivery older than duplicates are remembered
//! ([`Channel::sent_at_s`]; a button press has no date of its own). Telegram also publishes its sending address ranges (149.154.160.0/20,
//! 91.108.4.0/22); filtering on them is left to the network edge. An empty secret is refused at
//! construction ([`ConfigError`]), as is one `setWebhook` would not accept.
//!
//! **What becomes a message.** Telegram posts one `Update` per delivery. A `message` from a
//! person becomes one [`InboundMessage`](crate::InboundMessage): the dedupe key and message id
//! are the `update_id`; the external user is `message.from.id`; the conversation is
//! `message.chat.id`, and in a forum supergroup its topic too (`chat/topic`, so each topic is a
//! conversation and its replies go back there with `message_thread_id`); the text is `text`, else `caption`; a photo is referenced by the `file_id`
//! of its largest size (`image/jpeg`), a document by its `file_id` and `mime_type`. A button
//! press (`callback_query` with `data`) becomes a message whose `button_id` is the data and
//! whose text is the pressed button's label (found in the message's inline keyboard; the data
//! when it is not there), from `callback_query.from.id` in `callback_query.message.chat.id`.
//! With a configured bot username, `/command@ThatBot` loses its suffix and
//! `/command@OtherBot` is ignored (it is another bot's, in a shared group).
//!
//! **What is ignored** (answered 200, never a turn): with a configured bot username, a group or
//! supergroup message that is not a command, does not mention the bot, does not reply to one of
//! its messages and is not what its replies ask for (`UNLINK`, `MOVE <code>`, a link code
//! alone): the members talking among themselves, which Telegram delivers to a bot that is an
//! admin or has privacy mode off; edits (`edited_message`: the user already
//! got an answer to the first version), channel posts and their edits (a channel is not a
//! person talking to the bot), messages from bots (loops) or on behalf of a chat (anonymous
//! admins, a linked channel's automatic forwards: no person to answer), service messages
//! (members joining or leaving, pins, title changes — no text, caption or media), messages
//! whose only content is not handled yet (stickers, voice, video notes, locations, contacts,
//! polls sent in a chat), membership updates (`my_chat_member`, `chat_member`, join requests),
//! reactions, polls and poll answers, inline queries, payments, boosts, business-account
//! traffic, button presses without `data` (game buttons) or on inline-mode messages (no chat
//! to answer in), and any update kind not known here.
//!
//! **Outbound.** `POST {TELEGRAM_API_BASE}/bot{token}/sendMessage` — the token is part of the
//! URL path, so [`TelegramSender`] never lets the URL reach a log, a `Debug` string or an error
//! (transport errors are stripped of it, descriptions are scrubbed of it). Each piece is sent as
//! `{"chat_id", "text", "parse_mode": "MarkdownV2", "link_preview_options": {"is_disabled":
//! true}}`, at most [`MAX_CHARS`] (4,096) UTF-16 units *after* escaping; text is converted by
//! [`format()`] (bold, italic, code, links as text plus the URL on its own line). Buttons go on
//! the last piece as an inline keyboard, one per row (`callback_data` at most
//! [`MAX_CALLBACK_DATA_BYTES`] bytes). A reaction goes first through `setMessageReaction`, on the
//! message named by `in_reply_to` in the form `"{chat_id}:{message_id}"`, which is the inbound
//! message id the parser makes (so the job's id is the reaction target; a button press is
//! `"{chat_id}:{message_id}:{callback_query_id}"`, and the sender first answers the callback
//! query so the user's button stops spinning). Errors follow Telegram's
//! envelope: 429 → rate limited (`parameters.retry_after`), 5xx and 408 → retryable, other 4xx
//! (bad markup, bot blocked by the user, bad token) → rejected.
//!
//! The caller reads `TELEGRAM_SECRET_TOKEN` (and optionally `TELEGRAM_BOT_USERNAME`) for the
//! inbound side, `TELEGRAM_BOT_TOKEN` and `TELEGRAM_API_BASE` ([`DEFAULT_API_BASE`] when unset)
//! for the outbound side.

mod format;
mod parse;
mod send;
mod verify;

pub use format::{escape, format};
pub use parse::reaction_target;
pub use send::{DEFAULT_TIMEOUT, TelegramSender};
pub use verify::{ConfigError, MAX_SECRET_LEN, MIN_SECRET_LEN, SECRET_HEADER, bot_username};

use crate::{Channel, ChannelError, Inbound, RawRequest};

/// The channel's name: the route segment and [`InboundMessage::channel`](crate::InboundMessage).
pub const NAME: &str = "telegram";
/// The longest text message Telegram takes (`sendMessage`), counted here in UTF-16 units of the
/// escaped MarkdownV2, which is never less than what Telegram counts.
pub const MAX_CHARS: usize = 4_096;
/// The longest `callback_data` of an inline button, in bytes.
pub const MAX_CALLBACK_DATA_BYTES: usize = 64;
/// Buttons sent on one message at most (Telegram refuses inline keyboards over 100 buttons).
pub const MAX_BUTTONS: usize = 100;
/// The Bot API's address, when `TELEGRAM_API_BASE` is not set.
pub const DEFAULT_API_BASE: &str = "https://api.telegram.org";
/// Environment variable: the bot token from BotFather (outbound).
pub const ENV_BOT_TOKEN: &str = "TELEGRAM_BOT_TOKEN";
/// Environment variable: the webhook secret token given to `setWebhook` (inbound).
pub const ENV_SECRET_TOKEN: &str = "TELEGRAM_SECRET_TOKEN";
/// Environment variable: the Bot API base URL (outbound; tests point it at a fake).
pub const ENV_API_BASE: &str = "TELEGRAM_API_BASE";
/// Environment variable (optional): the bot's username, for `/command@bot` in groups.
pub const ENV_BOT_USERNAME: &str = "TELEGRAM_BOT_USERNAME";

/// A chat's conversation key: its id, and in a forum supergroup its topic after a `/`
/// (`-1001987654321/42`): each topic is a conversation of its own, and its replies go there.
/// Messages in the General topic (no topic id) are the chat's.
pub fn conversation_key(chat: i64, topic: Option<i64>) -> String {
    match topic {
        Some(topic) => format!("{chat}/{topic}"),
        None => chat.to_string(),
    }
}

/// The chat and topic of a conversation key ([`conversation_key`]).
pub(crate) fn chat_and_topic(key: &str) -> (&str, Option<i64>) {
    match key.split_once('/') {
        Some((chat, topic)) => match topic.parse() {
            Ok(topic) => (chat, Some(topic)),
            Err(_) => (key, None),
        },
        None => (key, None),
    }
}

/// The inbound side: checks the webhook secret token, then parses the `Update`.
pub struct TelegramChannel {
    secret_token: Vec<u8>,
    bot_username: Option<String>,
}

impl std::fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("secret_token", &"[redacted]")
            .field("bot_username", &self.bot_username)
            .finish()
    }
}

impl TelegramChannel {
    /// `secret_token` is the one given to `setWebhook` (32-256 characters of `A-Z a-z 0-9 _ -`;
    /// anything else, in particular an empty or short token, is refused). `bot_username` (with
    /// or without the leading `@`) enables `/command@bot` handling in groups; one no bot could
    /// have is refused.
    pub fn new(
        secret_token: impl Into<String>,
        bot_username: Option<String>,
    ) -> Result<Self, ConfigError> {
        let secret_token = secret_token.into();
        verify::validate_secret(&secret_token)?;
        let bot_username = verify::bot_username(bot_username.as_deref())?;
        Ok(Self {
            secret_token: secret_token.into_bytes(),
            bot_username,
        })
    }
}

impl Channel for TelegramChannel {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Only the secret token header is checked (Telegram signs nothing and sends no time);
    /// `now_s` is unused.
    fn verify(&self, request: &RawRequest<'_>, _now_s: i64) -> Result<(), ChannelError> {
        verify::check_secret(&self.secret_token, request)
    }

    fn parse(&self, request: &RawRequest<'_>) -> Result<Inbound, ChannelError> {
        parse::parse_update(request.body, self.bot_username.as_deref())
    }

    /// The header proves no time, but a message has its `date`.
    fn sent_at_s(&self, request: &RawRequest<'_>) -> Option<i64> {
        parse::sent_at(request.body)
    }
}
