//! The generic channel: JSON over HTTPS, signed both ways with HMAC-SHA256.
//!
//! Inbound `POST /webhooks/generic` carries `X-Bridle-Timestamp: <unix seconds>` and
//! `X-Bridle-Signature: sha256=<hex HMAC-SHA256(secret, "{timestamp}.{raw body}")>`; deliveries
//! more than 5 minutes from now (either way) are refused, so a captured request cannot be
//! replayed later. The body:
//!
//! ```json
//! {"type": "message", "id": "m-1", "user": "u-1", "conversation": "c-1", "text": "hi",
//!  "button_id": null}
//! ```
//!
//! `id` names the message among all the integrator's messages (never numbered per
//! conversation, never a user's words): a repeated id is a retry, dropped for 7 days. Any other
//! `type` (`status`, `typing`, ...) is acknowledged and ignored. Replies are POSTed to
//! the configured callback URL, one POST per piece of at most 4,000 characters, as
//! `{"conversation", "user", "in_reply_to", "text", "buttons": [{"id", "title"}]}` (buttons on
//! the last piece only), signed the same way. The channel has no reactions.

use crate::signature::{given_digest, hmac_sha256, same};
use crate::{
    Channel, ChannelError, Delivered, Inbound, InboundMessage, Outgoing, RawRequest, SendError,
    Sender,
};
use async_trait::async_trait;
use serde::Deserialize;
use std::time::Duration;

/// The channel's name in jobs and conversation ids.
pub const NAME: &str = "generic";
pub const SIGNATURE_HEADER: &str = "x-bridle-signature";
pub const TIMESTAMP_HEADER: &str = "x-bridle-timestamp";
/// How far a delivery's timestamp may be from now, either way.
pub const MAX_SKEW_S: i64 = 300;

/// `sha256=<hex>` over `"{timestamp}.{body}"`.
pub fn sign(secret: &[u8], timestamp: i64, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(digest(secret, timestamp, body)))
}

fn digest(secret: &[u8], timestamp: i64, body: &[u8]) -> [u8; 32] {
    hmac_sha256(secret, &[timestamp.to_string().as_bytes(), b".", body])
}

/// The inbound side.
pub struct GenericChannel {
    secret: Vec<u8>,
}

impl std::fmt::Debug for GenericChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GenericChannel { secret: [redacted] }")
    }
}

impl GenericChannel {
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self {
            secret: secret.into(),
        }
    }
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: String,
    id: Option<String>,
    user: Option<String>,
    conversation: Option<String>,
    text: Option<String>,
    button_id: Option<String>,
}

impl Channel for GenericChannel {
    fn name(&self) -> &'static str {
        "generic"
    }

    fn verify(&self, request: &RawRequest<'_>, now_s: i64) -> Result<(), ChannelError> {
        let timestamp: i64 = request
            .header(TIMESTAMP_HEADER)
            .ok_or(ChannelError::BadSignature("missing timestamp"))?
            .trim()
            .parse()
            .map_err(|_| ChannelError::BadSignature("timestamp is not a number"))?;
        // `abs_diff`: a timestamp at the edge of `i64` (sent before any signature is checked)
        // must not overflow the subtraction.
        if now_s.abs_diff(timestamp) > MAX_SKEW_S.unsigned_abs() {
            return Err(ChannelError::BadSignature("timestamp too far from now"));
        }
        let given = given_digest(request, SIGNATURE_HEADER, "sha256=")?;
        if same(&digest(&self.secret, timestamp, request.body), &given) {
            Ok(())
        } else {
            Err(ChannelError::BadSignature("signature mismatch"))
        }
    }

    fn parse(&self, request: &RawRequest<'_>) -> Result<Inbound, ChannelError> {
        let p: Payload = serde_json::from_slice(request.body)
            .map_err(|e| ChannelError::Malformed(e.to_string()))?;
        if p.kind != "message" {
            return Ok(Inbound::Ignored {
                reason: "not a message",
            });
        }
        let field = |v: Option<String>, name: &str| {
            v.filter(|s| !s.trim().is_empty())
                .ok_or_else(|| ChannelError::Malformed(format!("a message needs `{name}`")))
        };
        let button_id = p.button_id.filter(|b| !b.is_empty());
        let text = p.text.unwrap_or_default();
        if text.trim().is_empty() && button_id.is_none() {
            return Err(ChannelError::Malformed(
                "a message needs `text` or `button_id`".into(),
            ));
        }
        Ok(Inbound::Messages(vec![InboundMessage {
            addressed_to: None,
            channel: NAME.into(),
            message_id: field(p.id, "id")?,
            external_user_id: field(p.user, "user")?,
            conversation_key: field(p.conversation, "conversation")?,
            text,
            button_id,
            media: Vec::new(),
        }]))
    }
}

/// The outbound side: POSTs signed replies to a callback URL.
pub struct GenericSender {
    client: reqwest::Client,
    callback_url: String,
    secret: Vec<u8>,
    clock: fn() -> i64,
}

impl std::fmt::Debug for GenericSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenericSender")
            .field("callback_url", &self.callback_url)
            .finish_non_exhaustive()
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl GenericSender {
    pub fn new(client: reqwest::Client, callback_url: String, secret: impl Into<Vec<u8>>) -> Self {
        Self {
            client,
            callback_url,
            secret: secret.into(),
            clock: unix_now,
        }
    }
}

/// The longest piece the generic channel sends.
pub const MAX_CHARS: usize = 4_000;

impl GenericSender {
    async fn post(&self, body: String) -> Result<(), SendError> {
        let ts = (self.clock)();
        let res = self
            .client
            .post(&self.callback_url)
            .timeout(Duration::from_secs(10))
            .header("content-type", "application/json")
            .header(TIMESTAMP_HEADER, ts.to_string())
            .header(SIGNATURE_HEADER, sign(&self.secret, ts, body.as_bytes()))
            .body(body)
            .send()
            .await
            .map_err(SendError::Transport)?;
        let status = res.status().as_u16();
        match status {
            200..=299 => Ok(()),
            429 => Err(SendError::RateLimited {
                retry_after: res
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok()?.trim().parse().ok())
                    .map(Duration::from_secs),
            }),
            408 | 500..=599 => Err(SendError::Retryable { status }),
            // The callback refused our credentials: the operator's to fix; the reply waits.
            401 => Err(SendError::Unauthorized {
                reason: "the callback refused Bridle's credentials (HTTP 401)".into(),
            }),
            _ => Err(SendError::Rejected {
                status,
                reason: "the callback refused the reply".into(),
            }),
        }
    }
}

#[async_trait]
impl Sender for GenericSender {
    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    fn has_reactions(&self) -> bool {
        false
    }

    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        let pieces = crate::split::split(&reply.text, MAX_CHARS);
        let last = pieces.len().saturating_sub(1);
        for (i, piece) in sent.rest(&pieces) {
            let buttons: Vec<serde_json::Value> = if i == last {
                reply
                    .buttons
                    .iter()
                    .map(|b| serde_json::json!({"id": b.id, "title": b.title}))
                    .collect()
            } else {
                Vec::new()
            };
            let body = serde_json::json!({
                "conversation": reply.conversation_key,
                "user": reply.external_user_id,
                "in_reply_to": reply.in_reply_to,
                "text": piece,
                "buttons": buttons,
            })
            .to_string();
            self.post(body).await?;
            sent.pieces.push(piece.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn headers(ts: i64, sig: &str) -> Vec<(String, String)> {
        vec![
            ("X-Bridle-Timestamp".into(), ts.to_string()),
            ("X-Bridle-Signature".into(), sig.into()),
        ]
    }

    fn check(body: &[u8], headers: &[(String, String)]) -> Result<Inbound, ChannelError> {
        let ch = GenericChannel::new("s3cret");
        let req = RawRequest {
            method: "POST",
            path: "/webhooks/generic",
            query: None,
            headers,
            body,
            origin: None,
        };
        ch.verify(&req, NOW)?;
        ch.parse(&req)
    }

    const MESSAGE: &[u8] =
        br#"{"type":"message","id":"m-1","user":"u-1","conversation":"c-1","text":"hi \u00e9"}"#;

    #[test]
    fn a_signed_message_parses() {
        let sig = sign(b"s3cret", NOW, MESSAGE);
        let Inbound::Messages(m) = check(MESSAGE, &headers(NOW, &sig)).unwrap() else {
            panic!("expected a message")
        };
        assert_eq!(m[0].message_id, "m-1");
        assert_eq!(m[0].text, "hi é");
        assert_eq!(m[0].conversation_key, "c-1");
    }

    #[test]
    fn signatures_are_checked_on_the_raw_bytes() {
        let sig = sign(b"s3cret", NOW, MESSAGE);
        // The same JSON re-serialised (different bytes) does not verify.
        let reserialised =
            serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(MESSAGE).unwrap())
                .unwrap();
        assert!(matches!(
            check(&reserialised, &headers(NOW, &sig)),
            Err(ChannelError::BadSignature("signature mismatch"))
        ));
        let wrong = sign(b"other", NOW, MESSAGE);
        assert!(check(MESSAGE, &headers(NOW, &wrong)).is_err());
        assert!(matches!(
            check(MESSAGE, &headers(NOW, "sha256=zz")),
            Err(ChannelError::BadSignature("malformed signature"))
        ));
        assert!(matches!(
            check(MESSAGE, &[]),
            Err(ChannelError::BadSignature("missing timestamp"))
        ));
    }

    #[test]
    fn stale_or_future_timestamps_are_refused() {
        for ts in [NOW - 301, NOW + 301] {
            let sig = sign(b"s3cret", ts, MESSAGE);
            assert!(matches!(
                check(MESSAGE, &headers(ts, &sig)),
                Err(ChannelError::BadSignature("timestamp too far from now"))
            ));
        }
        let sig = sign(b"s3cret", NOW - 300, MESSAGE);
        assert!(check(MESSAGE, &headers(NOW - 300, &sig)).is_ok());
        // Timestamps at the edges of the integer are refused, not an overflow.
        for ts in [i64::MIN, i64::MAX, i64::MIN + 1] {
            assert!(matches!(
                check(MESSAGE, &headers(ts, "sha256=00")),
                Err(ChannelError::BadSignature("timestamp too far from now"))
            ));
        }
    }

    #[test]
    fn other_events_are_ignored_and_bad_payloads_are_malformed() {
        let status = br#"{"type":"status","id":"m-1","status":"read"}"#;
        let sig = sign(b"s3cret", NOW, status);
        assert!(matches!(
            check(status, &headers(NOW, &sig)).unwrap(),
            Inbound::Ignored { .. }
        ));
        for body in [
            &b"not json"[..],
            br#"{"type":"message","id":"m","user":"u"}"#,
        ] {
            let sig = sign(b"s3cret", NOW, body);
            assert!(matches!(
                check(body, &headers(NOW, &sig)),
                Err(ChannelError::Malformed(_))
            ));
        }
    }

    #[test]
    fn debug_output_hides_the_secret() {
        assert!(!format!("{:?}", GenericChannel::new("s3cret")).contains("s3cret"));
    }
}
