//! Provider failures → [`BackendError`]. Pure: HTTP status codes, `Retry-After` values and
//! `{"error": ...}` bodies in, the port's error out. No new error enum: the port's variants
//! already say what the caller should do.
//!
//! Choices:
//! - 429 → `Throttled` with the `retry-after-ms` / `Retry-After` (seconds) hint; but OpenAI's
//!   `insufficient_quota` 429 → `Auth` (billing must be fixed; retrying cannot help).
//! - 503 *with* `Retry-After` → `Throttled`, keeping the server's hint (Ollama and proxies say
//!   "busy, come back in N s" this way); 500, 502, 503, 504, 529 otherwise → `Overloaded`.
//! - 401/403 → `Auth`, whose message names only the status and the error's `code`/`type`, never
//!   the provider's text (OpenAI echoes part of a wrong key there).
//! - Context-length wording (`context_length_exceeded`, llama.cpp's `exceed_context_size_error`,
//!   "maximum context length", ...) → `ContextTooLong`, whatever the status; 413 too.
//! - A 400/422 that names `reasoning_effort` or `tool_choice` → `FeatureRejected` (the engine
//!   drops the setting and carries on without it).
//! - Other 4xx → `InvalidRequest` with a short excerpt of the body; anything left → `Transport`.
//!
//! Every excerpt is cut short and scrubbed of the API key and of `sk-...` tokens.

use backend::{BackendError, OptionalFeature};
use serde_json::Value;
use std::time::Duration;

/// At most this many characters of provider text go into an error message.
const EXCERPT_CHARS: usize = 300;

/// What an error body says, in the shapes servers use: OpenAI's
/// `{"error": {"message", "type", "code"}}`, Ollama's `{"error": "text"}`, or plain text.
#[derive(Debug, Default)]
struct Said {
    message: String,
    kind: String,
    code: String,
    param: String,
}

impl Said {
    fn from_body(body: &str) -> Self {
        match serde_json::from_str::<Value>(body) {
            Ok(value) => match value.get("error") {
                Some(error) => Self::from_error(error),
                None => Self::from_error(&value),
            },
            Err(_) => Said {
                message: body.to_owned(),
                ..Said::default()
            },
        }
    }

    fn from_error(error: &Value) -> Self {
        let text = |key: &str| match error.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        match error {
            Value::String(message) => Said {
                message: message.clone(),
                ..Said::default()
            },
            _ => Said {
                message: text("message"),
                kind: text("type"),
                code: text("code"),
                param: text("param"),
            },
        }
    }

    fn all_lowercase(&self) -> String {
        format!("{} {} {}", self.kind, self.code, self.message).to_lowercase()
    }

    fn is_context_too_long(&self) -> bool {
        let all = self.all_lowercase();
        [
            "context_length_exceeded",
            "exceed_context_size",
            "contextwindowexceeded",
            "context length",
            "context window",
            "context size",
            "maximum context",
        ]
        .iter()
        .any(|needle| all.contains(needle))
    }

    /// Whether the error names a request field (servers that refuse `reasoning_effort` or a
    /// `tool_choice` they cannot honour say so, often in `param`).
    fn names(&self, field: &str) -> bool {
        self.all_lowercase().contains(field) || self.param == field
    }

    fn is_quota(&self) -> bool {
        self.all_lowercase().contains("insufficient_quota")
    }

    /// `type`/`code` only: short identifiers, never free text.
    fn label(&self) -> String {
        match (self.kind.is_empty(), self.code.is_empty()) {
            (true, true) => String::new(),
            (false, true) => format!(" ({})", self.kind),
            (true, false) => format!(" ({})", self.code),
            (false, false) => format!(" ({}, {})", self.kind, self.code),
        }
    }

    fn excerpt(&self, api_key: Option<&str>) -> String {
        let text = if self.message.is_empty() {
            self.label().trim().to_owned()
        } else {
            self.message.clone()
        };
        excerpt(&text, api_key)
    }
}

/// The error for a non-success HTTP status, before any event was streamed.
pub(crate) fn from_http(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
    api_key: Option<&str>,
) -> BackendError {
    let said = Said::from_body(body);
    match status {
        401 | 403 => auth(status, &said, api_key),
        429 if said.is_quota() => auth(status, &said, api_key),
        429 => BackendError::Throttled { retry_after },
        503 if retry_after.is_some() => BackendError::Throttled { retry_after },
        413 => BackendError::ContextTooLong,
        _ if said.is_context_too_long() => BackendError::ContextTooLong,
        500 | 502 | 503 | 504 | 529 => BackendError::Overloaded,
        408 => BackendError::transport(format!("HTTP 408: {}", said.excerpt(api_key))),
        400 | 422 if said.names("reasoning_effort") => BackendError::FeatureRejected {
            feature: OptionalFeature::Reasoning,
            message: format!("HTTP {status}: {}", said.excerpt(api_key)),
        },
        400 | 422 if said.names("tool_choice") => BackendError::FeatureRejected {
            feature: OptionalFeature::ToolChoice,
            message: format!("HTTP {status}: {}", said.excerpt(api_key)),
        },
        400..=499 => BackendError::InvalidRequest {
            message: format!("HTTP {status}: {}", said.excerpt(api_key)),
        },
        500..=599 => BackendError::Overloaded,
        _ => BackendError::transport(format!(
            "unexpected HTTP {status}: {}",
            said.excerpt(api_key)
        )),
    }
}

/// The error for an `{"error": ...}` object that arrived inside the event stream (or as a JSON
/// body where an event stream was expected). Servers put an HTTP-like status in `code`.
pub(crate) fn from_error_object(error: &Value) -> BackendError {
    let said = Said::from_error(error);
    let all = said.all_lowercase();
    let status = said.code.parse::<u16>().ok();
    if said.is_quota() {
        auth(status.unwrap_or(429), &said, None)
    } else if said.is_context_too_long() {
        BackendError::ContextTooLong
    } else if status == Some(429) || all.contains("rate_limit") || all.contains("rate limit") {
        BackendError::Throttled { retry_after: None }
    } else if matches!(status, Some(503 | 529)) || all.contains("overloaded") {
        BackendError::Overloaded
    } else if matches!(status, Some(401 | 403)) || all.contains("authentication") {
        auth(status.unwrap_or(401), &said, None)
    } else if matches!(status, Some(400 | 404 | 422))
        || all.contains("invalid_request")
        || all.contains("badrequest")
    {
        BackendError::InvalidRequest {
            message: said.excerpt(None),
        }
    } else {
        BackendError::transport(format!("the server reported: {}", said.excerpt(None)))
    }
}

fn auth(status: u16, said: &Said, api_key: Option<&str>) -> BackendError {
    BackendError::Auth {
        message: excerpt(
            &format!(
                "HTTP {status}{}; check the API key, its permissions and quota",
                said.label()
            ),
            api_key,
        ),
    }
}

/// A `Retry-After` hint: `retry-after-ms` (OpenAI) wins over `Retry-After` in seconds. The
/// HTTP-date form is not supported (no server of this API family sends it).
pub(crate) fn parse_retry_after(seconds: Option<&str>, millis: Option<&str>) -> Option<Duration> {
    let parse = |value: Option<&str>, per_second: f64| {
        let number = value?.trim().parse::<f64>().ok()?;
        Duration::try_from_secs_f64(number / per_second).ok()
    };
    parse(millis, 1000.0).or_else(|| parse(seconds, 1.0))
}

/// Provider text fit for an error message: one line, at most [`EXCERPT_CHARS`], no secrets.
pub(crate) fn excerpt(text: &str, api_key: Option<&str>) -> String {
    let mut text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(key) = api_key.filter(|k| !k.is_empty()) {
        text = text.replace(key, "[redacted]");
    }
    let text = redact_sk_tokens(&text);
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// `sk-abc123...` → `sk-[redacted]` (OpenAI-style keys, even partly masked ones).
fn redact_sk_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("sk-") {
        out.push_str(&rest[..at]);
        out.push_str("sk-[redacted]");
        let after = &rest[at + 3..];
        let end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '*' | '.')))
            .unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "sk-proj-SECRETSECRET1234";

    fn secs(s: u64) -> Option<Duration> {
        Some(Duration::from_secs(s))
    }

    #[test]
    fn a_refused_reasoning_effort_or_tool_choice_is_a_feature_to_drop() {
        let feature = |body: &str| match from_http(400, None, body, None) {
            BackendError::FeatureRejected { feature, .. } => Some(feature),
            _ => None,
        };
        assert_eq!(
            feature(
                r#"{"error":{"message":"Unrecognized request argument supplied: reasoning_effort","type":"invalid_request_error","param":null}}"#
            ),
            Some(OptionalFeature::Reasoning)
        );
        assert_eq!(
            feature(
                r#"{"error":{"message":"Unsupported value: 'required' is not supported with this model.","type":"invalid_request_error","param":"tool_choice"}}"#
            ),
            Some(OptionalFeature::ToolChoice)
        );
        assert_eq!(
            feature(r#"{"detail":"tool_choice required is not supported by this server"}"#),
            None,
            "only an error object is read for its words"
        );
        assert_eq!(feature(r#"{"error":"bad field"}"#), None);
    }

    #[test]
    fn statuses_map_to_what_the_caller_should_do() {
        assert!(matches!(
            from_http(429, secs(7), "{}", None),
            BackendError::Throttled { retry_after } if retry_after == secs(7)
        ));
        assert!(matches!(
            from_http(503, secs(2), "busy", None),
            BackendError::Throttled { retry_after } if retry_after == secs(2)
        ));
        for status in [500, 502, 503, 504, 529, 599] {
            assert!(matches!(
                from_http(status, None, "oops", None),
                BackendError::Overloaded
            ));
        }
        for status in [400, 404, 422, 409] {
            assert!(matches!(
                from_http(status, None, "{\"error\":{\"message\":\"bad field\"}}", None),
                BackendError::InvalidRequest { message } if message == format!("HTTP {status}: bad field")
            ));
        }
        assert!(matches!(
            from_http(413, None, "", None),
            BackendError::ContextTooLong
        ));
        assert!(matches!(
            from_http(408, None, "", None),
            BackendError::Transport { .. }
        ));
    }

    #[test]
    fn context_length_is_recognised_in_each_servers_wording() {
        let bodies = [
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}"#,
            r#"{"error":{"message":"litellm.ContextWindowExceededError: too long","type":null}}"#,
        ];
        for body in bodies {
            assert!(
                matches!(
                    from_http(400, None, body, None),
                    BackendError::ContextTooLong
                ),
                "{body}"
            );
        }
    }

    #[test]
    fn auth_errors_never_carry_the_key_or_provider_text() {
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. You can find your API key at ...","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
        );
        let err = from_http(401, None, &body, Some(KEY));
        let shown = err.to_string();
        assert!(matches!(err, BackendError::Auth { .. }));
        assert!(!shown.contains("SECRET"), "{shown}");
        assert!(shown.contains("invalid_api_key"), "{shown}");

        let quota = r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert!(matches!(
            from_http(429, secs(1), quota, None),
            BackendError::Auth { .. }
        ));
    }

    #[test]
    fn excerpts_are_short_single_line_and_scrubbed() {
        let long = format!("bad\n\n  input {KEY} and sk-abc***xyz {}", "x".repeat(1000));
        let e = excerpt(&long, Some(KEY));
        assert!(
            e.starts_with("bad input [redacted] and sk-[redacted] xxx"),
            "{e}"
        );
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert!(!e.contains("SECRET") && !e.contains("abc"));
    }

    #[test]
    fn in_stream_error_objects() {
        let cases = [
            (
                json!({"message": "Rate limit reached", "type": "rate_limit_exceeded"}),
                "throttled",
            ),
            (json!({"message": "busy", "code": 503}), "overloaded"),
            (
                json!({"message": "maximum context length is 4096"}),
                "context_too_long",
            ),
            (
                json!({"message": "bad", "type": "BadRequestError", "code": 400}),
                "invalid_request",
            ),
            (
                json!({"message": "boom", "type": "server_error"}),
                "transport",
            ),
            (json!("model 'x' crashed"), "transport"),
        ];
        for (error, kind) in cases {
            assert_eq!(from_error_object(&error).kind(), kind, "{error}");
        }
    }

    #[test]
    fn retry_after_headers() {
        assert_eq!(parse_retry_after(Some("7"), None), secs(7));
        assert_eq!(
            parse_retry_after(Some("7"), Some("1500")),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(Some("0.5"), None),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            parse_retry_after(Some("Wed, 21 Oct 2015 07:28:00 GMT"), None),
            None
        );
        assert_eq!(parse_retry_after(Some("-1"), None), None);
        assert_eq!(parse_retry_after(None, None), None);
    }
}
