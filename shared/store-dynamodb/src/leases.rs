//! `Leases`: one item per leased conversation (`CONV#<id>` / `LEASE`). Taking or renewing a
//! lease is one conditional `PutItem` that admits only a missing item, an expired lease or the
//! same holder; a refusal is explained from the old item the failed condition returns. The
//! item's `ttl` lets DynamoDB clear leases whose holder died.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{get_n, get_s, n, s, ttl_for};
use crate::keys::{LEASE, PK, SK, TTL, conversation_pk};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::types::{
    Delete, Put, ReturnValuesOnConditionCheckFailure, TransactWriteItem,
};
use store::{Lease, Leases, StoreError};
use transcript::ConversationId;

const HOLDER: &str = "holder";
const EXPIRES_AT_MS: &str = "expires_at_ms";

/// How often a lease is tried again when its refusal cannot be explained because the item
/// vanished in between (released or deleted by TTL). Each try is one conditional write.
const TRIES: usize = 3;

/// The condition of taking a lease: none there, the caller's own, or lapsed.
const LEASE_FREE: &str = "attribute_not_exists(pk) OR #holder = :holder OR #expires <= :now";

#[async_trait]
impl Leases for DynamoStore {
    async fn acquire_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<Lease, StoreError> {
        let what = format!("lease of {conversation}");
        for _ in 0..TRIES {
            let put = self
                .client
                .put_item()
                .table_name(&self.table)
                .item(PK, s(conversation_pk(conversation)))
                .item(SK, s(LEASE))
                .item(HOLDER, s(holder))
                .item(EXPIRES_AT_MS, n(expires_at_ms))
                .item(TTL, n(ttl_for(expires_at_ms)))
                .condition_expression(LEASE_FREE)
                .expression_attribute_names("#holder", HOLDER)
                .expression_attribute_names("#expires", EXPIRES_AT_MS)
                .expression_attribute_values(":holder", s(holder))
                .expression_attribute_values(":now", n(now_ms))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                )
                .send()
                .await;
            let old = match put {
                Ok(_) => return Ok(Lease::Held),
                Err(SdkError::ServiceError(e))
                    if e.err().is_conditional_check_failed_exception() =>
                {
                    match e.into_err() {
                        PutItemError::ConditionalCheckFailedException(ccf) => ccf.item,
                        _ => None,
                    }
                }
                Err(e) => return Err(unavailable(e)),
            };
            if let Some(old) = old {
                return Ok(Lease::Busy {
                    holder: get_s(&old, HOLDER, &what)?.to_owned(),
                    until_ms: get_n(&old, EXPIRES_AT_MS, &what)?,
                });
            }
        }
        Err(StoreError::Unavailable(
            format!("{what}: refused {TRIES} times, but no lease is there").into(),
        ))
    }

    async fn release_lease(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<(), StoreError> {
        let deleted = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(conversation_pk(conversation)))
            .key(SK, s(LEASE))
            .condition_expression("#holder = :holder")
            .expression_attribute_names("#holder", HOLDER)
            .expression_attribute_values(":holder", s(holder))
            .send()
            .await;
        match deleted {
            Ok(_) => Ok(()),
            // Gone, or lapsed and taken by someone else: not ours to release.
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {
                Ok(())
            }
            Err(e) => Err(unavailable(e)),
        }
    }
}

impl DynamoStore {
    /// [`Leases::acquire_lease`] as a transaction's put: refused (cancelling the transaction)
    /// when another holder's lease is live.
    pub(crate) fn lease_take(
        &self,
        conversation: &ConversationId,
        holder: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .item(PK, s(conversation_pk(conversation)))
            .item(SK, s(LEASE))
            .item(HOLDER, s(holder))
            .item(EXPIRES_AT_MS, n(expires_at_ms))
            .item(TTL, n(ttl_for(expires_at_ms)))
            .condition_expression(LEASE_FREE)
            .expression_attribute_names("#holder", HOLDER)
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_values(":holder", s(holder))
            .expression_attribute_values(":now", n(now_ms))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// [`Leases::release_lease`] as a transaction's delete: refused (cancelling the
    /// transaction) when `holder` no longer holds the lease.
    pub(crate) fn lease_release(
        &self,
        conversation: &ConversationId,
        holder: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .key(PK, s(conversation_pk(conversation)))
            .key(SK, s(LEASE))
            .condition_expression("#holder = :holder")
            .expression_attribute_names("#holder", HOLDER)
            .expression_attribute_values(":holder", s(holder))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }
}
