/// A storage failure, phrased as what the caller should do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The key is taken (a concurrent writer got there first): reload and decide again.
    #[error("conflict: {what} already exists")]
    Conflict { what: String },
    /// The record to update does not exist.
    #[error("not found: {what}")]
    NotFound { what: String },
    /// The request cannot be stored as given (a caller bug): fix the call, do not retry it.
    #[error("invalid: {what}")]
    Invalid { what: String },
    /// The request would take something past a limit the store keeps (an action more than one
    /// undo can take back, see `MAX_ACTION_WEIGHT`, `MAX_ROW_BYTES`; a record past
    /// `MAX_RECORD_BYTES`): nothing was written; do not retry it.
    #[error("too large: {what}")]
    TooLarge { what: String },
    /// A stored row could not be decoded: data corruption or a schema mismatch.
    #[error("corrupt record {what}")]
    Corrupt {
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The backing store failed (I/O, connection, throttling); the operation may be retried.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}
