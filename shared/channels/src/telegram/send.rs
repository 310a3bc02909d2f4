//! Replies through the Bot API: `sendMessage` per piece, `setMessageReaction` first.

use super::format::format_piece;
use super::verify::ConfigError;
use super::{MAX_BUTTONS, MAX_CALLBACK_DATA_BYTES, MAX_CHARS};
use crate::{Button, Delivered, Outgoing, SendError, Sender};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::time::Duration;

/// How long one Bot API call may take, unless [`TelegramSender::with_timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest `reason` kept from a Telegram error description.
const MAX_REASON_CHARS: usize = 200;

/// The outbound side: calls the Bot API with the bot token in the URL path.
pub struct TelegramSender {
    client: reqwest::Client,
    api_base: String,
    token: String,
    timeout: Duration,
}

impl std::fmt::Debug for TelegramSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSender")
            .field("api_base", &self.api_base)
            .field("token", &"[redacted]")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl TelegramSender {
    /// `api_base` is `TELEGRAM_API_BASE` ([`DEFAULT_API_BASE`](super::DEFAULT_API_BASE) when
    /// unset); `bot_token` is `TELEGRAM_BOT_TOKEN`, as BotFather gave it (`123456789:AA…`).
    pub fn new(
        client: reqwest::Client,
        api_base: impl Into<String>,
        bot_token: impl Into<String>,
    ) -> Result<Self, ConfigError> {
        let api_base = api_base.into().trim_end_matches('/').to_owned();
        if !(api_base.starts_with("https://") || api_base.starts_with("http://")) {
            return Err(ConfigError::InvalidApiBase);
        }
        let token = bot_token.into();
        let valid = token.split_once(':').is_some_and(|(id, key)| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_digit())
                && !key.is_empty()
                && key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
        if !valid {
            return Err(ConfigError::InvalidBotToken);
        }
        Ok(Self {
            client,
            api_base,
            token,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// The deadline for each Bot API call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// One Bot API call. Errors never carry the URL (it holds the token).
    async fn call(&self, method: &'static str, body: &Value) -> Result<(), SendError> {
        let url = format!("{}/bot{}/{method}", self.api_base, self.token);
        let res = self
            .client
            .post(url)
            .timeout(self.timeout)
            .json(body)
            .send()
            .await
            .map_err(|e| SendError::Transport(e.without_url()))?;
        let status = res.status().as_u16();
        let retry_after_header = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
        let bytes = match res.bytes().await {
            Ok(bytes) => bytes,
            // Telegram answers a refusal with a 4xx or 5xx status; a 2xx says it took the call,
            // and only its answer was lost on the way back. Sent again, it would be said twice.
            Err(e) if (200..300).contains(&status) => {
                tracing::warn!(method, status, error = %e.without_url(), "Telegram took a call but its answer could not be read; taken as done");
                return Ok(());
            }
            Err(e) => return Err(SendError::Transport(e.without_url())),
        };
        let reply: ApiReply = serde_json::from_slice(&bytes).unwrap_or_default();
        let result = classify(status, retry_after_header, &reply, &self.token);
        if let Err(e) = &result {
            tracing::warn!(method, status, error = %e, "Telegram refused a call");
        }
        result
    }
}

/// The Bot API's answer envelope: `{"ok", "result" | "error_code", "description", "parameters"}`.
#[derive(Debug, Default, Deserialize)]
struct ApiReply {
    #[serde(default)]
    ok: bool,
    description: Option<String>,
    parameters: Option<ResponseParameters>,
}

#[derive(Debug, Default, Deserialize)]
struct ResponseParameters {
    retry_after: Option<u64>,
    migrate_to_chat_id: Option<i64>,
}

/// Map an HTTP status and Telegram's envelope to what the caller should do.
fn classify(
    status: u16,
    retry_after_header: Option<u64>,
    reply: &ApiReply,
    token: &str,
) -> Result<(), SendError> {
    let params = reply.parameters.as_ref();
    match status {
        200..=299 if reply.ok => Ok(()),
        429 => Err(SendError::RateLimited {
            retry_after: params
                .and_then(|p| p.retry_after)
                .or(retry_after_header)
                .map(Duration::from_secs),
        }),
        408 | 500..=599 => Err(SendError::Retryable { status }),
        401 => Err(SendError::Unauthorized {
            reason: "Telegram refused the bot token (TELEGRAM_BOT_TOKEN)".to_owned(),
        }),
        _ => {
            let reason = if let Some(chat) = params.and_then(|p| p.migrate_to_chat_id) {
                format!("the group became a supergroup; its new chat id is {chat}")
            } else {
                short_reason(reply.description.as_deref(), token)
            };
            Err(SendError::Rejected { status, reason })
        }
    }
}

/// Telegram's description, cut short, with the token blanked should it ever be echoed.
fn short_reason(description: Option<&str>, token: &str) -> String {
    let d = description
        .unwrap_or("no description")
        .replace(token, "[redacted]");
    if d.chars().count() <= MAX_REASON_CHARS {
        d
    } else {
        let mut cut: String = d.chars().take(MAX_REASON_CHARS - 1).collect();
        cut.push('…');
        cut
    }
}

/// Split the reply into pieces whose MarkdownV2 form fits: `(plain piece, MarkdownV2)` pairs.
///
/// Escaping lengthens text (up to twice, plus URLs moved to their own lines), so a piece that
/// grows past [`MAX_CHARS`] UTF-16 units once formatted is split again, smaller, until it fits.
/// UTF-16 units are what Telegram counts, and counting the escaped form over-counts, so a piece
/// that passes here is never too long for Telegram.
pub(crate) fn render(text: &str) -> Vec<(String, String)> {
    let mut queue: VecDeque<String> = crate::split::split(text, MAX_CHARS).into();
    let mut fence = None;
    let mut out = Vec::new();
    while let Some(plain) = queue.pop_front() {
        let mut next_fence = fence.clone();
        let marked = format_piece(&plain, &mut next_fence);
        let len = marked.encode_utf16().count();
        let chars = plain.chars().count();
        if len <= MAX_CHARS || chars <= 1 {
            fence = next_fence;
            out.push((plain, marked));
            continue;
        }
        // Scale down to the share that fits, with some slack for uneven escaping.
        let limit = (chars * MAX_CHARS / len)
            .saturating_sub(32)
            .clamp(1, chars - 1);
        for piece in crate::split::split(&plain, limit).into_iter().rev() {
            queue.push_front(piece);
        }
    }
    out
}

/// The inline keyboard for the last piece: one button per row. Buttons Telegram would refuse
/// (empty or over-long `callback_data`) are left out with a warning rather than failing the
/// whole reply.
fn keyboard(buttons: &[Button]) -> Option<Value> {
    let rows: Vec<Value> = buttons
        .iter()
        .filter(|b| {
            let ok = !b.id.is_empty() && b.id.len() <= MAX_CALLBACK_DATA_BYTES;
            if !ok {
                tracing::warn!(
                    id_bytes = b.id.len(),
                    "button left out: Telegram takes 1-64 bytes of callback_data"
                );
            }
            ok
        })
        .take(MAX_BUTTONS)
        .map(|b| {
            let title = b.title.trim();
            let text = if title.is_empty() {
                b.id.as_str()
            } else {
                title
            };
            json!([{"text": text, "callback_data": b.id}])
        })
        .collect();
    (!rows.is_empty()).then(|| json!({ "inline_keyboard": rows }))
}

/// A numeric chat id as a number, a `@channelusername` as a string.
fn chat_id(key: &str) -> Value {
    key.parse::<i64>()
        .map_or_else(|_| json!(key), |id| json!(id))
}

/// `in_reply_to` in the form `"{chat_id}:{message_id}"` (see
/// [`reaction_target`](super::reaction_target)), when its chat is the reply's conversation.
fn reaction_message_id(reply: &Outgoing) -> Option<i64> {
    let (chat, message) = reply.in_reply_to.split_once(':')?;
    if chat != super::chat_and_topic(&reply.conversation_key).0 {
        return None;
    }
    message.parse().ok()
}

/// The callback query a reply answers, when `in_reply_to` names a button press
/// (`"{chat_id}:{message_id}:{callback_query_id}"`).
fn callback_query_id(reply: &Outgoing) -> Option<&str> {
    let mut parts = reply.in_reply_to.splitn(3, ':');
    let (_, _, id) = (parts.next()?, parts.next()?, parts.next()?);
    Some(id).filter(|id| !id.is_empty())
}

#[async_trait]
impl Sender for TelegramSender {
    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    fn has_reactions(&self) -> bool {
        true
    }

    /// The reaction goes on the message named by `in_reply_to`, which must be
    /// `"{chat_id}:{message_id}"` (from [`reaction_target`](super::reaction_target)); an
    /// `update_id` or anything else is not a Telegram message id, so no reaction is attempted.
    /// A reaction Telegram refuses (an emoji it does not offer, reactions off in the chat) is
    /// skipped (`reacted: false`) and the text still goes out; a rate limit or outage fails the
    /// whole reply before any text is sent. `Delivered::pieces` holds the plain pieces (before
    /// MarkdownV2 escaping), in order.
    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        let pieces = render(&reply.text);
        if let Some(id) = callback_query_id(reply).filter(|_| sent.is_empty()) {
            // Stops the spinner on the pressed button. Telegram accepts it only for a while
            // after the press; a refusal must not cost the user the reply.
            let body = json!({"callback_query_id": id});
            if let Err(e) = self.call("answerCallbackQuery", &body).await {
                tracing::info!(error = %e, "callback query not answered");
            }
        }
        if let Some(emoji) = reply.reaction.as_deref()
            && sent.is_empty()
        {
            // Telegram lists its reaction emoji without the U+FE0F variation selector.
            let emoji: String = emoji.trim().chars().filter(|&c| c != '\u{fe0f}').collect();
            match reaction_message_id(reply) {
                Some(message_id) if !emoji.is_empty() => {
                    let body = json!({
                        "chat_id": chat_id(super::chat_and_topic(&reply.conversation_key).0),
                        "message_id": message_id,
                        "reaction": [{"type": "emoji", "emoji": emoji}],
                    });
                    match self.call("setMessageReaction", &body).await {
                        Ok(()) => sent.reacted = true,
                        Err(SendError::Rejected { .. }) => {}
                        Err(e) => return Err(e),
                    }
                }
                _ => tracing::debug!("no reaction: in_reply_to is not a chat:message id"),
            }
        }
        let markup = keyboard(&reply.buttons);
        if markup.is_some() && pieces.is_empty() {
            tracing::warn!("buttons left out: there is no text to carry them");
        }
        let last = pieces.len().saturating_sub(1);
        for (i, (plain, marked)) in sent.rest(&pieces) {
            let (chat, topic) = super::chat_and_topic(&reply.conversation_key);
            let mut body = json!({
                "chat_id": chat_id(chat),
                "text": marked,
                "parse_mode": "MarkdownV2",
                "link_preview_options": {"is_disabled": true},
            });
            // A forum topic's replies go to that topic, not the General one.
            if let Some(topic) = topic {
                body["message_thread_id"] = json!(topic);
            }
            if let (true, Some(markup)) = (i == last, &markup) {
                body["reply_markup"] = markup.clone();
            }
            self.call("sendMessage", &body).await?;
            sent.pieces.push(plain.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telegram::format::tests::read_markdown_v2;

    const TOKEN: &str = "123456:ABC-def_ghi";

    #[test]
    fn tokens_and_bases_are_checked_at_construction() {
        let new =
            |base: &str, token: &str| TelegramSender::new(reqwest::Client::new(), base, token);
        assert!(new("https://api.telegram.org/", TOKEN).is_ok());
        assert_eq!(
            new("https://x", "").unwrap_err(),
            ConfigError::InvalidBotToken
        );
        assert_eq!(
            new("https://x", "abc:def").unwrap_err(),
            ConfigError::InvalidBotToken
        );
        assert_eq!(
            new("https://x", "123:a/b").unwrap_err(),
            ConfigError::InvalidBotToken
        );
        assert_eq!(
            new("https://x", "123:").unwrap_err(),
            ConfigError::InvalidBotToken
        );
        assert_eq!(
            new("ftp://x", TOKEN).unwrap_err(),
            ConfigError::InvalidApiBase
        );
    }

    #[test]
    fn debug_output_hides_the_token() {
        let s = TelegramSender::new(reqwest::Client::new(), "https://x", TOKEN).unwrap();
        let dbg = format!("{s:?}");
        assert!(
            !dbg.contains("ABC-def_ghi") && dbg.contains("[redacted]"),
            "{dbg}"
        );
    }

    fn reply(status: u16, body: Value, header: Option<u64>) -> Result<(), SendError> {
        let reply: ApiReply = serde_json::from_value(body).unwrap();
        classify(status, header, &reply, TOKEN)
    }

    #[test]
    fn errors_say_what_to_do() {
        assert!(reply(200, json!({"ok": true, "result": {}}), None).is_ok());
        let limited = reply(
            429,
            json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 5",
                   "parameters": {"retry_after": 5}}),
            None,
        );
        assert!(
            matches!(limited, Err(SendError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(5))
        );
        let header_only = reply(429, json!({}), Some(7));
        assert!(
            matches!(header_only, Err(SendError::RateLimited { retry_after: Some(d) }) if d == Duration::from_secs(7))
        );
        assert!(matches!(
            reply(502, json!({}), None),
            Err(SendError::Retryable { status: 502 })
        ));
        let Err(SendError::Rejected {
            status: 400,
            reason,
        }) = reply(
            400,
            json!({"ok": false, "error_code": 400,
                   "description": "Bad Request: can't parse entities: Character '.' is reserved"}),
            None,
        )
        else {
            panic!("400 is a rejection")
        };
        assert!(reason.contains("can't parse entities"));
        let Err(SendError::Rejected {
            status: 403,
            reason,
        }) = reply(
            403,
            json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}),
            None,
        )
        else {
            panic!("403 is a rejection")
        };
        assert_eq!(reason, "Forbidden: bot was blocked by the user");
        let Err(SendError::Rejected { reason, .. }) = reply(
            400,
            json!({"ok": false, "description": format!("echo {TOKEN} {}", "x".repeat(500))}),
            None,
        ) else {
            panic!("400 is a rejection")
        };
        assert!(!reason.contains(TOKEN) && reason.chars().count() <= MAX_REASON_CHARS);
        let Err(SendError::Rejected { reason, .. }) = reply(
            400,
            json!({"ok": false, "description": "Bad Request: group chat was upgraded to a supergroup chat",
                   "parameters": {"migrate_to_chat_id": -1001234}}),
            None,
        ) else {
            panic!("400 is a rejection")
        };
        assert!(reason.contains("-1001234"));
        // A 200 that is not `ok` is not a success.
        assert!(matches!(
            reply(200, json!({"ok": false}), None),
            Err(SendError::Rejected { status: 200, .. })
        ));
    }

    #[test]
    fn rendered_pieces_fit_after_escaping_and_stay_valid() {
        // Every character escapes: 6,000 plain characters become 12,000 once escaped.
        let text = "a.b.c. ".repeat(1_000);
        let pieces = render(&text);
        assert!(pieces.len() >= 3, "{} pieces", pieces.len());
        for (plain, marked) in &pieces {
            assert!(marked.encode_utf16().count() <= MAX_CHARS);
            assert_eq!(&read_markdown_v2(marked).unwrap(), plain);
        }
        let words = |s: &str| s.split_whitespace().collect::<String>();
        let joined: String = pieces.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(words(&joined), words(&text));
    }

    #[test]
    fn astral_characters_count_twice() {
        let text = "😀".repeat(MAX_CHARS);
        let pieces = render(&text);
        assert!(pieces.len() >= 2);
        assert!(
            pieces
                .iter()
                .all(|(_, m)| m.encode_utf16().count() <= MAX_CHARS)
        );
        assert_eq!(
            pieces.iter().map(|(p, _)| p.as_str()).collect::<String>(),
            text
        );
    }

    #[test]
    fn a_code_block_cut_in_two_is_reopened() {
        let code = "let x = 1;\n".repeat(500);
        let text = format!("Here:\n```rust\n{code}```\nDone.");
        let pieces = render(&text);
        assert!(pieces.len() >= 2);
        assert!(
            pieces[1].1.starts_with("```rust\n"),
            "{}",
            &pieces[1].1[..40]
        );
        for (_, m) in &pieces {
            read_markdown_v2(m).unwrap();
        }
    }

    #[test]
    fn keyboards_hold_valid_buttons_one_per_row() {
        let b = |id: &str, title: &str| Button {
            id: id.into(),
            title: title.into(),
        };
        let k = keyboard(&[
            b("yes", "Yes"),
            b(&"x".repeat(65), "Too long"),
            b("no", " "),
        ])
        .unwrap();
        assert_eq!(
            k,
            json!({"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}],
                                        [{"text": "no", "callback_data": "no"}]]})
        );
        assert_eq!(keyboard(&[]), None);
    }

    #[test]
    fn only_a_chat_message_id_is_a_reaction_target() {
        let r = |to: &str| Outgoing {
            conversation_key: "-100".into(),
            in_reply_to: to.into(),
            ..Outgoing::default()
        };
        assert_eq!(reaction_message_id(&r("-100:42")), Some(42));
        assert_eq!(reaction_message_id(&r("42")), None);
        assert_eq!(reaction_message_id(&r("-200:42")), None);
        assert_eq!(reaction_message_id(&r("-100:x")), None);
    }
}
