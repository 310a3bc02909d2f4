//! Replies through the Cloud API's `/{phone_number_id}/messages`.

use super::{
    DEFAULT_API_VERSION, MAX_BUTTON_ID_CHARS, MAX_BUTTON_TITLE_CHARS, MAX_BUTTONS, MAX_CHARS,
    MAX_INTERACTIVE_BODY_CHARS, WINDOW_MS, format, graph_error,
};
use crate::{Button, Delivered, Outgoing, SendError, Sender};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;

/// The deadline of one API call, connection to last byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The outbound side: sends text, reply buttons, reactions and templates.
pub struct WhatsAppSender {
    client: reqwest::Client,
    api_base: String,
    api_version: String,
    access_token: String,
    phone_number_id: String,
    clock: fn() -> i64,
}

impl std::fmt::Debug for WhatsAppSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WhatsAppSender")
            .field("api_base", &self.api_base)
            .field("api_version", &self.api_version)
            .field("phone_number_id", &self.phone_number_id)
            .field("access_token", &"[redacted]")
            .finish_non_exhaustive()
    }
}

fn unix_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl WhatsAppSender {
    /// `api_base` is `WHATSAPP_API_BASE` ([`DEFAULT_API_BASE`](super::DEFAULT_API_BASE) in
    /// production), `access_token` is `WHATSAPP_ACCESS_TOKEN` (a system-user token), and
    /// `phone_number_id` is `WHATSAPP_PHONE_NUMBER_ID` (the business number's Graph id, not the
    /// number itself).
    pub fn new(
        client: reqwest::Client,
        api_base: impl Into<String>,
        access_token: impl Into<String>,
        phone_number_id: impl Into<String>,
    ) -> Self {
        Self {
            client,
            api_base: api_base.into().trim_end_matches('/').to_owned(),
            api_version: DEFAULT_API_VERSION.to_owned(),
            access_token: access_token.into(),
            phone_number_id: phone_number_id.into(),
            clock: unix_now_ms,
        }
    }

    /// Use another Graph API version (`v21.0` by default).
    pub fn with_api_version(mut self, version: impl Into<String>) -> Self {
        self.api_version = version.into();
        self
    }

    /// Read "now" (Unix ms) from `clock`, for the 24-hour window check.
    pub fn with_clock(mut self, clock: fn() -> i64) -> Self {
        self.clock = clock;
        self
    }

    /// Send an approved message template: the only message allowed outside the 24-hour
    /// customer-service window. `language` is the template's language code (`en_US`).
    pub async fn send_template(
        &self,
        to: &str,
        template_name: &str,
        language: &str,
    ) -> Result<(), SendError> {
        self.post(&json!({
            "messaging_product": "whatsapp",
            "to": to,
            "type": "template",
            "template": {"name": template_name, "language": {"code": language}},
        }))
        .await
    }

    fn url(&self) -> String {
        format!(
            "{}/{}/{}/messages",
            self.api_base, self.api_version, self.phone_number_id
        )
    }

    async fn post(&self, body: &Value) -> Result<(), SendError> {
        let res = self
            .client
            .post(self.url())
            .timeout(REQUEST_TIMEOUT)
            .bearer_auth(&self.access_token)
            .json(body)
            .send()
            .await
            .map_err(SendError::Transport)?;
        let status = res.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let retry_after = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.trim().parse().ok())
            .map(Duration::from_secs);
        let body = res.bytes().await.unwrap_or_default();
        Err(graph_error::classify(
            status,
            retry_after,
            &body,
            &self.access_token,
        ))
    }

    /// Refuse, before anything goes out, when the user last wrote more than 24 h ago.
    fn check_window(&self, user_last_message_ms: Option<i64>) -> Result<(), SendError> {
        let Some(last) = user_last_message_ms else {
            return Ok(());
        };
        let since_ms = (self.clock)() - last;
        if since_ms > WINDOW_MS {
            tracing::warn!(
                hours_since_last_message = since_ms / 3_600_000,
                "not sending a WhatsApp reply: outside the 24-hour customer-service window; \
                 only a template may be sent"
            );
            return Err(SendError::OutsideWindow);
        }
        Ok(())
    }
}

/// The text pieces to send, in WhatsApp markup; when there are buttons, the last piece is
/// short enough to be an interactive message's body.
pub(super) fn pieces(text: &str, with_buttons: bool) -> Vec<String> {
    let mut pieces = crate::split::split(&format(text), MAX_CHARS);
    if with_buttons && let Some(last) = pieces.pop() {
        let (head, tail) = split_tail(&last, MAX_INTERACTIVE_BODY_CHARS);
        pieces.extend([head, tail].into_iter().filter(|p| !p.is_empty()));
    }
    pieces
}

/// Cut `text` into a head and a tail of at most `max` characters, taking the longest tail that
/// starts at a paragraph, else a line, sentence or word boundary, else mid-word.
fn split_tail(text: &str, max: usize) -> (String, String) {
    let count = text.chars().count();
    if count <= max {
        return (String::new(), text.to_owned());
    }
    let start = text
        .char_indices()
        .nth(count - max)
        .map_or(text.len(), |(i, _)| i);
    // Look one byte early so a separator just before the window still counts.
    let from = text[..start]
        .char_indices()
        .next_back()
        .map_or(start, |(i, _)| i);
    let cut = ["\n\n", "\n", ". ", "! ", "? ", " "]
        .iter()
        .find_map(|sep| {
            text[from..]
                .find(sep)
                .map(|i| from + i + sep.len())
                .filter(|&c| c >= start)
        })
        .unwrap_or(start);
    (
        text[..cut].trim_end().to_owned(),
        text[cut..].trim_start().to_owned(),
    )
}

/// The buttons WhatsApp will take: at most three, titles and ids within the limits.
fn native_buttons(buttons: &[Button]) -> Vec<Value> {
    buttons
        .iter()
        .filter(|b| !b.title.trim().is_empty() && !b.id.is_empty())
        .take(MAX_BUTTONS)
        .map(|b| {
            let title: String = b.title.chars().take(MAX_BUTTON_TITLE_CHARS).collect();
            let id: String = b.id.chars().take(MAX_BUTTON_ID_CHARS).collect();
            json!({"type": "reply", "reply": {"id": id, "title": title}})
        })
        .collect()
}

fn text_message(to: &str, body: &str) -> Value {
    json!({
        "messaging_product": "whatsapp",
        "to": to,
        "type": "text",
        "text": {"body": body, "preview_url": false},
    })
}

fn button_message(to: &str, body: &str, buttons: Vec<Value>) -> Value {
    json!({
        "messaging_product": "whatsapp",
        "to": to,
        "type": "interactive",
        "interactive": {
            "type": "button",
            "body": {"text": body},
            "action": {"buttons": buttons},
        },
    })
}

fn reaction_message(to: &str, message_id: &str, emoji: &str) -> Value {
    json!({
        "messaging_product": "whatsapp",
        "to": to,
        "type": "reaction",
        "reaction": {"message_id": message_id, "emoji": emoji},
    })
}

#[async_trait]
impl Sender for WhatsAppSender {
    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    fn has_reactions(&self) -> bool {
        true
    }

    /// Every number of a Meta app posts to the app's one webhook: only messages to this
    /// sender's number (`WHATSAPP_PHONE_NUMBER_ID`) are its to answer. A reply to a message
    /// sent to another number would come from this one, and its turn run on this deployment's
    /// model and budget.
    fn answers_to(&self, address: &str) -> bool {
        address == self.phone_number_id
    }

    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        self.check_window(reply.user_last_message_ms)?;
        let to = if reply.external_user_id.is_empty() {
            reply.conversation_key.as_str()
        } else {
            reply.external_user_id.as_str()
        };
        let buttons = native_buttons(&reply.buttons);
        let pieces = pieces(&reply.text, !buttons.is_empty());
        if pieces.is_empty() && !buttons.is_empty() {
            tracing::warn!("WhatsApp buttons need a text to go with; dropping them");
        }

        if let Some(emoji) = reply.reaction.as_deref().filter(|e| !e.is_empty())
            && sent.is_empty()
        {
            if reply.in_reply_to.is_empty() {
                tracing::warn!("no message to react to; skipping the reaction");
            } else {
                match self
                    .post(&reaction_message(to, &reply.in_reply_to, emoji))
                    .await
                {
                    Ok(()) => sent.reacted = true,
                    // A refused reaction (message too old, emoji not allowed) must not cost
                    // the user the reply itself.
                    Err(SendError::Rejected { status, reason }) => {
                        tracing::warn!(status, %reason, "WhatsApp refused the reaction");
                    }
                    Err(e) => return Err(e),
                }
            }
        }

        let last = pieces.len().saturating_sub(1);
        let mut buttons = Some(buttons).filter(|b| !b.is_empty());
        for (i, piece) in sent.rest(&pieces) {
            let message = match buttons.take_if(|_| i == last) {
                Some(b) => button_message(to, piece, b),
                None => text_message(to, piece),
            };
            self.post(&message).await?;
            sent.pieces.push(piece.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_formatted_then_split() {
        assert_eq!(pieces("**Hi** there", false), ["*Hi* there"]);
        assert!(pieces("   ", true).is_empty());
        let long = "word ".repeat(1_000); // 5,000 chars
        let p = pieces(&long, false);
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|p| p.chars().count() <= MAX_CHARS));
    }

    #[test]
    fn with_buttons_the_last_piece_fits_an_interactive_body() {
        let text = format!("{}\n\n{}", "a".repeat(1_500), "b".repeat(900));
        let p = pieces(&text, true);
        assert_eq!(p, ["a".repeat(1_500), "b".repeat(900)]);
        let p = pieces(&text, false);
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn the_tail_is_as_long_as_allowed_at_the_best_boundary() {
        let text = format!("{} {}", "x".repeat(50), "y ".repeat(20).trim_end());
        let (head, tail) = split_tail(&text, 30);
        assert!(tail.chars().count() <= 30, "{tail:?}");
        assert_eq!(format!("{head} {tail}"), text);
        assert_eq!(tail, "y ".repeat(15).trim_end());
        let (head, tail) = split_tail("One.\nTwo two two.", 12);
        assert_eq!((head.as_str(), tail.as_str()), ("One.", "Two two two."));
        let (head, tail) = split_tail("ééééé", 2);
        assert_eq!((head.as_str(), tail.as_str()), ("ééé", "éé"));
    }

    #[test]
    fn at_most_three_buttons_with_short_titles() {
        let b = |id: &str, title: &str| Button {
            id: id.into(),
            title: title.into(),
        };
        let native = native_buttons(&[
            b("a", "A title that is far too long"),
            b("", "no id"),
            b("c", " "),
            b("d", "D"),
            b("e", "E"),
            b("f", "F"),
        ]);
        assert_eq!(native.len(), 3);
        assert_eq!(native[0]["reply"]["title"], "A title that is far ");
        assert_eq!(native[1]["reply"]["id"], "d");
    }

    #[test]
    fn debug_output_hides_the_token() {
        let s = WhatsAppSender::new(reqwest::Client::new(), "http://x", "EAAG-token", "123");
        assert!(!format!("{s:?}").contains("EAAG-token"));
    }
}
