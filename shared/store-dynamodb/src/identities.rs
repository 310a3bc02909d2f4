//! `Identities`: one item per link code (`LINK#<code>` / `LINK`) and one per bound channel
//! account (`IDENT#<channel>#<external id>` / `IDENT`). Creating a code is one conditional
//! `PutItem` that admits only a missing or expired code; redeeming is one conditional
//! `UpdateItem` that admits only a live code that is unredeemed or was redeemed by the same
//! account, so concurrent redemptions by different accounts have exactly one winner. Binding is a plain `PutItem`: the newest binding wins.

use crate::DynamoStore;
use crate::error::{unavailable, write_error};
use crate::item::{Item, get_s, is_expired, n, now_s, s, ttl_for};
use crate::keys::{IDENT, LINK, PK, SK, TTL, identity_pk, link_code_pk};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use store::{Identities, StoreError};
use transcript::UserId;

const USER_ID: &str = "user_id";
const EXPIRES_AT_MS: &str = "expires_at_ms";
const USED_AT_MS: &str = "used_at_ms";
const USED_BY: &str = "used_by";
const BOUND_AT_MS: &str = "bound_at_ms";

#[async_trait]
impl Identities for DynamoStore {
    async fn create_link_code(
        &self,
        code: &str,
        user: &UserId,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        // The put replaces the whole item, so a replaced code loses its `used_at_ms` and
        // `used_by`.
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(link_code_item(code, user, expires_at_ms)))
            .condition_expression("attribute_not_exists(pk) OR #expires <= :now")
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_values(":now", n(now_ms))
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::Conflict {
                    what: format!("link code {code}"),
                })
            })?;
        Ok(())
    }

    async fn consume_link_code(
        &self,
        code: &str,
        redeemer: &str,
        now_ms: i64,
    ) -> Result<Option<UserId>, StoreError> {
        let redeemed = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(link_code_pk(code)))
            .key(SK, s(LINK))
            .update_expression("SET #used = if_not_exists(#used, :now), #by = :by")
            .condition_expression(
                "attribute_exists(pk) AND #expires > :now \
                 AND (attribute_not_exists(#used) OR #by = :by)",
            )
            .expression_attribute_names("#used", USED_AT_MS)
            .expression_attribute_names("#by", USED_BY)
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_values(":now", n(now_ms))
            .expression_attribute_values(":by", s(redeemer))
            .return_values(ReturnValue::AllNew)
            .send()
            .await;
        match redeemed {
            Ok(out) => {
                let item = out.attributes.unwrap_or_default();
                let user = get_s(&item, USER_ID, &format!("link code {code}"))?;
                Ok(Some(UserId(user.to_owned())))
            }
            // Unknown, expired (whether or not TTL deleted it yet) or redeemed by another account.
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(None)
            }
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn bind_identity(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(identity_item(channel, external_id, user, now_ms)))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn identity(
        &self,
        channel: &str,
        external_id: &str,
    ) -> Result<Option<UserId>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(identity_pk(channel, external_id)))
            .key(SK, s(IDENT))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        match out.item {
            Some(item) if !is_expired(&item, now_s()) => {
                let what = format!("identity {channel}#{external_id}");
                Ok(Some(UserId(get_s(&item, USER_ID, &what)?.to_owned())))
            }
            _ => Ok(None),
        }
    }
}

/// A fresh, unredeemed link code. Its `ttl` lets DynamoDB delete it some time after it expired.
fn link_code_item(code: &str, user: &UserId, expires_at_ms: i64) -> Item {
    Item::from([
        (PK.into(), s(link_code_pk(code))),
        (SK.into(), s(LINK)),
        (USER_ID.into(), s(&user.0)),
        (EXPIRES_AT_MS.into(), n(expires_at_ms)),
        (TTL.into(), n(ttl_for(expires_at_ms))),
    ])
}

fn identity_item(channel: &str, external_id: &str, user: &UserId, bound_at_ms: i64) -> Item {
    Item::from([
        (PK.into(), s(identity_pk(channel, external_id))),
        (SK.into(), s(IDENT)),
        (USER_ID.into(), s(&user.0)),
        (BOUND_AT_MS.into(), n(bound_at_ms)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_code_item_expires_by_ttl_no_earlier_than_the_code() {
        let item = link_code_item("K7#PLUM", &"alice".into(), 1_800_000_000_001);
        assert_eq!(item[PK], s("LINK#K7#PLUM"));
        assert_eq!(item[SK], s("LINK"));
        assert_eq!(item[USER_ID], s("alice"));
        assert_eq!(item[EXPIRES_AT_MS], n(1_800_000_000_001i64));
        assert_eq!(item[TTL], n(1_800_000_001i64));
        assert!(!item.contains_key(USED_AT_MS), "a new code is unredeemed");
    }

    #[test]
    fn an_identity_item_is_keyed_by_channel_and_external_id() {
        let item = identity_item("slack", "T01#U02", &"bob".into(), 7);
        assert_eq!(item[PK], s("IDENT#slack#T01#U02"));
        assert_eq!(item[SK], s("IDENT"));
        assert_eq!(item[USER_ID], s("bob"));
        assert_eq!(item[BOUND_AT_MS], n(7));
        assert!(!item.contains_key(TTL), "a binding never expires");
    }
}
