/// A queue failure, phrased as what the caller should do.
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    /// The job could not be encoded or is too large for the queue.
    #[error("the job was rejected: {reason}")]
    Rejected { reason: String },
    /// The receipt no longer names a live delivery (it timed out and was redelivered, or was
    /// already acknowledged). Do not retry.
    #[error("stale receipt")]
    StaleReceipt,
    /// The queue failed (I/O, connection, throttling); the operation may be retried.
    #[error("queue unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}
