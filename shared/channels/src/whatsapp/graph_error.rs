//! A Graph API error response → what the caller should do.
//!
//! Errors come as `{"error":{"message","type","code","error_subcode","fbtrace_id"}}`. The code
//! decides before the HTTP status does, because Meta answers a throttle or an expired window
//! with a plain 400.

use crate::SendError;
use serde::Deserialize;
use std::time::Duration;

/// Graph codes that mean "slow down": app (4), business account (80007), Cloud API
/// throughput (130429) and per-recipient pair (131056) rate limits.
const RATE_LIMIT_CODES: [i64; 4] = [4, 80_007, 130_429, 131_056];
/// "Re-engagement message": more than 24 h since the user last wrote.
const REENGAGEMENT_CODE: i64 = 131_047;
/// The Graph API's "invalid OAuth access token" (expired, revoked, or the app's secret reset).
const TOKEN_CODE: i64 = 190;
/// The longest Graph message kept in a rejection reason.
const MAX_REASON_CHARS: usize = 160;

#[derive(Deserialize)]
struct Envelope {
    error: GraphError,
}

#[derive(Deserialize)]
struct GraphError {
    #[serde(default)]
    message: String,
    #[serde(rename = "type", default)]
    kind: String,
    code: Option<i64>,
    error_subcode: Option<i64>,
    fbtrace_id: Option<String>,
}

/// Map a non-2xx answer. `retry_after` is the `Retry-After` header, if any; `secret` is
/// scrubbed from the reason in case the platform ever echoes it.
pub(super) fn classify(
    status: u16,
    retry_after: Option<Duration>,
    body: &[u8],
    secret: &str,
) -> SendError {
    let graph = serde_json::from_slice::<Envelope>(body)
        .ok()
        .map(|e| e.error);
    if let Some(g) = &graph {
        tracing::warn!(
            status,
            code = g.code,
            subcode = g.error_subcode,
            kind = %g.kind,
            fbtrace_id = g.fbtrace_id.as_deref().unwrap_or_default(),
            "WhatsApp refused a message"
        );
    } else {
        tracing::warn!(status, "WhatsApp refused a message (no Graph error body)");
    }
    let code = graph.as_ref().and_then(|g| g.code);
    match (code, status) {
        (Some(c), _) if RATE_LIMIT_CODES.contains(&c) => SendError::RateLimited { retry_after },
        (Some(REENGAGEMENT_CODE), _) => SendError::OutsideWindow,
        (Some(TOKEN_CODE), _) | (_, 401) => SendError::Unauthorized {
            reason: format!(
                "WhatsApp refused the access token (WHATSAPP_ACCESS_TOKEN; {})",
                graph.map_or_else(|| "no code".to_owned(), |g| reason(&g, secret))
            ),
        },
        (_, 429) => SendError::RateLimited { retry_after },
        (_, 408 | 500..=599) => SendError::Retryable { status },
        _ => SendError::Rejected {
            status,
            reason: graph.map_or_else(
                || "the WhatsApp API refused the message".to_owned(),
                |g| reason(&g, secret),
            ),
        },
    }
}

fn reason(g: &GraphError, secret: &str) -> String {
    let scrubbed = if secret.is_empty() {
        g.message.clone()
    } else {
        g.message.replace(secret, "[redacted]")
    };
    let message: String = scrubbed.chars().take(MAX_REASON_CHARS).collect();
    let code = match (g.code, g.error_subcode) {
        (Some(c), Some(s)) => format!("code {c}/{s}"),
        (Some(c), None) => format!("code {c}"),
        _ => "no code".to_owned(),
    };
    format!("{code} {}: {message}", g.kind).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: i64, message: &str) -> Vec<u8> {
        serde_json::json!({"error": {"message": message, "type": "OAuthException", "code": code,
            "error_subcode": 2_494_010, "fbtrace_id": "Az8or2yhqkZfEZ-_4Qn_Bam"}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn codes_decide_before_statuses() {
        for code in RATE_LIMIT_CODES {
            let e = classify(400, Some(Duration::from_secs(7)), &err(code, "slow"), "");
            assert!(
                matches!(e, SendError::RateLimited { retry_after: Some(d) } if d.as_secs() == 7)
            );
        }
        assert!(matches!(
            classify(400, None, &err(131_047, "Re-engagement message"), ""),
            SendError::OutsideWindow
        ));
        // An expired or revoked token is the operator's to fix: retried, never dropped.
        for status in [400, 401] {
            let e = classify(status, None, &err(190, "Error validating access token"), "");
            assert!(
                matches!(&e, SendError::Unauthorized { .. }) && e.is_retryable(),
                "{e:?}"
            );
        }
    }

    #[test]
    fn statuses_decide_otherwise() {
        assert!(matches!(
            classify(429, None, b"", ""),
            SendError::RateLimited { retry_after: None }
        ));
        assert!(matches!(
            classify(500, None, &err(131_000, "Something went wrong"), ""),
            SendError::Retryable { status: 500 }
        ));
        assert!(matches!(
            classify(408, None, b"<html>", ""),
            SendError::Retryable { status: 408 }
        ));
        let SendError::Rejected { status, reason } = classify(403, None, b"nope", "") else {
            panic!("expected a rejection")
        };
        assert_eq!(status, 403);
        assert_eq!(reason, "the WhatsApp API refused the message");
    }

    #[test]
    fn reasons_are_short_and_never_carry_the_token() {
        let long = format!("Invalid token EAAG-secret-token {}", "x".repeat(500));
        let SendError::Unauthorized { reason } =
            classify(400, None, &err(190, &long), "EAAG-secret-token")
        else {
            panic!("expected the token refused")
        };
        assert!(!reason.contains("EAAG-secret-token"), "{reason}");
        assert!(
            reason.starts_with(
                "WhatsApp refused the access token (WHATSAPP_ACCESS_TOKEN; code 190/2494010 OAuthException: Invalid token"
            ),
            "{reason}"
        );
        assert!(reason.chars().count() < 300);
    }
}
