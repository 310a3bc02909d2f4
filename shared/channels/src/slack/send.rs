//! The outbound side: `chat.postMessage` and `reactions.add` on Slack's Web API.

use super::api_error::{self, Failure};
use super::{MAX_BUTTON_ID_CHARS, MAX_BUTTON_TITLE_CHARS, MAX_BUTTONS, MAX_CHARS};
use crate::{Button, Delivered, Outgoing, SendError, Sender};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;

/// Every Web API call gives up after this long.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Reaction failures that must not stop the reply: the reaction is simply not there.
const HARMLESS_REACTION_ERRORS: &[&str] = &[
    "message_not_found",
    "invalid_name",
    "too_many_reactions",
    "too_many_emoji",
    "not_reactable",
    "bad_timestamp",
    "no_item_specified",
    "thread_locked",
];

/// Posts replies with a bot token (`xoxb-…`).
pub struct SlackSender {
    client: reqwest::Client,
    api_base: String,
    bot_token: String,
}

impl std::fmt::Debug for SlackSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSender")
            .field("api_base", &self.api_base)
            .field("bot_token", &"[redacted]")
            .finish_non_exhaustive()
    }
}

impl SlackSender {
    /// `api_base` is the Web API root (`SLACK_API_BASE`, [`DEFAULT_API_BASE`](super::DEFAULT_API_BASE)
    /// when unset; methods are appended as `{api_base}/chat.postMessage`); `bot_token` is the
    /// bot user OAuth token (`SLACK_BOT_TOKEN`), sent only as `Authorization: Bearer …`.
    pub fn new(
        client: reqwest::Client,
        api_base: impl Into<String>,
        bot_token: impl Into<String>,
    ) -> Self {
        Self {
            client,
            api_base: api_base.into().trim_end_matches('/').to_owned(),
            bot_token: bot_token.into(),
        }
    }

    /// POST one Web API method with a JSON body.
    async fn call(&self, method: &str, body: &Value) -> Result<(), Failure> {
        let res = self
            .client
            .post(format!("{}/{method}", self.api_base))
            .timeout(REQUEST_TIMEOUT)
            .bearer_auth(&self.bot_token)
            .header("content-type", "application/json; charset=utf-8")
            .body(body.to_string())
            .send()
            .await
            .map_err(|e| Failure::Other(SendError::Transport(e)))?;
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.trim().parse().ok())
            .map(Duration::from_secs);
        let bytes = match res.bytes().await {
            Ok(bytes) => bytes,
            // A 2xx whose body was lost on the way back. Slack refuses at 200 too (`"ok":
            // false`), now and then for a moment (`internal_error`, `ratelimited`), so this is
            // a bet: a lost answer is far more often a post that went through, and sent again
            // it would be said twice. Taken as done, the rare refusal is a reply lost, and
            // logged. (An answer read whole but not understood is refused the same way.)
            Err(e) if (200..300).contains(&status) => {
                tracing::warn!(method, status, error = %e, "Slack took a call but its answer could not be read; taken as done");
                return Ok(());
            }
            Err(e) => return Err(Failure::Other(SendError::Transport(e))),
        };
        api_error::classify(status, retry_after, &bytes)
    }

    /// Put the reaction on the user's message. `Ok(false)` when it could not be placed for a
    /// reason that does not affect the reply.
    async fn react(&self, channel: &str, ts: &str, name: &str) -> Result<bool, SendError> {
        let body = json!({"channel": channel, "timestamp": ts, "name": name});
        match self.call("reactions.add", &body).await {
            Ok(()) => Ok(true),
            Err(Failure::Api { code, .. }) if code == "already_reacted" => Ok(true),
            Err(Failure::Api { code, .. }) if HARMLESS_REACTION_ERRORS.contains(&code.as_str()) => {
                tracing::warn!(%code, "slack reaction not placed");
                Ok(false)
            }
            Err(other) => Err(other.into()),
        }
    }
}

/// The pieces to send: `(as the model wrote it, as Slack gets it)`. Pieces are cut with
/// [`crate::split::split`] at [`MAX_CHARS`]; a piece whose `mrkdwn` grew past the limit (escapes,
/// URLs moved to their own lines) is cut again, finer, so every sent text fits a section block.
pub(super) fn pieces(text: &str) -> Vec<(String, String)> {
    fn fit(raw: String, out: &mut Vec<(String, String)>) {
        let formatted = super::format(&raw);
        let len = formatted.chars().count();
        let raw_len = raw.chars().count();
        if len <= MAX_CHARS || raw_len <= 1 {
            out.push((raw, formatted));
            return;
        }
        // Shrink in proportion to the growth; always strictly shorter, so this ends.
        let finer = (raw_len * MAX_CHARS / len).clamp(1, raw_len - 1);
        for sub in crate::split::split(&raw, finer) {
            fit(sub, out);
        }
    }
    let mut out = Vec::new();
    for raw in crate::split::split(text, MAX_CHARS) {
        fit(raw, &mut out);
    }
    out
}

/// The `blocks` of the last piece: the text as a section, then the buttons.
pub(super) fn blocks(text: &str, buttons: &[Button]) -> Value {
    let elements: Vec<Value> = buttons
        .iter()
        .take(MAX_BUTTONS)
        .enumerate()
        .map(|(i, b)| {
            let title: String = b.title.chars().take(MAX_BUTTON_TITLE_CHARS).collect();
            // `action_id` must be unique in the message and at most 255 characters; `value`
            // carries the id back either way.
            let action_id = if b.id.is_empty() || b.id.chars().count() > MAX_BUTTON_ID_CHARS {
                format!("bridle-button-{i}")
            } else {
                b.id.clone()
            };
            json!({
                "type": "button",
                "text": {"type": "plain_text", "text": title},
                "action_id": action_id,
                "value": b.id,
            })
        })
        .collect();
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": text, "verbatim": true}},
        {"type": "actions", "elements": elements},
    ])
}

#[async_trait]
impl Sender for SlackSender {
    /// Slack's section-block text limit (3,000), used for every piece so the last one can
    /// always carry the buttons.
    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    fn has_reactions(&self) -> bool {
        true
    }

    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        let (channel, thread_ts) = super::split_conversation_key(&reply.conversation_key);
        if channel.is_empty() {
            return Err(SendError::Rejected {
                status: 400,
                reason: "no Slack channel in the conversation key".into(),
            });
        }
        let target = super::reaction_target(&reply.in_reply_to);
        let name = reply.reaction.as_deref().and_then(super::reaction_name);
        if let (Some(ts), Some(name)) = (target, name)
            && sent.is_empty()
        {
            sent.reacted = self.react(channel, ts, &name).await?;
        }
        let pieces = pieces(&reply.text);
        let last = pieces.len().saturating_sub(1);
        for (i, (raw, text)) in sent.rest(&pieces) {
            // Nothing in the text is parsed as a mention or a channel name (`parse: none`, no
            // `link_names`; the section below is `verbatim`): a model writing "@channel" or
            // "@here" notifies nobody. Links are Slack's explicit ones (`format`).
            let mut body = json!({
                "channel": channel,
                "text": text,
                "unfurl_links": false,
                "parse": "none",
                "link_names": false,
            });
            if let Some(ts) = thread_ts {
                body["thread_ts"] = json!(ts);
            }
            if i == last && !reply.buttons.is_empty() {
                body["blocks"] = blocks(text, &reply.buttons);
            }
            self.call("chat.postMessage", &body)
                .await
                .map_err(SendError::from)?;
            sent.pieces.push(raw.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_that_overflow_a_piece_cause_a_finer_cut() {
        let text = "<&> ".repeat(1_000); // 4,000 chars; 13,000 once escaped.
        let got = pieces(&text);
        assert!(got.len() > 2);
        for (raw, sent) in &got {
            assert!(
                sent.chars().count() <= MAX_CHARS,
                "{} chars",
                sent.chars().count()
            );
            assert_eq!(&super::super::format(raw), sent);
        }
        let words = |s: &str| s.split_whitespace().collect::<String>();
        let raws: Vec<&str> = got.iter().map(|(r, _)| r.as_str()).collect();
        assert_eq!(words(&raws.concat()), words(&text));
    }

    #[test]
    fn buttons_are_native_and_within_slack_limits() {
        let long = "x".repeat(300);
        let buttons: Vec<Button> = (0..30)
            .map(|i| Button {
                id: if i == 1 {
                    long.clone()
                } else {
                    format!("b{i}")
                },
                title: "t".repeat(100),
            })
            .collect();
        let b = blocks("hi", &buttons);
        assert_eq!(
            b[0],
            json!({"type": "section", "text": {"type": "mrkdwn", "text": "hi", "verbatim": true}})
        );
        let elements = b[1]["elements"].as_array().unwrap();
        assert_eq!(elements.len(), MAX_BUTTONS);
        assert_eq!(elements[0]["action_id"], "b0");
        assert_eq!(elements[1]["action_id"], "bridle-button-1");
        assert_eq!(elements[1]["value"], long.as_str());
        assert_eq!(
            elements[0]["text"]["text"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            MAX_BUTTON_TITLE_CHARS
        );
    }

    #[test]
    fn debug_output_hides_the_token() {
        let s = SlackSender::new(
            reqwest::Client::new(),
            "https://slack.com/api/",
            "xoxb-s3cret",
        );
        let shown = format!("{s:?}");
        assert!(!shown.contains("s3cret") && shown.contains("https://slack.com/api\""));
    }
}
