//! `Identities`: one item per link code (`LINK#<code>` / `LINK`) and one per bound channel
//! account (`IDENT#<channel>#<external id>` / `IDENT`). Creating a code is one conditional
//! `PutItem` that admits only a missing or expired code; redeeming is one conditional
//! `UpdateItem` that admits only a live code that is unredeemed or was redeemed by the same
//! account, so concurrent redemptions by different accounts have exactly one winner. A linking
//! job or a first sign-in binds with a `PutItem` conditioned on the binding it read (none, or
//! the user it names) or on the one it writes being there already; `bind_identity` is a plain
//! `PutItem` (setting up, in tests).
//! Bound accounts are listed from `gsi1` (`IDENTS` / `<user>#<channel>#<external id>`, one
//! partition: linking is rare), eventually consistent; unbinding is a `DeleteItem`.

use crate::DynamoStore;
use crate::error::{unavailable, write_error};
use crate::item::{Item, get_n, get_s, is_expired, n, now_s, s, ttl_for};
use crate::keys::{
    GSI1, GSI1PK, GSI1SK, IDENT, IDENTS, LINK, PK, SK, TTL, identity_gsi1_prefix, identity_gsi1sk,
    identity_pk, link_code_pk,
};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, ReturnValue, TransactWriteItem};
use store::{Binding, Identities, StoreError};
use transcript::UserId;

const USER_ID: &str = "user_id";
const EXPIRES_AT_MS: &str = "expires_at_ms";
const USED_AT_MS: &str = "used_at_ms";
const USED_BY: &str = "used_by";
const BOUND_AT_MS: &str = "bound_at_ms";
const CHANNEL: &str = "channel";
const EXTERNAL_ID: &str = "external_id";

impl DynamoStore {
    /// Put a new link code `item` (one made for one account carries its `used_by` already,
    /// with no `used_at_ms`) unless a live code has the string. The put replaces the whole
    /// item, so a replaced code loses its `used_at_ms` and `used_by`.
    async fn new_link_code(&self, item: Item, code: &str, now_ms: i64) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
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
}

impl DynamoStore {
    /// The time `attribute` of link code `code` holds: `None` when the code is unknown or
    /// the attribute unset (a code never redeemed). One strongly consistent read.
    async fn link_code_time(&self, code: &str, attribute: &str) -> Result<Option<i64>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(link_code_pk(code)))
            .key(SK, s(LINK))
            .projection_expression("#time")
            .expression_attribute_names("#time", attribute)
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        match out.item {
            Some(item) if item.contains_key(attribute) => {
                Ok(Some(get_n(&item, attribute, &format!("link code {code}"))?))
            }
            _ => Ok(None),
        }
    }
}

#[async_trait]
impl Identities for DynamoStore {
    async fn create_link_code(
        &self,
        code: &str,
        user: &UserId,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.new_link_code(link_code_item(code, user, expires_at_ms), code, now_ms)
            .await
    }

    async fn create_link_code_for(
        &self,
        code: &str,
        user: &UserId,
        redeemer: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<(), StoreError> {
        let mut item = link_code_item(code, user, expires_at_ms);
        item.insert(USED_BY.into(), s(redeemer));
        self.new_link_code(item, code, now_ms).await
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
                 AND (#by = :by OR (attribute_not_exists(#by) AND attribute_not_exists(#used)))",
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

    async fn link_code_redeemed_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        self.link_code_time(code, USED_AT_MS).await
    }

    async fn link_code_expires_at(&self, code: &str) -> Result<Option<i64>, StoreError> {
        self.link_code_time(code, EXPIRES_AT_MS).await
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

    async fn bind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
        was: Option<&UserId>,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let conflict = || StoreError::Conflict {
            what: format!("identity {channel}#{external_id}"),
        };
        // Bound to `user` as read: nothing to write, only to see it still is.
        if was == Some(user) {
            return match self.identity(channel, external_id).await? {
                Some(bound) if &bound == user => Ok(()),
                _ => Err(conflict()),
            };
        }
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(identity_item(channel, external_id, user, now_ms)));
        let put = match was {
            None => put.condition_expression("attribute_not_exists(pk)"),
            Some(was) => put
                .condition_expression("#user = :was")
                .expression_attribute_names("#user", USER_ID)
                .expression_attribute_values(":was", s(&was.0)),
        };
        match put.send().await.map_err(|err| write_error(err, conflict)) {
            // Refused: bound to `user` already (this very write, tried again by the SDK or the
            // job after it landed) is done, and keeps when it was bound; anything else is a
            // conflict.
            Err(StoreError::Conflict { .. }) => match self.identity(channel, external_id).await? {
                Some(bound) if &bound == user => Ok(()),
                _ => Err(conflict()),
            },
            other => other.map(|_| ()),
        }
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

    async fn bindings(&self, user: Option<&UserId>) -> Result<Vec<Binding>, StoreError> {
        let query = self
            .query()
            .index_name(GSI1)
            .expression_attribute_names("#pk", GSI1PK)
            .expression_attribute_values(":pk", s(IDENTS));
        let query = match user {
            None => query.key_condition_expression("#pk = :pk"),
            Some(user) => query
                .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                .filter_expression("#user = :user")
                .expression_attribute_names("#sk", GSI1SK)
                .expression_attribute_names("#user", USER_ID)
                .expression_attribute_values(":prefix", s(identity_gsi1_prefix(user)))
                .expression_attribute_values(":user", s(&user.0)),
        };
        let mut bindings = self
            .query_all(query)
            .await?
            .iter()
            .map(binding)
            .collect::<Result<Vec<_>, _>>()?;
        // The index orders by `<user>#<channel>#…`; `#` may sort differently from the tuple.
        bindings.sort_by(|a, b| {
            (&a.user, &a.channel, &a.external_id).cmp(&(&b.user, &b.channel, &b.external_id))
        });
        Ok(bindings)
    }

    async fn unbind_identity_if(
        &self,
        channel: &str,
        external_id: &str,
        bound_by_ms: i64,
    ) -> Result<Option<UserId>, StoreError> {
        let conflict = || StoreError::Conflict {
            what: format!("identity {channel}#{external_id}"),
        };
        let out = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(identity_pk(channel, external_id)))
            .key(SK, s(IDENT))
            .condition_expression("attribute_not_exists(pk) OR #at <= :by")
            .expression_attribute_names("#at", BOUND_AT_MS)
            .expression_attribute_values(":by", n(bound_by_ms))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|err| write_error(err, conflict))?;
        out.attributes
            .filter(|item| !item.is_empty())
            .map(|item| {
                let what = format!("identity {channel}#{external_id}");
                Ok(UserId(get_s(&item, USER_ID, &what)?.to_owned()))
            })
            .transpose()
    }

    async fn unbind_identity_of(
        &self,
        channel: &str,
        external_id: &str,
        user: &UserId,
    ) -> Result<bool, StoreError> {
        // Applied once: sent again after a lost answer, a plain delete would fail its own
        // condition and report the unlinked chat as never linked.
        let delete = Delete::builder()
            .table_name(&self.table)
            .key(PK, s(identity_pk(channel, external_id)))
            .key(SK, s(IDENT))
            .condition_expression("#user = :user")
            .expression_attribute_names("#user", USER_ID)
            .expression_attribute_values(":user", s(&user.0))
            .build()
            .map_err(unavailable)?;
        // `false`: bound to someone else, or to nobody.
        crate::transact::write_once(
            &self.client,
            TransactWriteItem::builder().delete(delete).build(),
        )
        .await
    }
}

fn binding(item: &Item) -> Result<Binding, StoreError> {
    let what = "bound account";
    Ok(Binding {
        channel: get_s(item, CHANNEL, what)?.to_owned(),
        external_id: get_s(item, EXTERNAL_ID, what)?.to_owned(),
        user: UserId(get_s(item, USER_ID, what)?.to_owned()),
        bound_at_ms: get_n(item, BOUND_AT_MS, what)?,
    })
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
        (CHANNEL.into(), s(channel)),
        (EXTERNAL_ID.into(), s(external_id)),
        (GSI1PK.into(), s(IDENTS)),
        (
            GSI1SK.into(),
            s(identity_gsi1sk(user, channel, external_id)),
        ),
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
        assert_eq!(item[GSI1PK], s("IDENTS"));
        assert_eq!(item[GSI1SK], s("bob#slack#T01#U02"));
        assert_eq!(binding(&item).unwrap().external_id, "T01#U02");
        assert!(!item.contains_key(TTL), "a binding never expires");
    }
}
