use std::sync::Arc;
use std::time::Duration;

/// A request feature the product works without.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OptionalFeature {
    /// Prompt-cache points.
    PromptCache,
    /// Extended reasoning settings.
    Reasoning,
    /// A tool choice other than auto (`required`, `none`): some models cannot be made to.
    ToolChoice,
}

/// Why a model call failed, phrased as what the caller should do about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    /// Rate limited: wait (at least `retry_after`, when the provider said) and try later.
    #[error("throttled by the provider (retry after {retry_after:?})")]
    Throttled { retry_after: Option<Duration> },
    /// The provider is overloaded or the model is not ready: try again shortly.
    #[error("the provider is overloaded or the model is not ready")]
    Overloaded,
    /// No answer, or no next event, in time.
    #[error("the model call timed out after {after:?}")]
    Timeout { after: Duration },
    /// The request is larger than the model's context window: shrink it (compaction).
    #[error("the request exceeds the model's context window")]
    ContextTooLong,
    /// Credentials or permissions are wrong: an operator must fix configuration.
    #[error("not authorised to call the model: {message}")]
    Auth { message: String },
    /// The request was rejected as malformed: a bug on our side, do not retry as is.
    #[error("the provider rejected the request: {message}")]
    InvalidRequest { message: String },
    /// Replayed reasoning was rejected (e.g. a signature no longer valid): strip it and retry.
    #[error("the provider rejected replayed reasoning: {message}")]
    ReasoningRejected { message: String },
    /// The provider refused an optional feature (cache points, reasoning settings): drop the
    /// feature and carry on without it.
    #[error("the provider rejected an optional feature ({feature:?}): {message}")]
    FeatureRejected {
        feature: OptionalFeature,
        message: String,
    },
    /// The model server could not be reached at all (connection refused, no route, unknown
    /// host): it is down or the address is wrong. `endpoint` says where (never a secret).
    #[error("cannot reach the model server at {endpoint}")]
    Unreachable {
        endpoint: String,
        #[source]
        source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    },
    /// The connection or the stream broke (including malformed frames).
    #[error("transport failure: {message}")]
    Transport {
        message: String,
        #[source]
        source: Option<Arc<dyn std::error::Error + Send + Sync>>,
    },
}

impl BackendError {
    pub fn transport(message: impl Into<String>) -> Self {
        BackendError::Transport {
            message: message.into(),
            source: None,
        }
    }

    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            BackendError::Throttled { .. }
                | BackendError::Overloaded
                | BackendError::Timeout { .. }
                | BackendError::Unreachable { .. }
                | BackendError::Transport { .. }
        )
    }

    /// A short, stable name for logs, metrics and the call record (never provider text).
    pub fn kind(&self) -> &'static str {
        match self {
            BackendError::Throttled { .. } => "throttled",
            BackendError::Overloaded => "overloaded",
            BackendError::Timeout { .. } => "timeout",
            BackendError::ContextTooLong => "context_too_long",
            BackendError::Auth { .. } => "auth",
            BackendError::InvalidRequest { .. } => "invalid_request",
            BackendError::ReasoningRejected { .. } => "reasoning_rejected",
            BackendError::FeatureRejected { .. } => "feature_rejected",
            BackendError::Unreachable { .. } => "unreachable",
            BackendError::Transport { .. } => "transport",
        }
    }
}
