//! `Retention`: the table's `ttl` (epoch seconds) on every item of an expiring conversation —
//! its `META`, its messages (`MSG#…`) and visible entries (`SEEN#…`), continuation items
//! included. DynamoDB's TTL deletes them some time after the date; reads treat them as gone from
//! the date on (`query_all`, `conversation`), and a conversation or entry written later under
//! the same key replaces an expired one. So `sweep_expired` has nothing to do here.
//!
//! A refresh skips items already past their date (conditional update): a late refresh never
//! brings old words back; and items already dated close to the new date
//! ([`CLOSE_ENOUGH_PART`]), so a refresh writes what is new, not the whole conversation again. Items written after a refresh get their date at the next one; the job
//! path refreshes after recording each exchange (a crash in between leaves that exchange without
//! a date until the job's retry, or the sender's next message). One that comes after the
//! conversation's own date has passed deletes what is still undated (`delete_undated`): TTL
//! never would, and a returning sender's fresh lobby would show it.

use crate::DynamoStore;
use crate::error::{unavailable, write_error};
use crate::item::{Item, is_expired, n, s, ttl_for};
use crate::keys::{META, MSG, PK, SEEN, SK, TTL, conversation_pk};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Delete, TransactWriteItem};
use store::{Retention, StoreError};
use transcript::ConversationId;

/// What part of the time left a date may fall short of the one asked and be left as it is: a
/// thirtieth (a day of the lobby's 30 days), except the conversation's own item, which always
/// takes the new date and so outlives everything in it. A lobby is re-dated after every exchange, and
/// without this every refresh rewrote every item in it, so each message cost writes in
/// proportion to the lobby's size (quadratic in all); now an item is rewritten about once in
/// that part of its life. Dates are never moved later than asked, and an earlier date is
/// always written.
const CLOSE_ENOUGH_PART: i64 = 30;

/// Whether `item`'s date is already at most `slack_s` short of `until_s` (and not past it).
fn dated_close_to(item: &Item, until_s: i64, slack_s: i64) -> bool {
    match item.get(TTL) {
        Some(AttributeValue::N(ttl)) => ttl
            .parse::<i64>()
            .is_ok_and(|ttl| ttl <= until_s && ttl >= until_s - slack_s),
        _ => false,
    }
}

/// Whether `item` is a conversation's own item (`META`).
fn is_meta(item: &Item) -> bool {
    item.get(SK)
        .and_then(|v| v.as_s().ok())
        .is_some_and(|sk| sk == META)
}

/// Whether an item of a conversation's partition is part of what expires with it (not its lease,
/// whose own expiry is the lease's business).
fn expires_with_conversation(item: &Item) -> bool {
    item.get(SK)
        .and_then(|v| v.as_s().ok())
        .is_some_and(|sk| sk == META || sk.starts_with(MSG) || sk.starts_with(SEEN))
}

#[async_trait]
impl Retention for DynamoStore {
    async fn expire_conversation(
        &self,
        conversation: &ConversationId,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let pk = conversation_pk(conversation);
        let now_s = now_ms.div_euclid(1000);
        let query = self
            .query()
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_names("#ttl", TTL)
            .expression_attribute_values(":pk", s(&pk))
            .projection_expression("#pk, #sk, #ttl")
            .consistent_read(true);
        // Every item, expired ones included: they are left as they are.
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = query
                .clone()
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            items.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        // Past its date (or gone): what is left of it was written after its last refresh,
        // undated, and goes now, not dated anew with a returning sender's fresh lobby.
        let live = |i: &&Item| is_meta(i) && !is_expired(i, now_s);
        if !items.iter().any(|i| live(&i)) {
            return self.delete_undated(&pk, &items, now_s).await;
        }
        let until_s = ttl_for(until_ms);
        let close_enough = (until_s - now_s).max(0) / CLOSE_ENOUGH_PART;
        // The conversation's own item always takes the new date, so it is never dated before
        // anything in it: once it has expired (and reads treat the conversation as gone, so a
        // returning sender starts afresh), so has everything else.
        for item in items.iter().filter(|i| {
            expires_with_conversation(i)
                && !is_expired(i, now_s)
                && (is_meta(i) || !dated_close_to(i, until_s, close_enough))
        }) {
            let result = self
                .client
                .update_item()
                .table_name(&self.table)
                .key(PK, s(&pk))
                .key(SK, item[SK].clone())
                .update_expression("SET #ttl = :ttl")
                .condition_expression(
                    "attribute_exists(#pk) AND (attribute_not_exists(#ttl) OR #ttl >= :now)",
                )
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#ttl", TTL)
                .expression_attribute_values(":ttl", n(ttl_for(until_ms)))
                .expression_attribute_values(":now", n(now_s))
                .send()
                .await;
            // Refused: deleted or expired meanwhile, and so it stays.
            if let Err(e) = result {
                match write_error(e, || StoreError::NotFound { what: pk.clone() }) {
                    StoreError::NotFound { .. } => {}
                    other => return Err(other),
                }
            }
        }
        Ok(())
    }

    async fn sweep_expired(&self, _now_ms: i64) -> Result<u64, StoreError> {
        Ok(0)
    }
}

/// Deletes of a transaction beside its check that the conversation is still past its date.
const DELETES_A_TRANSACTION: usize = 99;

impl DynamoStore {
    /// Delete the items of `pk`'s conversation, past its date or gone, that have no date of
    /// their own: written after its last refresh (the process died before the refresh that
    /// follows each exchange), DynamoDB's TTL never deletes them, and a refresh would date them
    /// anew with a returning sender's fresh lobby. Each transaction checks that the
    /// conversation is still past its date (a fresh one created meanwhile is left alone).
    async fn delete_undated(&self, pk: &str, items: &[Item], now_s: i64) -> Result<(), StoreError> {
        let undated: Vec<&Item> = items
            .iter()
            .filter(|i| expires_with_conversation(i) && !is_meta(i) && !i.contains_key(TTL))
            .collect();
        for chunk in undated.chunks(DELETES_A_TRANSACTION) {
            let check = ConditionCheck::builder()
                .table_name(&self.table)
                .key(PK, s(pk))
                .key(SK, s(META))
                .condition_expression("attribute_not_exists(#pk) OR #ttl < :now")
                .expression_attribute_names("#pk", PK)
                .expression_attribute_names("#ttl", TTL)
                .expression_attribute_values(":now", n(now_s))
                .build()
                .map_err(unavailable)?;
            let mut writes = vec![TransactWriteItem::builder().condition_check(check).build()];
            for item in chunk {
                let delete = Delete::builder()
                    .table_name(&self.table)
                    .key(PK, s(pk))
                    .key(SK, item[SK].clone())
                    .condition_expression("attribute_not_exists(#ttl)")
                    .expression_attribute_names("#ttl", TTL)
                    .build()
                    .map_err(unavailable)?;
                writes.push(TransactWriteItem::builder().delete(delete).build());
            }
            let sent = crate::transact::send(
                self.client
                    .transact_write_items()
                    .set_transact_items(Some(writes)),
            )
            .await;
            match sent.map_err(|e| write_error(e, || StoreError::Conflict { what: pk.into() })) {
                Ok(_) => {}
                // A fresh conversation began meanwhile, or an item was dated: left as it is.
                Err(StoreError::Conflict { .. }) => return Ok(()),
                Err(other) => return Err(other),
            }
        }
        if !undated.is_empty() {
            tracing::info!(
                conversation = pk,
                items = undated.len(),
                "undated items of a conversation past its date deleted"
            );
        }
        Ok(())
    }
}
