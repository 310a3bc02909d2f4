use crate::HttpResponse;
use serde_json::json;

/// Every way a delivery is refused, and the one place each becomes an HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("no such webhook route")]
    NoRoute,
    #[error("only POST is accepted")]
    MethodNotAllowed,
    #[error("body over the {limit}-byte limit")]
    TooLarge { limit: usize },
    #[error("{channel}: content type {given:?} is not one this platform sends")]
    WrongContentType {
        channel: &'static str,
        given: String,
    },
    #[error("{channel}: signature check failed")]
    Unverified {
        channel: &'static str,
        #[source]
        source: channels::ChannelError,
    },
    #[error("{channel}: malformed delivery")]
    Malformed {
        channel: &'static str,
        #[source]
        source: channels::ChannelError,
    },
    #[error("could not enqueue the job")]
    QueueFailed(#[source] queue::QueueError),
}

impl Refusal {
    /// The answer: a status and a body that names no internals.
    pub fn response(&self) -> HttpResponse {
        let (status, error) = match self {
            Refusal::NoRoute => (404, "no such webhook".to_owned()),
            Refusal::MethodNotAllowed => (405, "only POST is accepted".to_owned()),
            Refusal::TooLarge { limit } => (413, format!("body over the {limit}-byte limit")),
            Refusal::WrongContentType { .. } => (
                415,
                "this webhook takes the content type its platform sends".to_owned(),
            ),
            Refusal::Unverified { .. } => (401, "signature check failed".to_owned()),
            Refusal::Malformed { .. } => (400, "malformed delivery".to_owned()),
            Refusal::QueueFailed(_) => (500, "internal error; the platform will retry".to_owned()),
        };
        HttpResponse {
            status,
            content_type: "application/json",
            body: json!({ "error": error }).to_string(),
        }
    }

    /// The raw cause goes to the log (and the metric of rejects by reason).
    pub fn log(&self) {
        let reason = self.reason();
        match self {
            Refusal::QueueFailed(e) => {
                tracing::error!(reason, error = %e, source = ?std::error::Error::source(e), "webhook failed")
            }
            Refusal::Unverified { source, .. } | Refusal::Malformed { source, .. } => {
                tracing::warn!(reason, detail = %source, "webhook rejected")
            }
            _ => tracing::warn!(reason, "webhook rejected"),
        }
    }

    /// A short stable name, for logs and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::NoRoute => "no_route",
            Refusal::MethodNotAllowed => "method",
            Refusal::TooLarge { .. } => "too_large",
            Refusal::WrongContentType { .. } => "content_type",
            Refusal::Unverified { .. } => "bad_signature",
            Refusal::Malformed { .. } => "malformed",
            Refusal::QueueFailed(_) => "queue_failed",
        }
    }
}
