//! Slack Web API answers → [`SendError`]. Slack reports most failures as HTTP 200 with
//! `{"ok": false, "error": "<code>"}`; HTTP statuses only carry rate limits (429) and outages.

use crate::SendError;
use serde::Deserialize;
use std::time::Duration;

/// Why a Web API call failed, before it becomes a [`SendError`]: reactions treat some Slack
/// error codes as harmless.
#[derive(Debug)]
pub(super) enum Failure {
    /// `{"ok": false, "error": code}`.
    Api {
        code: String,
        retry_after: Option<Duration>,
    },
    /// Anything else, already classified.
    Other(SendError),
}

/// The parts of a Web API answer that matter here.
#[derive(Deserialize)]
struct Answer {
    ok: bool,
    error: Option<String>,
}

/// A Slack error code is `snake_case`; keep it that way (and short) so a reason never carries
/// more than the code.
fn sanitize(code: &str) -> String {
    let clean: String = code
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(64)
        .collect();
    if clean.is_empty() {
        "unknown_error".into()
    } else {
        clean
    }
}

/// Classify one HTTP answer: its status, `Retry-After` (seconds) and body.
pub(super) fn classify(
    status: u16,
    retry_after: Option<Duration>,
    body: &[u8],
) -> Result<(), Failure> {
    match status {
        429 => return Err(Failure::Other(SendError::RateLimited { retry_after })),
        408 | 500..=599 => return Err(Failure::Other(SendError::Retryable { status })),
        _ => {}
    }
    match serde_json::from_slice::<Answer>(body) {
        Ok(Answer { ok: true, .. }) if (200..300).contains(&status) => Ok(()),
        Ok(Answer { error, .. }) => Err(Failure::Api {
            code: sanitize(error.as_deref().unwrap_or("")),
            retry_after,
        }),
        // Not Slack's JSON: do not guess whether the message went out, so do not retry.
        Err(_) if (200..300).contains(&status) => Err(Failure::Other(SendError::Rejected {
            status,
            reason: "unreadable answer from Slack".into(),
        })),
        Err(_) => Err(Failure::Other(SendError::Rejected {
            status,
            reason: format!("HTTP {status}"),
        })),
    }
}

impl From<Failure> for SendError {
    /// Slack error codes map to what to do; the HTTP status reported for an `ok: false` answer
    /// is nominal (Slack sent 200): 401 auth, 403 permission, 404 not found, 400 otherwise.
    fn from(failure: Failure) -> Self {
        let (code, retry_after) = match failure {
            Failure::Other(e) => return e,
            Failure::Api { code, retry_after } => (code, retry_after),
        };
        let status = match code.as_str() {
            "ratelimited" | "rate_limited" => return SendError::RateLimited { retry_after },
            "fatal_error" | "internal_error" => return SendError::Retryable { status: 500 },
            "service_unavailable" => return SendError::Retryable { status: 503 },
            "request_timeout" => return SendError::Retryable { status: 408 },
            "invalid_auth" | "not_authed" | "account_inactive" | "token_revoked"
            | "token_expired" => {
                return SendError::Unauthorized {
                    reason: format!("Slack refused the bot token (SLACK_BOT_TOKEN; {code})"),
                };
            }
            "no_permission" => 401,
            "not_in_channel"
            | "missing_scope"
            | "restricted_action"
            | "is_archived"
            | "team_access_not_granted"
            | "ekm_access_denied" => 403,
            "channel_not_found" | "message_not_found" | "user_not_found" => 404,
            _ => 400,
        };
        SendError::Rejected {
            status,
            reason: code,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(status: u16, body: &str) -> SendError {
        classify(status, Some(Duration::from_secs(7)), body.as_bytes())
            .unwrap_err()
            .into()
    }

    #[test]
    fn ok_answers_pass() {
        assert!(classify(200, None, br#"{"ok":true,"ts":"1.2"}"#).is_ok());
    }

    #[test]
    fn slack_error_codes_say_what_to_do() {
        let rate = error(200, r#"{"ok":false,"error":"ratelimited"}"#);
        assert!(
            matches!(rate, SendError::RateLimited { retry_after: Some(d) } if d.as_secs() == 7)
        );
        for code in ["fatal_error", "internal_error", "service_unavailable"] {
            let e = error(200, &format!(r#"{{"ok":false,"error":"{code}"}}"#));
            assert!(matches!(e, SendError::Retryable { .. }), "{code}");
        }
        for code in [
            "invalid_auth",
            "not_authed",
            "account_inactive",
            "token_revoked",
            "token_expired",
        ] {
            let e = error(200, &format!(r#"{{"ok":false,"error":"{code}"}}"#));
            assert!(
                matches!(&e, SendError::Unauthorized { reason } if reason.contains(code))
                    && e.is_retryable(),
                "{code}: {e:?}"
            );
        }
        for (code, status) in [
            ("no_permission", 401),
            ("not_in_channel", 403),
            ("channel_not_found", 404),
            ("msg_too_long", 400),
        ] {
            let e = error(200, &format!(r#"{{"ok":false,"error":"{code}"}}"#));
            assert!(
                matches!(&e, SendError::Rejected { status: s, reason } if *s == status && reason == code),
                "{code}: {e:?}"
            );
        }
    }

    #[test]
    fn http_statuses_and_odd_bodies() {
        assert!(matches!(error(429, ""), SendError::RateLimited { .. }));
        assert!(matches!(
            error(502, "<html>"),
            SendError::Retryable { status: 502 }
        ));
        assert!(matches!(
            error(408, ""),
            SendError::Retryable { status: 408 }
        ));
        assert!(matches!(
            error(404, "nope"),
            SendError::Rejected { status: 404, .. }
        ));
        assert!(matches!(
            error(200, "<html>"),
            SendError::Rejected { status: 200, .. }
        ));
        let e = error(200, r#"{"ok":false,"error":"xoxb-123 <secret> stuff"}"#);
        assert!(matches!(&e, SendError::Rejected { reason, .. } if reason == "xoxb123secretstuff"));
        let e = error(200, r#"{"ok":false}"#);
        assert!(matches!(&e, SendError::Rejected { reason, .. } if reason == "unknown_error"));
    }
}
