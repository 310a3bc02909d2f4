use async_trait::async_trait;

/// A reply to deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub conversation_key: String,
    pub external_user_id: String,
    /// The platform message this answers.
    pub in_reply_to: String,
    pub text: String,
}

/// Why a reply could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The platform is rate limiting or down: retry later.
    #[error("the platform did not accept the reply for now (HTTP {status})")]
    Retryable { status: u16 },
    /// The platform refused it (bad token, blocked user): retrying will not help.
    #[error("the platform refused the reply (HTTP {status})")]
    Rejected { status: u16 },
    #[error("could not reach the platform")]
    Transport(#[source] reqwest::Error),
}

/// Delivers replies on one platform.
#[async_trait]
pub trait Sender: Send + Sync {
    async fn send(&self, reply: &Reply) -> Result<(), SendError>;
}
