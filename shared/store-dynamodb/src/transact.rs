//! Sending a `TransactWriteItems` again when DynamoDB cancelled it only because another
//! transaction was writing one of its items at that moment (cancellation reason
//! `TransactionConflict`). Every budget write — a reservation, a settlement, a turn's first
//! write with its reservation, an answer with its settlement — touches the deployment's one
//! `global` budget item, so under load two of them meet there often; the SDK does not retry a
//! cancelled transaction, and before this a collision read as the store being unavailable: a
//! reservation refused while the budget had room, a give-back lost (the user charged the whole
//! unused allowance), an answer's write taken for "maybe written" and the turn failed.
//!
//! A cancelled transaction wrote nothing, so sending it again is safe; each send carries its own
//! `ClientRequestToken` (the SDK makes one per send and keeps it across its own retries of a lost
//! answer). A cancellation for any other reason (a condition that failed, above all) is
//! answered at once, as before.

use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::builders::TransactWriteItemsFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::{
    TransactWriteItemsError, TransactWriteItemsOutput,
};
use aws_sdk_dynamodb::types::CancellationReason;
use std::time::Duration;

/// How many times a transaction cancelled by conflicts alone is sent again.
pub(crate) const CONFLICT_RETRIES: u32 = 3;

/// `request` sent, and sent again (up to [`CONFLICT_RETRIES`] times, after a short, jittered
/// pause that grows) while DynamoDB cancels it for conflicts with other transactions only.
pub(crate) async fn send(
    request: TransactWriteItemsFluentBuilder,
) -> Result<TransactWriteItemsOutput, SdkError<TransactWriteItemsError>> {
    let mut retries = 0;
    loop {
        match request.clone().send().await {
            Err(err) if retries < CONFLICT_RETRIES && conflicts_only(&err) => {
                retries += 1;
                tracing::info!(
                    retry = retries,
                    "a transaction met another on the same item; sent again"
                );
                tokio::time::sleep(pause(retries)).await;
            }
            sent => return sent,
        }
    }
}

/// `item`, one conditional write, sent as a transaction of its own so that it is applied once:
/// a plain `PutItem` or `DeleteItem` whose answer is lost (a timeout, a 500) is sent again by
/// the SDK, and its own first write then fails its condition, which would read as someone
/// else's (a Yes press's record taken by another, a sign-in a replay, an unlink of a chat not
/// linked). A transaction's `ClientRequestToken` makes DynamoDB answer the repeat as it answered
/// the first. `Ok(false)`: the condition was false, nothing written. It costs twice the write
/// units of a plain write: only for rare writes a caller decides on.
pub(crate) async fn write_once(
    client: &aws_sdk_dynamodb::Client,
    item: aws_sdk_dynamodb::types::TransactWriteItem,
) -> Result<bool, store::StoreError> {
    match send(client.transact_write_items().transact_items(item)).await {
        Ok(_) => Ok(true),
        Err(err) => match crate::error::write_error(err, || store::StoreError::Conflict {
            what: String::new(),
        }) {
            store::StoreError::Conflict { .. } => Ok(false),
            other => Err(other),
        },
    }
}

/// Whether `err` is a cancellation whose only reasons are conflicts with other transactions.
fn conflicts_only(err: &SdkError<TransactWriteItemsError>) -> bool {
    match err.as_service_error() {
        Some(TransactWriteItemsError::TransactionCanceledException(e)) => {
            only_conflicts(e.cancellation_reasons())
        }
        _ => false,
    }
}

/// At least one item cancelled for `TransactionConflict`, and every other for nothing.
fn only_conflicts(reasons: &[CancellationReason]) -> bool {
    let codes: Vec<&str> = reasons.iter().map(|r| r.code().unwrap_or("None")).collect();
    codes.contains(&"TransactionConflict")
        && codes
            .iter()
            .all(|c| matches!(*c, "TransactionConflict" | "None"))
}

/// The pause before retry `n` (from 1): 10 ms × 2ⁿ⁻¹, plus up to 10 ms from the clock, so
/// transactions that met do not meet again on the same beat.
fn pause(n: u32) -> Duration {
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() % 10_000_000);
    Duration::from_millis(10 << (n - 1).min(4)) + Duration::from_nanos(u64::from(jitter))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reasons(codes: &[Option<&str>]) -> Vec<CancellationReason> {
        codes
            .iter()
            .map(|c| {
                CancellationReason::builder()
                    .set_code(c.map(str::to_owned))
                    .build()
            })
            .collect()
    }

    #[test]
    fn only_conflicts_are_sent_again() {
        assert!(only_conflicts(&reasons(&[Some("TransactionConflict")])));
        assert!(only_conflicts(&reasons(&[
            Some("None"),
            Some("TransactionConflict"),
            None
        ])));
        // A failed condition decides: the caller reads which item refused.
        assert!(!only_conflicts(&reasons(&[
            Some("TransactionConflict"),
            Some("ConditionalCheckFailed")
        ])));
        assert!(!only_conflicts(&reasons(&[Some("None"), Some("None")])));
        assert!(!only_conflicts(&reasons(&[Some("ThrottlingError")])));
        assert!(!only_conflicts(&[]));
    }

    #[test]
    fn pauses_grow_and_stay_short() {
        for n in 1..=CONFLICT_RETRIES {
            let p = pause(n);
            let base = Duration::from_millis(10 << (n - 1));
            assert!(
                p >= base && p < base + Duration::from_millis(10),
                "{n}: {p:?}"
            );
        }
    }
}
