//! `JobClaims`: one item per turn job (`JOB#<key>` / `CLAIM`). Claiming is one conditional
//! `UpdateItem` that admits only a missing, expired-running, expired-done or past-`ttl` record
//! (a running claim's `ttl` is `KEEP_ABANDONED_MS` past its expiry, a done one's its keep);
//! a refusal is explained from the old item the failed condition returns.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{Item, corrupt, get_n, get_s, is_expired, n, s, ttl_for};
use crate::keys::{CLAIM, PK, SK, TTL, job_pk};
use async_trait::async_trait;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use store::{Claim, JobClaims, KEEP_ABANDONED_MS, ReplySent, StoreError};

const STATUS: &str = "status";
const EXPIRES_AT_MS: &str = "expires_at_ms";
const ATTEMPT: &str = "attempt";
const KEEP_UNTIL_MS: &str = "keep_until_ms";
/// What an attempt that released the claim had sent of its reply: JSON of `ReplySent`.
const REPLY_SENT: &str = "reply_sent";
/// The longest `reply_sent` kept (each write of the claim costs a unit per KB of it while it
/// is there; a reply is at most the model's output allowance, ~64 KB); a longer one is not kept,
/// and a retry in another environment sends that reply from its start.
const MAX_REPLY_SENT_BYTES: usize = 100 * 1024;
/// The claiming write's own mark: a claim refused by a record with this attempt's mark is this
/// attempt's, landed once already (the SDK sent the write again when its answer was lost).
const TOKEN: &str = "claim_token";
const RUNNING: &str = "running";
const DONE: &str = "done";

/// How often a claim is tried again when its refusal cannot be explained because the record
/// vanished in between (TTL deletion). Each try is one conditional write.
const TRIES: usize = 3;

#[async_trait]
impl JobClaims for DynamoStore {
    async fn claim_job(
        &self,
        job_key: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<Claim, StoreError> {
        let what = format!("job claim {job_key}");
        let token = uuid::Uuid::new_v4().simple().to_string();
        for _ in 0..TRIES {
            let old = match self.try_claim(job_key, now_ms, expires_at_ms, &token).await {
                Ok(new) => return claimed(&new, &what),
                Err(SdkError::ServiceError(e))
                    if e.err().is_conditional_check_failed_exception() =>
                {
                    match e.into_err() {
                        UpdateItemError::ConditionalCheckFailedException(ccf) => ccf.item,
                        _ => None,
                    }
                }
                Err(e) => return Err(unavailable(e)),
            };
            // DynamoDB returns the old item with the refusal; without it, read it (consistent).
            let old = match old {
                Some(old) => Some(old),
                None => self.claim_record(job_key).await?,
            };
            if let Some(old) = old.filter(|old| !is_expired(old, now_ms.div_euclid(1000))) {
                // Refused by this very claim, landed by a send whose answer was lost.
                if old.get(TOKEN).and_then(|t| t.as_s().ok()) == Some(&token) {
                    return claimed(&old, &what);
                }
                return refused(&old, &what);
            }
        }
        Err(StoreError::Unavailable(
            format!("{what}: refused {TRIES} times, but no record is there").into(),
        ))
    }

    async fn release_job(
        &self,
        job_key: &str,
        attempt: u32,
        now_ms: i64,
        sent: Option<&ReplySent>,
    ) -> Result<(), StoreError> {
        let sent = sent
            .map(serde_json::to_string)
            .transpose()
            .map_err(unavailable)?
            .filter(|json| {
                let fits = json.len() <= MAX_REPLY_SENT_BYTES;
                if !fits {
                    tracing::warn!(
                        job = job_key,
                        bytes = json.len(),
                        "what was sent of the reply is too long to keep with its claim"
                    );
                }
                fits
            });
        self.release_claim(job_key, attempt, now_ms, sent).await
    }

    async fn reply_sent(&self, job_key: &str) -> Result<Option<ReplySent>, StoreError> {
        let what = format!("job claim {job_key}");
        let Some(item) = self.claim_record(job_key).await? else {
            return Ok(None);
        };
        if get_s(&item, STATUS, &what)? != RUNNING || !item.contains_key(REPLY_SENT) {
            return Ok(None);
        }
        serde_json::from_str(get_s(&item, REPLY_SENT, &what)?)
            .map(Some)
            .map_err(|e| corrupt(&what, e.to_string()))
    }

    async fn finish_job(&self, job_key: &str, keep_until_ms: i64) -> Result<(), StoreError> {
        let done = self
            .job_done_update(job_key, keep_until_ms)
            .map_err(unavailable)?;
        self.client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(done.key))
            .update_expression(done.update_expression)
            .set_expression_attribute_names(done.expression_attribute_names)
            .set_expression_attribute_values(done.expression_attribute_values)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }
}

impl DynamoStore {
    /// [`JobClaims::finish_job`]'s update: done, kept until `keep_until_ms`.
    fn job_done_update(
        &self,
        job_key: &str,
        keep_until_ms: i64,
    ) -> Result<Update, aws_sdk_dynamodb::error::BuildError> {
        Update::builder()
            .table_name(&self.table)
            .key(PK, s(job_pk(job_key)))
            .key(SK, s(CLAIM))
            .update_expression(
                "SET #status = :done, #keep = :keep, #ttl = :ttl REMOVE #attempt, #expires, #sent",
            )
            .expression_attribute_names("#sent", REPLY_SENT)
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_names("#keep", KEEP_UNTIL_MS)
            .expression_attribute_names("#ttl", TTL)
            .expression_attribute_names("#attempt", ATTEMPT)
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_values(":done", s(DONE))
            .expression_attribute_values(":keep", n(keep_until_ms))
            .expression_attribute_values(":ttl", n(ttl_for(keep_until_ms)))
            .build()
    }

    /// [`JobClaims::finish_job`] as a transaction's update.
    pub(crate) fn job_done(
        &self,
        job_key: &str,
        keep_until_ms: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = self
            .job_done_update(job_key, keep_until_ms)
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

impl DynamoStore {
    /// A fresh claim (attempt 1) as a transaction's update: admitted only where `claim_job`
    /// would claim afresh (no record, one past its `ttl`, a done record no longer kept), so
    /// the attempt is known without reading the new item. The old item comes back with a
    /// refusal ([`claim_refusal`] reads it).
    pub(crate) fn fresh_claim(
        &self,
        job_key: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(job_pk(job_key)))
            .key(SK, s(CLAIM))
            .update_expression(
                "SET #status = :running, #expires = :expires, #attempt = :one, #ttl = :ttl \
                 REMOVE #keep, #sent",
            )
            .expression_attribute_names("#sent", REPLY_SENT)
            .condition_expression(
                "attribute_not_exists(pk) OR #ttl < :now_s OR (#status = :done AND #keep < :now)",
            )
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_names("#attempt", ATTEMPT)
            .expression_attribute_names("#keep", KEEP_UNTIL_MS)
            .expression_attribute_names("#ttl", TTL)
            .expression_attribute_values(":running", s(RUNNING))
            .expression_attribute_values(":done", s(DONE))
            .expression_attribute_values(":expires", n(expires_at_ms))
            .expression_attribute_values(":ttl", n(abandoned_ttl(expires_at_ms)))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":now_s", n(now_ms.div_euclid(1000)))
            .expression_attribute_values(":one", n(1))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// Mark attempt `attempt`'s running claim expired (see [`JobClaims::release_job`]).
    async fn release_claim(
        &self,
        job_key: &str,
        attempt: u32,
        now_ms: i64,
        sent: Option<String>,
    ) -> Result<(), StoreError> {
        let mut release = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(job_pk(job_key)))
            .key(SK, s(CLAIM));
        release = match sent {
            Some(sent) => release
                .update_expression("SET #expires = :expired, #sent = :sent")
                .expression_attribute_names("#sent", REPLY_SENT)
                .expression_attribute_values(":sent", s(sent)),
            None => release.update_expression("SET #expires = :expired"),
        };
        let released = release
            .condition_expression("#status = :running AND #attempt = :attempt")
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_names("#attempt", ATTEMPT)
            .expression_attribute_values(":running", s(RUNNING))
            .expression_attribute_values(":attempt", n(attempt))
            .expression_attribute_values(":expired", n(now_ms - 1))
            .send()
            .await;
        match released {
            Ok(_) => Ok(()),
            // Gone, done, or another attempt's claim now: not ours to release.
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {
                Ok(())
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    /// The one conditional write of a claim: the new item, or the SDK error (a refusal among
    /// them, carrying the old item).
    ///
    /// A done record holds no `attempt` (`finish_job` removes it), so claiming after one, or
    /// claiming a new key, counts from 1; taking over an expired running claim adds one.
    async fn try_claim(
        &self,
        job_key: &str,
        now_ms: i64,
        expires_at_ms: i64,
        token: &str,
    ) -> Result<Item, SdkError<UpdateItemError>> {
        let out = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(job_pk(job_key)))
            .key(SK, s(CLAIM))
            .update_expression(
                "SET #status = :running, #expires = :expires, #ttl = :ttl, #token = :token, \
                 #attempt = if_not_exists(#attempt, :zero) + :one REMOVE #keep",
            )
            .condition_expression(
                "attribute_not_exists(pk) OR #ttl < :now_s \
                 OR (#status = :running AND #expires < :now) \
                 OR (#status = :done AND #keep < :now)",
            )
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_names("#attempt", ATTEMPT)
            .expression_attribute_names("#keep", KEEP_UNTIL_MS)
            .expression_attribute_names("#ttl", TTL)
            .expression_attribute_names("#token", TOKEN)
            .expression_attribute_values(":token", s(token))
            .expression_attribute_values(":running", s(RUNNING))
            .expression_attribute_values(":done", s(DONE))
            .expression_attribute_values(":expires", n(expires_at_ms))
            .expression_attribute_values(":ttl", n(abandoned_ttl(expires_at_ms)))
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":now_s", n(now_ms.div_euclid(1000)))
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await?;
        Ok(out.attributes.unwrap_or_default())
    }

    /// The claim record as it is now (strongly consistent read), if any.
    async fn claim_record(&self, job_key: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(job_pk(job_key)))
            .key(SK, s(CLAIM))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(out.item)
    }
}

/// A running claim's `ttl`: [`KEEP_ABANDONED_MS`] past its expiry (a release moves the expiry
/// back, not the `ttl`: it goes a little later than it must).
fn abandoned_ttl(expires_at_ms: i64) -> i64 {
    ttl_for(expires_at_ms.saturating_add(KEEP_ABANDONED_MS))
}

/// What a successful claim means: attempt 1 is fresh, later ones take over.
fn claimed(new: &Item, what: &str) -> Result<Claim, StoreError> {
    Ok(match get_n::<u32>(new, ATTEMPT, what)? {
        0 => return Err(corrupt(what, "attempt 0")),
        1 => Claim::Fresh,
        attempt => Claim::TakenOver { attempt },
    })
}

/// What the record that refused a [`DynamoStore::fresh_claim`] says, as `claim_job` would
/// report it: [`Claim::Done`] or [`Claim::Busy`] for a live record; `None` for one that
/// `claim_job` would take (a running claim past its expiry, a record past its `ttl`).
pub(crate) fn claim_refusal(old: &Item, now_ms: i64) -> Result<Option<Claim>, StoreError> {
    if is_expired(old, now_ms.div_euclid(1000)) {
        return Ok(None);
    }
    let what = "job claim";
    if get_s(old, STATUS, what)? == RUNNING && get_n::<i64>(old, EXPIRES_AT_MS, what)? < now_ms {
        return Ok(None);
    }
    refused(old, what).map(Some)
}

/// Why a live record refused the claim.
fn refused(old: &Item, what: &str) -> Result<Claim, StoreError> {
    match get_s(old, STATUS, what)? {
        DONE => Ok(Claim::Done),
        RUNNING => Ok(Claim::Busy {
            until_ms: get_n(old, EXPIRES_AT_MS, what)?,
        }),
        other => Err(corrupt(what, format!("unknown status {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_read_from_items() {
        let item = |pairs: &[(&str, aws_sdk_dynamodb::types::AttributeValue)]| -> Item {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect()
        };
        assert_eq!(
            claimed(&item(&[(ATTEMPT, n(1))]), "j").unwrap(),
            Claim::Fresh
        );
        assert_eq!(
            claimed(&item(&[(ATTEMPT, n(3))]), "j").unwrap(),
            Claim::TakenOver { attempt: 3 }
        );
        assert_eq!(
            refused(&item(&[(STATUS, s(DONE))]), "j").unwrap(),
            Claim::Done
        );
        assert_eq!(
            refused(&item(&[(STATUS, s(RUNNING)), (EXPIRES_AT_MS, n(5))]), "j").unwrap(),
            Claim::Busy { until_ms: 5 }
        );
        assert!(matches!(
            refused(&item(&[(STATUS, s("paused"))]), "j"),
            Err(StoreError::Corrupt { .. })
        ));
        // A fresh claim's refusal: live records as `claim_job` reports them, the rest taken
        // one by one.
        let running = |expires: i64| item(&[(STATUS, s(RUNNING)), (EXPIRES_AT_MS, n(expires))]);
        assert_eq!(
            claim_refusal(&running(5_000), 4_000).unwrap(),
            Some(Claim::Busy { until_ms: 5_000 })
        );
        assert_eq!(claim_refusal(&running(5_000), 5_001).unwrap(), None);
        let done = |ttl: i64| item(&[(STATUS, s(DONE)), (TTL, n(ttl))]);
        assert_eq!(claim_refusal(&done(10), 4_000).unwrap(), Some(Claim::Done));
        assert_eq!(claim_refusal(&done(3), 4_000).unwrap(), None);
    }
}
