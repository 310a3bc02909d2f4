//! SDK errors, mapped to what the caller should do.

use aws_sdk_sqs::error::ProvideErrorMetadata;
use queue::QueueError;

/// The codes SQS answers `DeleteMessage` / `ChangeMessageVisibility` with when the receipt no
/// longer names a live delivery: never issued, expired (FIFO: the visibility timeout passed or
/// the message was released), or the message is gone or not in flight.
const STALE_RECEIPT_CODES: [&str; 3] = [
    "ReceiptHandleIsInvalid",
    // "Value … for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
    // The receipt is the only parameter of ours that can be invalid.
    "InvalidParameterValue",
    "AWS.SimpleQueueService.MessageNotInflight",
];

/// Whether SQS refused this message itself (characters it does not allow; longer than the
/// queue's largest), so that sending it again cannot help. SQS also answers
/// `InvalidParameterValue` for a queue set up wrong (a deduplication id on a standard queue,
/// say): that one is not the message's fault, and stays an outage the platform retries (and
/// the 5xx alarm reports).
fn refuses_the_message(code: &str, message: &str) -> bool {
    code == "InvalidMessageContents"
        || (code == "InvalidParameterValue" && message.contains("Message must be shorter"))
}

/// Anything else: connection, timeout, throttling, a missing queue. The caller may retry.
pub(crate) fn unavailable(err: impl std::error::Error + Send + Sync + 'static) -> QueueError {
    QueueError::Unavailable(Box::new(err))
}

/// An `ack` / `release` failure.
pub(crate) fn receipt<E>(err: E) -> QueueError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    if is_stale_receipt(&err) {
        QueueError::StaleReceipt
    } else {
        unavailable(err)
    }
}

/// A `SendMessage` failure.
pub(crate) fn send<E>(err: E) -> QueueError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    match err.code() {
        Some(code) if refuses_the_message(code, err.message().unwrap_or_default()) => {
            QueueError::Rejected {
                reason: format!(
                    "SQS refused the message ({code}): {}",
                    err.message().unwrap_or("no message")
                ),
            }
        }
        _ => unavailable(err),
    }
}

fn is_stale_receipt(err: &impl ProvideErrorMetadata) -> bool {
    err.code()
        .is_some_and(|code| STALE_RECEIPT_CODES.contains(&code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sqs::error::ErrorMetadata;
    use aws_sdk_sqs::operation::change_message_visibility::ChangeMessageVisibilityError;
    use aws_sdk_sqs::operation::delete_message::DeleteMessageError;
    use aws_sdk_sqs::operation::send_message::SendMessageError;

    fn meta(code: &str) -> ErrorMetadata {
        ErrorMetadata::builder()
            .code(code)
            .message("the service said so")
            .build()
    }

    #[test]
    fn receipt_errors_are_stale_and_the_rest_retryable() {
        for code in STALE_RECEIPT_CODES {
            assert!(matches!(
                receipt(DeleteMessageError::generic(meta(code))),
                QueueError::StaleReceipt
            ));
            assert!(matches!(
                receipt(ChangeMessageVisibilityError::generic(meta(code))),
                QueueError::StaleReceipt
            ));
        }
        for code in [
            "RequestThrottled",
            "ThrottlingException",
            "AWS.SimpleQueueService.NonExistentQueue",
            "InternalError",
        ] {
            let err = receipt(DeleteMessageError::generic(meta(code)));
            assert!(matches!(err, QueueError::Unavailable(_)), "{code}: {err:?}");
        }
    }

    #[test]
    fn a_refused_message_is_rejected_and_the_rest_retryable() {
        match send(SendMessageError::generic(meta("InvalidMessageContents"))) {
            QueueError::Rejected { reason } => {
                assert!(reason.contains("InvalidMessageContents"), "{reason}")
            }
            other => panic!("expected Rejected, got {other:?}"),
        }
        // Too long, in SQS's words: the message's fault.
        let too_long = ErrorMetadata::builder()
            .code("InvalidParameterValue")
            .message(
                "One or more parameters are invalid. Reason: Message must be shorter than \
                 262144 bytes.",
            )
            .build();
        assert!(matches!(
            send(SendMessageError::generic(too_long)),
            QueueError::Rejected { .. }
        ));
        // The same code for a queue set up wrong is not the message's fault: an outage.
        let misconfigured = ErrorMetadata::builder()
            .code("InvalidParameterValue")
            .message("The request include parameter that is not valid for this queue type.")
            .build();
        assert!(matches!(
            send(SendMessageError::generic(misconfigured)),
            QueueError::Unavailable(_)
        ));
        let err = send(SendMessageError::generic(meta("RequestThrottled")));
        let QueueError::Unavailable(source) = err else {
            panic!("expected Unavailable, got {err:?}");
        };
        assert!(
            source.downcast_ref::<SendMessageError>().is_some(),
            "the SDK error is kept as the source"
        );
    }
}
