use store::StoreError;
use transcript::ConversationId;

/// Why a turn could not run. Model and tool failures are not here: they end in a reply.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("conversation {0} does not exist")]
    ConversationNotFound(ConversationId),
    /// Storage failed or another writer appended first: retry the job later.
    #[error("storage failed during the turn")]
    Store(#[from] StoreError),
}
