//! Slack's request signing: `X-Slack-Signature: v0=<hex HMAC-SHA256(signing secret,
//! "v0:{X-Slack-Request-Timestamp}:{raw body}")>`, refused when the timestamp is more than
//! [`MAX_SKEW_S`] from now.

use crate::signature::{given_digest, hmac_sha256, same};
use crate::{ChannelError, RawRequest};

/// The header carrying the signature (matched case-insensitively).
pub const SIGNATURE_HEADER: &str = "x-slack-signature";
/// The header carrying the Unix time (seconds) the request was signed at.
pub const TIMESTAMP_HEADER: &str = "x-slack-request-timestamp";
/// The header Slack adds when it delivers an event again (`1`, `2`, `3`).
pub const RETRY_NUM_HEADER: &str = "x-slack-retry-num";
/// How far a request's timestamp may be from now, either way (Slack's recommended 5 minutes).
pub const MAX_SKEW_S: u64 = 300;
/// The only signature version Slack uses so far.
const VERSION: &str = "v0";

fn mac(secret: &[u8], timestamp: &str, body: &[u8]) -> [u8; 32] {
    hmac_sha256(
        secret,
        &[VERSION.as_bytes(), b":", timestamp.as_bytes(), b":", body],
    )
}

/// The `X-Slack-Signature` value Slack would send: `v0=<lowercase hex>` over
/// `"v0:{timestamp}:{body}"`, the timestamp exactly as it appears in the header. For tests and
/// fakes.
pub fn sign(signing_secret: &[u8], timestamp: &str, body: &[u8]) -> String {
    format!(
        "{VERSION}={}",
        hex::encode(mac(signing_secret, timestamp, body))
    )
}

/// Whether Slack is delivering this event again (it retries up to 3 times when an answer was
/// not a 2xx within 3 seconds). A retry is verified and parsed like the first delivery; it
/// carries the same `channel:ts`, so the queue's dedupe turns it into a no-op.
pub fn is_retry(request: &RawRequest<'_>) -> bool {
    request.header(RETRY_NUM_HEADER).is_some()
}

/// Check timestamp and signature on the raw bytes, in constant time.
pub(super) fn check(
    signing_secret: &[u8],
    request: &RawRequest<'_>,
    now_s: i64,
) -> Result<(), ChannelError> {
    let timestamp = request
        .header(TIMESTAMP_HEADER)
        .ok_or(ChannelError::BadSignature("missing timestamp"))?;
    let ts: i64 = Some(timestamp)
        .filter(|t| !t.is_empty() && t.len() <= 18 && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse().ok())
        .ok_or(ChannelError::BadSignature("timestamp is not a number"))?;
    if now_s.abs_diff(ts) > MAX_SKEW_S {
        return Err(ChannelError::BadSignature("timestamp too far from now"));
    }
    let given = given_digest(request, SIGNATURE_HEADER, "v0=")?;
    if signing_secret.is_empty() {
        return Err(ChannelError::BadSignature("no signing secret configured"));
    }
    if same(&mac(signing_secret, timestamp, request.body), &given) {
        Ok(())
    } else {
        Err(ChannelError::BadSignature("signature mismatch"))
    }
}
