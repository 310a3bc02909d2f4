/// How a tool handler failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// An expected failure of the domain ("that event is already cancelled"). The model sees the
    /// message and can act on it.
    #[error("{message}")]
    Domain { code: String, message: String },
    /// Anything else: a bug or an outage. The model sees a generic message; the log gets this.
    #[error(transparent)]
    Internal(Box<dyn std::error::Error + Send + Sync>),
}

impl ToolError {
    pub fn domain(code: &str, message: impl Into<String>) -> Self {
        ToolError::Domain {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    pub fn internal(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        ToolError::Internal(err.into())
    }
}

/// Why a tool could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("a tool named {0:?} is already registered")]
    Duplicate(String),
    #[error("tool name {0:?} must be 1-64 characters of [a-zA-Z0-9_-]")]
    BadName(String),
    #[error("the input schema of {name:?} is not a valid JSON Schema object: {reason}")]
    BadSchema { name: String, reason: String },
}
