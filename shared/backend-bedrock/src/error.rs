//! SDK failures → [`BackendError`]. No new error enum: the port's variants already say what the
//! caller should do. Two entry points: the call failing before any event
//! ([`from_open_error`], a `ConverseStreamError`), and the stream failing after it opened
//! ([`from_stream_error`], a `ConverseStreamOutputError` or an event-stream decode failure).
//!
//! Choices:
//! - `ThrottlingException` → `Throttled` (Bedrock sends no retry hint, so `retry_after` is
//!   `None`); `ServiceUnavailableException`, `ModelNotReadyException`,
//!   `InternalServerException` and `ModelErrorException` → `Overloaded`;
//!   `ModelTimeoutException` → `Timeout` after the time the call took.
//! - `ValidationException`, by its wording, in this order: `ReasoningRejected` when it says a
//!   replayed thinking/reasoning signature (or redacted thinking) is invalid (checked first, so
//!   a signature problem is never taken for a settings problem); `ContextTooLong` when the input
//!   is too long for the model (Bedrock's and each model family's phrasing);
//!   `FeatureRejected { PromptCache }` when it refuses prompt caching or names cache points;
//!   `FeatureRejected { Reasoning }` when it refuses the reasoning settings (an extraneous or
//!   unsupported `thinking`/`reasoning_config` key, a bad budget); `FeatureRejected {
//!   ToolChoice }` when it names `toolChoice` (a model that cannot be made to call a tool);
//!   else `InvalidRequest`.
//! - `AccessDeniedException` → `FeatureRejected { PromptCache }` when it is Bedrock's prompt
//!   caching refusal ("... your request did not allow prompt caching"), else `Auth`, as are the
//!   signing/credential codes (`UnrecognizedClientException`, `ExpiredTokenException`, ...);
//!   `ResourceNotFoundException` → `InvalidRequest`.
//! - `ModelStreamErrorException` → by the model's original status: 429 → `Throttled`, 5xx →
//!   `Overloaded`, otherwise `Transport`.
//! - A request that could not be built or signed (no credentials, no region) → `Auth`: an
//!   operator must fix configuration.
//! - A connection that cannot be made (an I/O failure before any response: refused, no route)
//!   → `Unreachable`, naming the endpoint. Other connection, timeout and response failures, and
//!   event-stream decode failures (a bad CRC, a frame cut off by a closed connection) →
//!   `Transport`, with the SDK error as `source`.
//! - Other codes by HTTP status: 401/403 → `Auth`, 429 → `Throttled`, 5xx → `Overloaded`, 4xx
//!   → `InvalidRequest`, anything else → `Transport`.
//!
//! Provider text in messages is cut short, kept on one line and scrubbed of AWS access key ids.

use aws_sdk_bedrockruntime::config::http::HttpResponse;
use aws_sdk_bedrockruntime::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_bedrockruntime::operation::converse_stream::ConverseStreamError;
use aws_sdk_bedrockruntime::types::error::{ConverseStreamOutputError, ModelStreamErrorException};
use aws_smithy_types::event_stream::RawMessage;
use backend::{BackendError, OptionalFeature};
use std::sync::Arc;
use std::time::Duration;

/// At most this many characters of provider text go into an error message.
const EXCERPT_CHARS: usize = 300;

/// How Bedrock and the models behind it say the input does not fit the context window.
const CONTEXT_TOO_LONG: &[&str] = &[
    "input is too long",      // Bedrock: "Input is too long for requested model."
    "too many input tokens",  // "Too many input tokens. Max input tokens: ..."
    "input tokens exceed",    // Nova: "Number of input tokens exceeds maximum length."
    "prompt is too long",     // Anthropic: "prompt is too long: 210000 tokens > 200000"
    "exceed context limit",   // Anthropic: "input length and `max_tokens` exceed context limit"
    "context window",         // "... exceeds the model's context window"
    "context_window",         // model_context_window_exceeded
    "maximum context length", // Llama, Mistral
];

/// How Bedrock refuses cache points: its own refusal (as `ValidationException` or
/// `AccessDeniedException`) and any validation message that names them.
const PROMPT_CACHE_REFUSED: &[&str] = &[
    "did not allow prompt caching", // "You invoked an unsupported model or your request did not allow prompt caching."
    "prompt caching",
    "cachepoint",
    "cache point",
    "cache_point",
    "cache_control", // Anthropic's own name, in "The model returned the following errors: ..."
];

/// The parameter names under which reasoning is requested.
const REASONING_KEYS: &[&str] = &[
    "thinking",
    "reasoning_config",
    "reasoningconfig",
    "reasoning_effort",
];

/// How a model says it does not take a parameter.
const NOT_ACCEPTED: &[&str] = &[
    "extraneous key",                 // "#: extraneous key [thinking] is not permitted"
    "extra inputs are not permitted", // "thinking: Extra inputs are not permitted"
    "not supported",
    "unsupported",
    "not permitted",
    "not allowed",
];

/// The error for a call that failed before any event. `elapsed` is how long the call took
/// (reported for the model's own timeout).
/// `endpoint` is where the call went, named when it could not connect at all.
pub(crate) fn from_open_error(
    err: SdkError<ConverseStreamError, HttpResponse>,
    elapsed: Duration,
    endpoint: &str,
) -> BackendError {
    match err {
        SdkError::DispatchFailure(ref failure)
            if failure.as_connector_error().is_some_and(|c| c.is_io()) =>
        {
            BackendError::Unreachable {
                endpoint: endpoint.to_owned(),
                source: Some(Arc::new(err)),
            }
        }
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            from_service_error(context.into_err(), status, elapsed)
        }
        SdkError::ConstructionFailure(_) => BackendError::Auth {
            message: format!(
                "could not build a signed request to Bedrock; check credentials, region and \
                 endpoint configuration ({})",
                excerpt(&DisplayErrorContext(&err).to_string())
            ),
        },
        SdkError::TimeoutError(_) => transport("the request to Bedrock timed out", err),
        SdkError::DispatchFailure(_) => transport("could not reach Bedrock", err),
        SdkError::ResponseError(_) => transport("Bedrock's response could not be read", err),
        _ => transport("the call to Bedrock failed", err),
    }
}

/// The error for a modelled `ConverseStream` failure with this HTTP status.
pub(crate) fn from_service_error(
    err: ConverseStreamError,
    status: u16,
    elapsed: Duration,
) -> BackendError {
    use ConverseStreamError as E;
    match err {
        E::ThrottlingException(_) => BackendError::Throttled { retry_after: None },
        E::ServiceUnavailableException(_)
        | E::ModelNotReadyException(_)
        | E::InternalServerException(_)
        | E::ModelErrorException(_) => BackendError::Overloaded,
        E::ModelTimeoutException(_) => BackendError::Timeout { after: elapsed },
        E::ValidationException(e) => from_validation(e.message().unwrap_or_default()),
        E::AccessDeniedException(e) => access_denied("AccessDeniedException", e.message()),
        E::ResourceNotFoundException(e) => BackendError::InvalidRequest {
            message: format!(
                "the model or resource was not found: {}",
                excerpt(e.message().unwrap_or_default())
            ),
        },
        E::ModelStreamErrorException(e) => from_model_stream_error(e),
        other => from_code(other.code(), other.message(), Some(status)),
    }
}

/// The error for a stream that failed after it opened.
pub(crate) fn from_stream_error(
    err: SdkError<ConverseStreamOutputError, RawMessage>,
) -> BackendError {
    match err {
        SdkError::ServiceError(context) => from_stream_exception(context.into_err()),
        SdkError::ResponseError(_) => transport(
            "the event stream was malformed or cut off (bad frame, checksum or length)",
            err,
        ),
        SdkError::DispatchFailure(_) => {
            transport("the connection to Bedrock broke mid-stream", err)
        }
        _ => transport("the Bedrock stream failed", err),
    }
}

/// The error for an exception frame inside the stream.
pub(crate) fn from_stream_exception(err: ConverseStreamOutputError) -> BackendError {
    use ConverseStreamOutputError as E;
    match err {
        E::ThrottlingException(_) => BackendError::Throttled { retry_after: None },
        E::ServiceUnavailableException(_) | E::InternalServerException(_) => {
            BackendError::Overloaded
        }
        E::ValidationException(e) => from_validation(e.message().unwrap_or_default()),
        E::ModelStreamErrorException(e) => from_model_stream_error(e),
        other => from_code(other.code(), other.message(), None),
    }
}

/// A `ValidationException`, told apart by its wording.
pub(crate) fn from_validation(message: &str) -> BackendError {
    let lower = message.to_lowercase();
    if is_reasoning_rejection(&lower) {
        BackendError::ReasoningRejected {
            message: excerpt(message),
        }
    } else if CONTEXT_TOO_LONG.iter().any(|needle| lower.contains(needle)) {
        BackendError::ContextTooLong
    } else if is_prompt_cache_refusal(&lower) {
        feature_rejected(OptionalFeature::PromptCache, message)
    } else if is_reasoning_settings_refusal(&lower) {
        feature_rejected(OptionalFeature::Reasoning, message)
    } else if lower.contains("toolchoice") {
        feature_rejected(OptionalFeature::ToolChoice, message)
    } else {
        BackendError::InvalidRequest {
            message: excerpt(message),
        }
    }
}

/// An `AccessDeniedException`: Bedrock's prompt-caching refusal, or a permissions problem.
fn access_denied(code: &str, message: Option<&str>) -> BackendError {
    let said = message.unwrap_or_default();
    if is_prompt_cache_refusal(&said.to_lowercase()) {
        feature_rejected(OptionalFeature::PromptCache, said)
    } else {
        auth(code, message)
    }
}

fn feature_rejected(feature: OptionalFeature, message: &str) -> BackendError {
    BackendError::FeatureRejected {
        feature,
        message: excerpt(message),
    }
}

fn is_prompt_cache_refusal(lower: &str) -> bool {
    PROMPT_CACHE_REFUSED
        .iter()
        .any(|needle| lower.contains(needle))
}

fn is_reasoning_settings_refusal(lower: &str) -> bool {
    let names_reasoning = REASONING_KEYS.iter().any(|key| lower.contains(key));
    let refused = NOT_ACCEPTED.iter().any(|needle| lower.contains(needle))
        || lower.contains("budget_tokens")
        || lower.contains("when thinking is enabled");
    names_reasoning && refused
}

fn is_reasoning_rejection(lower: &str) -> bool {
    let about_reasoning = lower.contains("thinking") || lower.contains("reasoning");
    (lower.contains("signature") && about_reasoning)
        || (lower.contains("invalid") && lower.contains("redacted"))
}

fn from_model_stream_error(err: ModelStreamErrorException) -> BackendError {
    match err.original_status_code() {
        Some(429) => BackendError::Throttled { retry_after: None },
        Some(500..=599) => BackendError::Overloaded,
        _ => {
            let said = err.original_message().or(err.message()).unwrap_or_default();
            BackendError::Transport {
                message: format!("the model's stream failed: {}", excerpt(said)),
                source: Some(Arc::new(err)),
            }
        }
    }
}

/// An error the SDK does not model, by its code and (when known) HTTP status.
fn from_code(code: Option<&str>, message: Option<&str>, status: Option<u16>) -> BackendError {
    let code = code.unwrap_or_default();
    let lower = code.to_lowercase();
    let is_auth_code = [
        "accessdenied",
        "unrecognizedclient",
        "invalidsignature",
        "incompletesignature",
        "expiredtoken",
        "missingauthenticationtoken",
    ]
    .iter()
    .any(|c| lower.contains(c));
    if is_auth_code || matches!(status, Some(401 | 403)) {
        return access_denied(code, message);
    }
    if lower.contains("throttl") || lower.contains("quotaexceeded") || status == Some(429) {
        return BackendError::Throttled { retry_after: None };
    }
    if lower.contains("validation") {
        return from_validation(message.unwrap_or_default());
    }
    let said = format!("{code}: {}", excerpt(message.unwrap_or_default()));
    match status {
        Some(500..=599) => BackendError::Overloaded,
        Some(400..=499) => BackendError::InvalidRequest { message: said },
        _ => BackendError::transport(format!("Bedrock reported {said}")),
    }
}

fn auth(code: &str, message: Option<&str>) -> BackendError {
    BackendError::Auth {
        message: format!(
            "{code}: {}; check the credentials and the role's Bedrock permissions",
            excerpt(message.unwrap_or_default())
        ),
    }
}

fn transport<E>(message: &str, err: E) -> BackendError
where
    E: std::error::Error + Send + Sync + 'static,
{
    BackendError::Transport {
        message: message.to_owned(),
        source: Some(Arc::new(err)),
    }
}

/// Provider text fit for an error message: one line, at most [`EXCERPT_CHARS`], no access key
/// ids.
pub(crate) fn excerpt(text: &str) -> String {
    let text = redact_access_key_ids(&text.split_whitespace().collect::<Vec<_>>().join(" "));
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// `AKIA…`/`ASIA…` (and the other IAM unique-id prefixes) followed by 16 upper-case letters or
/// digits → `[redacted]`.
fn redact_access_key_ids(text: &str) -> String {
    const PREFIXES: &[&str] = &["AKIA", "ASIA", "AIDA", "AROA", "ANPA", "AGPA", "AIPA"];
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i + 20 <= bytes.len() {
        let id = &bytes[i..i + 20];
        let is_id = PREFIXES.iter().any(|p| id.starts_with(p.as_bytes()))
            && id[4..]
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        if is_id {
            out.push_str(&text[copied..i]);
            out.push_str("[redacted]");
            i += 20;
            copied = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_bedrockruntime::error::ErrorMetadata;
    use aws_sdk_bedrockruntime::types::error::{
        AccessDeniedException, InternalServerException, ModelErrorException,
        ModelNotReadyException, ModelTimeoutException, ResourceNotFoundException,
        ServiceUnavailableException, ThrottlingException, ValidationException,
    };

    const ELAPSED: Duration = Duration::from_secs(42);

    fn open(err: ConverseStreamError, status: u16) -> BackendError {
        from_service_error(err, status, ELAPSED)
    }

    fn validation(message: &str) -> ConverseStreamError {
        ConverseStreamError::ValidationException(
            ValidationException::builder().message(message).build(),
        )
    }

    fn generic(code: &str, message: &str) -> ErrorMetadata {
        ErrorMetadata::builder().code(code).message(message).build()
    }

    fn stream_error(code: u16, message: &str) -> ModelStreamErrorException {
        ModelStreamErrorException::builder()
            .message("The model stream failed.")
            .original_status_code(code.into())
            .original_message(message)
            .build()
    }

    #[test]
    fn modelled_open_errors_say_what_to_do() {
        use ConverseStreamError as E;
        let cases: Vec<(ConverseStreamError, u16, &str)> = vec![
            (
                E::ThrottlingException(
                    ThrottlingException::builder()
                        .message("Too many requests")
                        .build(),
                ),
                429,
                "throttled",
            ),
            (
                E::ServiceUnavailableException(ServiceUnavailableException::builder().build()),
                503,
                "overloaded",
            ),
            (
                E::ModelNotReadyException(ModelNotReadyException::builder().build()),
                429,
                "overloaded",
            ),
            (
                E::InternalServerException(InternalServerException::builder().build()),
                500,
                "overloaded",
            ),
            (
                E::ModelErrorException(ModelErrorException::builder().build()),
                424,
                "overloaded",
            ),
            (
                E::AccessDeniedException(
                    AccessDeniedException::builder()
                        .message("You don't have access to the model with the specified model ID.")
                        .build(),
                ),
                403,
                "auth",
            ),
            (
                E::ResourceNotFoundException(ResourceNotFoundException::builder().build()),
                404,
                "invalid_request",
            ),
            (
                validation("Malformed input request, please reformat"),
                400,
                "invalid_request",
            ),
            (
                E::ModelStreamErrorException(stream_error(503, "busy")),
                424,
                "overloaded",
            ),
            (
                E::generic(generic("UnrecognizedClientException", "bad token")),
                403,
                "auth",
            ),
            (
                E::generic(generic("ServiceQuotaExceededException", "quota")),
                400,
                "throttled",
            ),
            (
                E::generic(generic("SomethingNew", "?")),
                409,
                "invalid_request",
            ),
            (E::generic(generic("SomethingNew", "?")), 502, "overloaded"),
            (E::generic(generic("SomethingNew", "?")), 302, "transport"),
        ];
        for (err, status, kind) in cases {
            let shown = format!("{err:?}");
            assert_eq!(open(err, status).kind(), kind, "{shown}");
        }
        assert!(matches!(
            open(
                E::ModelTimeoutException(ModelTimeoutException::builder().build()),
                408
            ),
            BackendError::Timeout { after } if after == ELAPSED
        ));
    }

    #[test]
    fn context_too_long_in_each_wording() {
        for message in [
            "Input is too long for requested model.",
            "Too many input tokens. Max input tokens: 8192, request input token count: 9000",
            "Input Tokens Exceeded: Number of input tokens exceeds maximum length.",
            "The model returned the following errors: prompt is too long: 210000 tokens > 200000 maximum",
            "The model returned the following errors: input length and `max_tokens` exceed context limit: 199000 + 21333 > 200000, decrease input length or `max_tokens` and try again",
            "This model's maximum context length is 8192 tokens. Please reduce the length of the prompt",
            "The input exceeds the model's context window.",
        ] {
            assert!(
                matches!(open(validation(message), 400), BackendError::ContextTooLong),
                "{message}"
            );
        }
    }

    #[test]
    fn rejected_reasoning_is_told_apart() {
        for message in [
            "The model returned the following errors: messages.1.content.0: Invalid `signature` in `thinking` block",
            "The reasoning signature in the request is invalid.",
            "messages.3.content.0: Invalid `data` in `redacted_thinking` block",
        ] {
            assert!(
                matches!(
                    open(validation(message), 400),
                    BackendError::ReasoningRejected { .. }
                ),
                "{message}"
            );
        }
        // Thinking is on and the last assistant message lacks it: our request is wrong.
        let message = "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`.";
        assert!(matches!(
            open(validation(message), 400),
            BackendError::InvalidRequest { .. }
        ));
    }

    fn feature(err: &BackendError) -> Option<OptionalFeature> {
        match err {
            BackendError::FeatureRejected { feature, .. } => Some(*feature),
            _ => None,
        }
    }

    const CACHE_REFUSED: &str = "You invoked an unsupported model or your request did not allow prompt caching. See the documentation for more information.";

    #[test]
    fn bedrocks_prompt_cache_refusal_as_validation_or_access_denied() {
        let as_validation = open(validation(CACHE_REFUSED), 400);
        assert_eq!(
            feature(&as_validation),
            Some(OptionalFeature::PromptCache),
            "{as_validation:?}"
        );
        let as_access_denied = open(
            ConverseStreamError::AccessDeniedException(
                AccessDeniedException::builder()
                    .message(CACHE_REFUSED)
                    .build(),
            ),
            403,
        );
        assert_eq!(
            feature(&as_access_denied),
            Some(OptionalFeature::PromptCache),
            "{as_access_denied:?}"
        );
        // Unmodelled, mid-stream, by code and status: the same.
        let in_stream = from_stream_exception(ConverseStreamOutputError::generic(generic(
            "accessDeniedException",
            CACHE_REFUSED,
        )));
        assert_eq!(feature(&in_stream), Some(OptionalFeature::PromptCache));
        // A plain permissions problem stays an operator's problem.
        let denied = open(
            ConverseStreamError::AccessDeniedException(
                AccessDeniedException::builder()
                    .message("You don't have access to the model with the specified model ID.")
                    .build(),
            ),
            403,
        );
        assert!(matches!(denied, BackendError::Auth { .. }), "{denied:?}");
    }

    #[test]
    fn validation_messages_naming_cache_points_reject_prompt_caching() {
        for message in [
            "Malformed input request: #/system/1: extraneous key [cachePoint] is not permitted, please reformat your input and try again.",
            "The model does not support cache point in tools.",
            "Prompt caching is not supported for this model.",
            "The model returned the following errors: A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ] {
            let err = open(validation(message), 400);
            assert_eq!(
                feature(&err),
                Some(OptionalFeature::PromptCache),
                "{message}"
            );
        }
    }

    #[test]
    fn rejected_reasoning_settings() {
        for message in [
            "Malformed input request: #: extraneous key [thinking] is not permitted, please reformat your input and try again.",
            "The model returned the following errors: thinking: Extra inputs are not permitted",
            "reasoning_config is not supported by this model",
            "The model returned the following errors: thinking.budget_tokens: Input should be greater than or equal to 1024",
            "The model returned the following errors: `temperature` may only be set to 1 when thinking is enabled.",
        ] {
            let err = open(validation(message), 400);
            assert_eq!(feature(&err), Some(OptionalFeature::Reasoning), "{message}");
        }
    }

    #[test]
    fn an_invalid_signature_is_never_taken_for_a_settings_problem() {
        for message in [
            "The model returned the following errors: messages.39.content.0: Invalid signature in thinking block",
            "The model returned the following errors: messages.39.content.0: Invalid `signature` in `thinking` block",
            // Even when the wording also says something is not permitted or names caching.
            "messages.3.content.0: Invalid signature in thinking block; thinking blocks are not permitted to change (prompt caching)",
        ] {
            assert!(
                matches!(
                    open(validation(message), 400),
                    BackendError::ReasoningRejected { .. }
                ),
                "{message}"
            );
        }
    }

    #[test]
    fn feature_rejections_keep_the_secret_scrubbing() {
        let err = open(
            validation(&format!("{CACHE_REFUSED} (caller AKIAIOSFODNN7EXAMPLE)")),
            400,
        );
        let shown = format!("{err} / {err:?}");
        assert_eq!(feature(&err), Some(OptionalFeature::PromptCache));
        assert!(!shown.contains("AKIAIOSFODNN7EXAMPLE"), "{shown}");
        assert!(shown.contains("caller [redacted]"), "{shown}");
    }

    #[test]
    fn stream_exceptions() {
        use ConverseStreamOutputError as E;
        let cases: Vec<(ConverseStreamOutputError, &str)> = vec![
            (
                E::ThrottlingException(ThrottlingException::builder().build()),
                "throttled",
            ),
            (
                E::ServiceUnavailableException(ServiceUnavailableException::builder().build()),
                "overloaded",
            ),
            (
                E::InternalServerException(InternalServerException::builder().build()),
                "overloaded",
            ),
            (
                E::ValidationException(
                    ValidationException::builder()
                        .message("Input is too long for requested model.")
                        .build(),
                ),
                "context_too_long",
            ),
            (
                E::ModelStreamErrorException(stream_error(429, "slow down")),
                "throttled",
            ),
            (
                E::ModelStreamErrorException(stream_error(529, "overloaded")),
                "overloaded",
            ),
            (
                E::ModelStreamErrorException(stream_error(400, "bad output")),
                "transport",
            ),
            (
                E::generic(generic("modelTimeoutException", "late")),
                "transport",
            ),
            (E::generic(generic("throttlingException", "x")), "throttled"),
        ];
        for (err, kind) in cases {
            let shown = format!("{err:?}");
            assert_eq!(from_stream_exception(err).kind(), kind, "{shown}");
        }
    }

    #[test]
    fn a_model_stream_error_keeps_its_source() {
        let err = from_stream_exception(ConverseStreamOutputError::ModelStreamErrorException(
            stream_error(400, "the model produced invalid output"),
        ));
        assert!(
            err.to_string()
                .contains("the model produced invalid output"),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some());
    }

    #[test]
    fn messages_never_carry_access_key_ids() {
        let err = open(
            ConverseStreamError::generic(generic(
                "InvalidSignatureException",
                "The request signature we calculated does not match. Credential=AKIAIOSFODNN7EXAMPLE/20240101/us-east-1/bedrock/aws4_request",
            )),
            403,
        );
        let shown = format!("{err} / {err:?}");
        assert!(matches!(err, BackendError::Auth { .. }));
        assert!(!shown.contains("AKIAIOSFODNN7EXAMPLE"), "{shown}");
        assert!(shown.contains("Credential=[redacted]/20240101"), "{shown}");
    }

    #[test]
    fn excerpts_are_short_and_on_one_line() {
        let long = format!("bad\n\n  input {}", "x".repeat(1000));
        let e = excerpt(&long);
        assert!(e.starts_with("bad input xxx"), "{e}");
        assert_eq!(e.chars().count(), EXCERPT_CHARS + 1);
        assert_eq!(
            redact_access_key_ids("ASIAABCDEFGHIJKLMNOP."),
            "[redacted]."
        );
        assert_eq!(redact_access_key_ids("AKIA too short"), "AKIA too short");
        assert_eq!(redact_access_key_ids("ünïcode ☕ AKIA"), "ünïcode ☕ AKIA");
    }
}
