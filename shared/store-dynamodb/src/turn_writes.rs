//! `TurnWrites`: a job's fresh claim and its conversation's lease as one `TransactWriteItems`
//! (each conditioned as `claim_job` and `acquire_lease`; a refused claim is explained from the
//! old item the cancellation carries, anything else is done one by one); the conversation and its user's account read in one `BatchGetItem`
//! (strongly consistent); a turn's closing writes as one `TransactWriteItems` — the reply's visible entry
//! (its head conditioned on a free position, as `append_visible`), the lease's delete
//! (conditioned on its holder, as `release_lease`) and the job's claim marked done (as
//! `finish_job`). Three calls become one; a false condition cancels all of them. And a turn's
//! start (`start_turn`'s transaction) with its first model call's budget reservation. And a tool
//! message with its last call's result (`put_tool_result`, then `append_message`): two become
//! one, with the next model call's budget reservation (its conditional updates first) when one
//! is given. And a model call's answer with its budget settlement (`adjust`, then `append_message`):
//! two become one.

use crate::DynamoStore;
use crate::body::MAX_CHUNKS;
use crate::body::NewRecord;
use crate::error::unavailable;
use crate::error::write_error;
use crate::item::{Item, get_s, is_expired, now_s, s};
use crate::keys::{ACCOUNT, META, PK, SK, account_pk, conversation_pk};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::TransactWriteItem;
use store::{
    Adjustment, Charge, ClaimWithLease, ClaimedWithLease, StartRead, StoreError, TurnFinish,
    TurnWrites, VisibleEntry,
};
use transcript::{Conversation, ConversationId, Message, Part, UserId};

#[async_trait::async_trait]
impl TurnWrites for DynamoStore {
    async fn claim_with_lease(
        &self,
        c: &ClaimWithLease<'_>,
    ) -> Result<ClaimedWithLease, StoreError> {
        let writes = vec![
            self.fresh_claim(c.job_key, c.now_ms, c.claim_until_ms)?,
            self.lease_take(c.conversation, c.holder, c.now_ms, c.lease_until_ms)?,
        ];
        let sent = crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await;
        let cancelled = match sent {
            Ok(_) => return Ok(ClaimedWithLease::Both),
            Err(SdkError::ServiceError(e)) if e.err().is_transaction_canceled_exception() => {
                match e.into_err() {
                    TransactWriteItemsError::TransactionCanceledException(c) => c,
                    _ => unreachable!("checked above"),
                }
            }
            // Not known to be cancelled: either may be written, as after a lone claim's failure.
            Err(e) => return Err(unavailable(e)),
        };
        // Cancelled: nothing is written. The claim's reason comes first.
        let claim = cancelled.cancellation_reasons().first();
        if let Some(reason) = claim
            && reason.code() == Some("ConditionalCheckFailed")
            && let Some(old) = reason.item()
            && let Some(found) = crate::claims::claim_refusal(old, c.now_ms)?
        {
            return Ok(ClaimedWithLease::Refused(found));
        }
        Ok(ClaimedWithLease::Apart)
    }

    async fn finish_turn(&self, f: &TurnFinish<'_>) -> Result<(), StoreError> {
        let (record, what) = crate::visible::visible_record(f.entry)?;
        let mut writes = self.transact_puts(record.into_items()?)?;
        writes.push(self.lease_release(f.conversation, f.holder)?);
        writes.push(self.job_done(f.job_key, f.keep_until_ms)?);
        writes.push(self.visible_next_update(f.conversation, f.entry.position + 1)?);
        crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await
        .map(drop)
        .map_err(|e| {
            write_error(e, || StoreError::Conflict {
                what: format!(
                    "{what} (or the lease of {} not {}'s, or the conversation gone)",
                    f.conversation, f.holder
                ),
            })
        })
    }

    async fn start_turn_reserving(
        &self,
        c: &Conversation,
        m: &Message,
        e: &VisibleEntry,
        reserve: &[Charge],
    ) -> Result<bool, StoreError> {
        let (message, what) = crate::messages::message_record(m)?;
        let (entry, seen) = crate::visible::visible_record(e)?;
        let moved_on = self.conversation_update(c, e.position + 1)?;
        let what = format!("{what} or {seen} (or conversation {} gone)", c.id);
        self.put_new_reserving(vec![message, entry], vec![moved_on], reserve, what)
            .await
    }

    async fn append_with_tool_result(
        &self,
        m: &Message,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
        reserve: &[Charge],
    ) -> Result<bool, StoreError> {
        let (message, what) = crate::messages::message_record(m)?;
        let (recorded, result_what) =
            self.tool_result_put(&m.conversation_id, asked_at, tool_use_id, result)?;
        let what = format!("{what} or {result_what}");
        self.put_new_reserving(vec![message], vec![recorded], reserve, what)
            .await
    }

    async fn append_message_adjusting(
        &self,
        m: &Message,
        adjustments: &[Adjustment],
    ) -> Result<(), StoreError> {
        let (message, what) = crate::messages::message_record(m)?;
        let settled = self.adjustment_writes(adjustments)?;
        self.put_new_together(vec![message], settled, &what).await
    }

    async fn conversation_and_account(
        &self,
        id: &ConversationId,
        user: &UserId,
    ) -> Result<StartRead, StoreError> {
        let key = |pk: String, sk: &str| Item::from([(PK.into(), s(pk)), (SK.into(), s(sk))]);
        let keys = vec![
            key(conversation_pk(id), META),
            key(account_pk(user), ACCOUNT),
        ];
        let what = format!("conversation {id} and account {user}");
        let items = self.get_consistent(keys, &what).await?;
        let mut read = StartRead {
            conversation: None,
            account: None,
            next_visible: None,
            // A Query of its own: the turn asks for it.
            messages: None,
        };
        for item in items {
            match get_s(&item, SK, "batched read")? {
                META if !is_expired(&item, now_s()) => {
                    read.conversation = Some(crate::conversations::decode(&item)?);
                    read.next_visible = crate::conversations::visible_next(&item);
                }
                ACCOUNT => read.account = Some(crate::accounts::account_from(user, &item)?),
                _ => {}
            }
        }
        Ok(read)
    }
}

impl DynamoStore {
    /// `records` (each head on a free key) and `also` in one transaction with `reserve`'s
    /// conditional updates, which go first so a cancellation's reasons say whether only a cap
    /// refused. `Ok(false)`: a cap refused, or the records are too large to share one
    /// transaction (then the caller writes them on their own and reserves as usual); nothing
    /// is written either way. Without charges, as `put_new_together`.
    async fn put_new_reserving(
        &self,
        records: Vec<NewRecord>,
        also: Vec<TransactWriteItem>,
        reserve: &[Charge],
        what: String,
    ) -> Result<bool, StoreError> {
        if reserve.is_empty() {
            self.put_new_together(records, also, &what).await?;
            return Ok(true);
        }
        let Some(mut writes) = self.reservation_writes(reserve)? else {
            return Ok(false);
        };
        let charged = writes.len();
        let mut heads = Vec::with_capacity(records.len());
        for record in records {
            heads.push(record.into_items()?);
        }
        if heads.iter().map(Vec::len).sum::<usize>() > MAX_CHUNKS {
            return Ok(false);
        }
        writes.extend(also);
        for items in heads {
            writes.extend(self.transact_puts(items)?);
        }
        let sent = crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await;
        match sent {
            Ok(_) => Ok(true),
            Err(err) if only_caps_refused(&err, charged) => Ok(false),
            Err(err) => Err(write_error(err, || StoreError::Conflict { what })),
        }
    }
}

/// Whether a transaction whose first `charged` items are budget charges was cancelled by their
/// caps alone: every false condition is a charge's, and nothing else went wrong.
fn only_caps_refused(
    err: &SdkError<TransactWriteItemsError, impl std::fmt::Debug>,
    charged: usize,
) -> bool {
    let Some(TransactWriteItemsError::TransactionCanceledException(e)) = err.as_service_error()
    else {
        return false;
    };
    let reasons = e.cancellation_reasons();
    let failed =
        |r: &aws_sdk_dynamodb::types::CancellationReason| r.code().is_some_and(|c| c != "None");
    reasons.iter().any(failed)
        && reasons
            .iter()
            .enumerate()
            .all(|(i, r)| !failed(r) || (i < charged && r.code() == Some("ConditionalCheckFailed")))
}
