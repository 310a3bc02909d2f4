//! `BudgetLedger`: one item per bucket (`BUDGET#<scope>#<window>#<start>` / `BUCKET`) holding
//! `used`. A reservation is one `TransactWriteItems` with an `Update` per bucket: `ADD used
//! :amount` under `attribute_not_exists(used) OR used <= :room` (`room` = cap − amount), so
//! either every bucket takes the charge or, when any would pass its cap, none does — and the
//! cancellation reasons name the bucket that refused. A transaction's `ClientRequestToken`, the
//! same for the SDK's retries of one call, has DynamoDB apply it once even when an answer was
//! lost after the write went through. A single bucket (a rate counter: messages an hour, MCP
//! requests, link-code tries) is the same update as a plain conditional `UpdateItem`, half the
//! write units: such a retry may count it twice, which errs on the side of the cap. Settling is
//! another transaction of unconditional `ADD`s (negative to give back), one bucket included, so
//! a give-back is never applied twice.
//! `gsi1` (`BUDGETS#<window>#<start>`, scope) lists one window's buckets for reports.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{Item, corrupt, get_n, get_s, n, s, ttl_for};
use crate::keys::{GSI1, GSI1PK, GSI1SK, PK, SK, TTL, order_preserving};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use store::{Adjustment, BucketKey, BucketUsage, BudgetLedger, Charge, Reserve, StoreError};

const BUCKET: &str = "BUCKET";
const USED: &str = "used";
const SCOPE: &str = "scope";
const WINDOW: &str = "win";
const START_MS: &str = "start_ms";

fn bucket_pk(b: &BucketKey) -> String {
    format!(
        "BUDGET#{}#{}#{:020}",
        b.scope,
        b.window,
        order_preserving(b.start_ms)
    )
}

fn window_gsi1pk(window: &str, start_ms: i64) -> String {
    format!("BUDGETS#{window}#{:020}", order_preserving(start_ms))
}

/// One `Update` that adds `delta` to a bucket (creating it with its descriptive attributes),
/// with the cap condition when `room` is given.
fn add(
    table: &str,
    bucket: &BucketKey,
    delta: i64,
    expires_at_ms: i64,
    room: Option<u64>,
) -> Result<Update, StoreError> {
    let mut update = Update::builder()
        .table_name(table)
        .key(PK, s(bucket_pk(bucket)))
        .key(SK, s(BUCKET))
        .update_expression(
            "SET #scope = :scope, #win = :win, #start = :start, #g1pk = :g1pk, #g1sk = :scope, \
             #ttl = :ttl ADD #used :delta",
        )
        .expression_attribute_names("#scope", SCOPE)
        .expression_attribute_names("#win", WINDOW)
        .expression_attribute_names("#start", START_MS)
        .expression_attribute_names("#g1pk", GSI1PK)
        .expression_attribute_names("#g1sk", GSI1SK)
        .expression_attribute_names("#ttl", TTL)
        .expression_attribute_names("#used", USED)
        .expression_attribute_values(":scope", s(&bucket.scope))
        .expression_attribute_values(":win", s(&bucket.window))
        .expression_attribute_values(":start", n(bucket.start_ms))
        .expression_attribute_values(":g1pk", s(window_gsi1pk(&bucket.window, bucket.start_ms)))
        .expression_attribute_values(":ttl", n(ttl_for(expires_at_ms)))
        .expression_attribute_values(":delta", n(delta));
    if let Some(room) = room {
        update = update
            .condition_expression("attribute_not_exists(#used) OR #used <= :room")
            .expression_attribute_values(":room", n(room));
    }
    update.build().map_err(unavailable)
}

impl DynamoStore {
    /// [`BudgetLedger::adjust`]'s updates as a transaction's items (unconditional).
    pub(crate) fn adjustment_writes(
        &self,
        adjustments: &[Adjustment],
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        adjustments
            .iter()
            .map(|a| {
                let update = add(&self.table, &a.bucket, a.delta, a.expires_at_ms, None)?;
                Ok(TransactWriteItem::builder().update(update).build())
            })
            .collect()
    }
}

impl DynamoStore {
    /// [`BudgetLedger::reserve`]'s conditional updates as a transaction's items, in the order of
    /// `charges`; `None` when a charge cannot fit even into an empty bucket.
    pub(crate) fn reservation_writes(
        &self,
        charges: &[Charge],
    ) -> Result<Option<Vec<TransactWriteItem>>, StoreError> {
        let mut writes = Vec::with_capacity(charges.len());
        for c in charges {
            let Some(update) = self.charge_update(c)? else {
                return Ok(None);
            };
            writes.push(TransactWriteItem::builder().update(update).build());
        }
        Ok(Some(writes))
    }

    /// `c` as an `Update` that adds it under its cap's condition; `None` when it cannot fit
    /// even into an empty bucket.
    fn charge_update(&self, c: &Charge) -> Result<Option<Update>, StoreError> {
        let room = match c.limit {
            Some(limit) if c.amount > limit => return Ok(None),
            Some(limit) => Some(limit - c.amount),
            None => None,
        };
        let update = add(
            &self.table,
            &c.bucket,
            signed(c.amount),
            c.expires_at_ms,
            room,
        )?;
        Ok(Some(update))
    }
}

/// What writing a bucket's `Update` came to.
enum Written {
    Done,
    /// The update at this index was refused by its cap condition.
    Refused(usize),
}

impl DynamoStore {
    /// Write `updates` all or none: one bucket is a plain conditional `UpdateItem` (half the
    /// write units of a transaction), more are one `TransactWriteItems`.
    async fn write_buckets(&self, mut updates: Vec<Update>) -> Result<Written, StoreError> {
        if updates.len() == 1 {
            let u = updates.pop().unwrap_or_else(|| unreachable!());
            let sent = self
                .client
                .update_item()
                .table_name(u.table_name)
                .set_key(Some(u.key))
                .update_expression(u.update_expression)
                .set_condition_expression(u.condition_expression)
                .set_expression_attribute_names(u.expression_attribute_names)
                .set_expression_attribute_values(u.expression_attribute_values)
                .send()
                .await;
            return match sent {
                Ok(_) => Ok(Written::Done),
                Err(err)
                    if err
                        .as_service_error()
                        .is_some_and(UpdateItemError::is_conditional_check_failed_exception) =>
                {
                    Ok(Written::Refused(0))
                }
                Err(err) => Err(unavailable(err)),
            };
        }
        let writes = updates
            .into_iter()
            .map(|u| TransactWriteItem::builder().update(u).build())
            .collect();
        let sent = crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await;
        match sent {
            Ok(_) => Ok(Written::Done),
            Err(err) => match refused_index(&err) {
                Some(i) => Ok(Written::Refused(i)),
                None => Err(unavailable(err)),
            },
        }
    }
}

/// The index of the first item whose condition failed, if that is why the transaction was
/// cancelled.
fn refused_index(err: &SdkError<TransactWriteItemsError, impl std::fmt::Debug>) -> Option<usize> {
    match err.as_service_error()? {
        TransactWriteItemsError::TransactionCanceledException(e) => e
            .cancellation_reasons()
            .iter()
            .position(|r| r.code() == Some("ConditionalCheckFailed")),
        _ => None,
    }
}

fn signed(amount: u64) -> i64 {
    i64::try_from(amount).unwrap_or(i64::MAX)
}

fn used_of(item: &Item, what: &str) -> Result<u64, StoreError> {
    Ok(get_n::<i64>(item, USED, what)?.max(0) as u64)
}

#[async_trait]
impl BudgetLedger for DynamoStore {
    async fn reserve(&self, charges: &[Charge]) -> Result<Reserve, StoreError> {
        let mut writes = Vec::with_capacity(charges.len());
        for c in charges {
            let Some(update) = self.charge_update(c)? else {
                // Cannot fit even into an empty bucket: refuse without writing.
                let used = self.bucket_usage(std::slice::from_ref(&c.bucket)).await?[0];
                return Ok(Reserve::Tripped {
                    bucket: c.bucket.clone(),
                    used,
                    limit: c.limit.unwrap_or(u64::MAX),
                });
            };
            writes.push(update);
        }
        if writes.is_empty() {
            return Ok(Reserve::Reserved);
        }
        match self.write_buckets(writes).await? {
            Written::Done => Ok(Reserve::Reserved),
            Written::Refused(i) => {
                let c = &charges[i];
                let used = self.bucket_usage(std::slice::from_ref(&c.bucket)).await?[0];
                Ok(Reserve::Tripped {
                    bucket: c.bucket.clone(),
                    used,
                    limit: c.limit.unwrap_or(u64::MAX),
                })
            }
        }
    }

    async fn adjust(&self, adjustments: &[Adjustment]) -> Result<(), StoreError> {
        if adjustments.is_empty() {
            return Ok(());
        }
        // A transaction even for one bucket: an unconditional `ADD` is not idempotent, and the
        // SDK retries a call whose answer was lost (a timeout, a 500) after the write went
        // through. A transaction carries one `ClientRequestToken` across those retries, and
        // DynamoDB applies a token once in ten minutes: a settlement that gives back an unused
        // allowance is never given back twice (the ledger would then read less than was spent).
        crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(self.adjustment_writes(adjustments)?)),
        )
        .await
        .map_err(unavailable)?;
        Ok(())
    }

    /// One consistent `BatchGetItem` for all the buckets (a guard reads up to five at once).
    async fn bucket_usage(&self, buckets: &[BucketKey]) -> Result<Vec<u64>, StoreError> {
        let pks: Vec<String> = buckets.iter().map(bucket_pk).collect();
        // DynamoDB refuses a batch that names a key twice.
        let distinct: std::collections::BTreeSet<&String> = pks.iter().collect();
        let keys = distinct
            .into_iter()
            .map(|pk| Item::from([(PK.into(), s(pk)), (SK.into(), s(BUCKET))]))
            .collect();
        let mut used = std::collections::HashMap::with_capacity(pks.len());
        for item in self.get_consistent(keys, "budget buckets").await? {
            let pk = get_s(&item, PK, "budget bucket")?.to_owned();
            let n = used_of(&item, &pk)?;
            used.insert(pk, n);
        }
        Ok(pks
            .iter()
            .map(|pk| used.get(pk).copied().unwrap_or(0))
            .collect())
    }

    async fn buckets_of_window(
        &self,
        window: &str,
        start_ms: i64,
    ) -> Result<Vec<BucketUsage>, StoreError> {
        let items = self
            .query_all(
                self.query()
                    .index_name(GSI1)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", GSI1PK)
                    .expression_attribute_values(":pk", s(window_gsi1pk(window, start_ms))),
            )
            .await?;
        items
            .iter()
            .map(|item| {
                let what = "budget bucket";
                let scope = get_s(item, SCOPE, what)?.to_owned();
                if get_s(item, WINDOW, what)? != window {
                    return Err(corrupt(what, "window does not match its index key"));
                }
                Ok(BucketUsage {
                    bucket: BucketKey {
                        scope,
                        window: window.to_owned(),
                        start_ms,
                    },
                    used: used_of(item, what)?,
                })
            })
            .collect()
    }
}
