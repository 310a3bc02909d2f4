//! SDK errors mapped to what the caller should do. Pure: tested on constructed errors.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use store::StoreError;

/// Operation errors that can say "the condition expression was false".
pub(crate) trait ConditionFailed {
    fn condition_failed(&self) -> bool;
}

impl ConditionFailed for PutItemError {
    fn condition_failed(&self) -> bool {
        self.is_conditional_check_failed_exception()
    }
}

impl ConditionFailed for DeleteItemError {
    fn condition_failed(&self) -> bool {
        self.is_conditional_check_failed_exception()
    }
}

impl ConditionFailed for UpdateItemError {
    fn condition_failed(&self) -> bool {
        self.is_conditional_check_failed_exception()
    }
}

/// A transaction fails its condition when any of its items did.
impl ConditionFailed for TransactWriteItemsError {
    fn condition_failed(&self) -> bool {
        match self {
            Self::TransactionCanceledException(e) => e
                .cancellation_reasons()
                .iter()
                .any(|r| r.code() == Some("ConditionalCheckFailed")),
            _ => false,
        }
    }
}

/// A failed conditional write: `refused()` when the condition was false (`Conflict`,
/// `NotFound`), [`StoreError::Unavailable`] for anything else (throttling, internal errors,
/// timeouts, connection failures, a missing table, a transaction conflict).
pub(crate) fn write_error<E, R>(
    err: SdkError<E, R>,
    refused: impl FnOnce() -> StoreError,
) -> StoreError
where
    E: ConditionFailed + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    if err
        .as_service_error()
        .is_some_and(ConditionFailed::condition_failed)
    {
        refused()
    } else {
        unavailable(err)
    }
}

/// Any error as [`StoreError::Unavailable`], kept as the source.
pub(crate) fn unavailable(err: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::Unavailable(Box::new(err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::error::{ConnectorError, ErrorMetadata};
    use aws_sdk_dynamodb::types::CancellationReason;
    use aws_sdk_dynamodb::types::error::{
        ConditionalCheckFailedException, InternalServerError,
        ProvisionedThroughputExceededException, RequestLimitExceeded, TransactionCanceledException,
    };

    fn conflict() -> StoreError {
        StoreError::Conflict { what: "x".into() }
    }

    fn service<E>(err: E) -> SdkError<E, ()> {
        SdkError::service_error(err, ())
    }

    fn check<E>(err: SdkError<E, ()>) -> StoreError
    where
        E: ConditionFailed + std::error::Error + Send + Sync + 'static,
    {
        write_error(err, conflict)
    }

    #[test]
    fn a_false_condition_is_the_refusal() {
        let ccf = ConditionalCheckFailedException::builder().build();
        let put = check(service(PutItemError::ConditionalCheckFailedException(
            ccf.clone(),
        )));
        assert!(matches!(put, StoreError::Conflict { .. }), "{put:?}");
        let update = write_error(
            service(UpdateItemError::ConditionalCheckFailedException(ccf)),
            || StoreError::NotFound { what: "x".into() },
        );
        assert!(matches!(update, StoreError::NotFound { .. }), "{update:?}");
    }

    #[test]
    fn throttling_and_service_faults_are_unavailable() {
        let errors = [
            PutItemError::ProvisionedThroughputExceededException(
                ProvisionedThroughputExceededException::builder().build(),
            ),
            PutItemError::RequestLimitExceeded(RequestLimitExceeded::builder().build()),
            PutItemError::InternalServerError(InternalServerError::builder().build()),
            // Throttling in the request-rate sense arrives unmodelled, by code.
            PutItemError::generic(ErrorMetadata::builder().code("ThrottlingException").build()),
        ];
        for err in errors {
            let mapped = check(service(err));
            assert!(matches!(mapped, StoreError::Unavailable(_)), "{mapped:?}");
        }
    }

    #[test]
    fn transport_failures_are_unavailable_with_source() {
        let dispatch: SdkError<PutItemError, ()> =
            SdkError::dispatch_failure(ConnectorError::io("connection refused".into()));
        let timeout: SdkError<PutItemError, ()> = SdkError::timeout_error("deadline passed");
        for err in [dispatch, timeout] {
            let mapped = check(err);
            let StoreError::Unavailable(source) = &mapped else {
                panic!("expected Unavailable, got {mapped:?}");
            };
            assert!(
                source
                    .downcast_ref::<SdkError<PutItemError, ()>>()
                    .is_some()
            );
        }
    }

    #[test]
    fn a_transaction_conflicts_only_on_a_false_condition() {
        let cancelled = |code: &str| {
            TransactWriteItemsError::TransactionCanceledException(
                TransactionCanceledException::builder()
                    .cancellation_reasons(CancellationReason::builder().code(code).build())
                    .cancellation_reasons(CancellationReason::builder().code("None").build())
                    .build(),
            )
        };
        let refused = check(service(cancelled("ConditionalCheckFailed")));
        assert!(
            matches!(refused, StoreError::Conflict { .. }),
            "{refused:?}"
        );
        let raced = check(service(cancelled("TransactionConflict")));
        assert!(matches!(raced, StoreError::Unavailable(_)), "{raced:?}");
    }
}
