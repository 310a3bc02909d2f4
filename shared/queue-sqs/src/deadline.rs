//! A deadline on every SQS call, whatever the client's timeout configuration.

use crate::error::unavailable;
use queue::QueueError;
use std::time::Duration;

/// An SQS call that did not answer within its deadline.
#[derive(Debug, thiserror::Error)]
#[error("SQS {operation} did not answer within {after:?}")]
struct NoAnswer {
    operation: &'static str,
    after: Duration,
}

/// `call`, abandoned as [`QueueError::Unavailable`] after `after`.
pub(crate) async fn within<T>(
    after: Duration,
    operation: &'static str,
    call: impl Future<Output = T>,
) -> Result<T, QueueError> {
    tokio::time::timeout(after, call)
        .await
        .map_err(|_| unavailable(NoAnswer { operation, after }))
}
