//! `Tokens`: an MCP token is `TOKEN#<id>` / `TOKEN` (every field, the hash included; listed in
//! `gsi1` under `TOKENS#<user>` by creation time then id), and its hash is a pointer item
//! `TOKENHASH#<hash>` / `TOKENHASH` holding the id. Both are written in one
//! `TransactWriteItems`, each `attribute_not_exists`, so neither an id nor a hash is ever
//! taken twice. A lookup by hash is two strongly consistent reads; revoking and touching
//! update the token item alone. The listing comes from a global index: eventually consistent,
//! like the accounts'.

use crate::DynamoStore;
use crate::audit::refused_items;
use crate::error::unavailable;
use crate::item::{Item, get_n, get_s, n, s};
use crate::keys::{GSI1, GSI1PK, GSI1SK, PK, SK, order_preserving};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, Put, TransactWriteItem};
use store::{McpToken, StoreError, TokenScope, Tokens};
use transcript::UserId;

const TOKEN: &str = "TOKEN";
const TOKENHASH: &str = "TOKENHASH";
const ID: &str = "token_id";
const HASH: &str = "hash";
const USER_ID: &str = "user_id";
const NAME: &str = "name";
const SCOPE: &str = "scope";
const CREATED_AT_MS: &str = "created_at_ms";
const EXPIRES_AT_MS: &str = "expires_at_ms";
const LAST_USED_MS: &str = "last_used_ms";
const REVOKED_AT_MS: &str = "revoked_at_ms";

fn token_pk(id: &str) -> String {
    format!("{TOKEN}#{id}")
}

fn hash_pk(hash: &str) -> String {
    format!("{TOKENHASH}#{hash}")
}

fn listing_pk(user: &UserId) -> String {
    format!("TOKENS#{user}")
}

fn token_item(t: &McpToken) -> Item {
    let mut item = Item::from([
        (PK.into(), s(token_pk(&t.id))),
        (SK.into(), s(TOKEN)),
        (ID.into(), s(&t.id)),
        (HASH.into(), s(&t.hash)),
        (USER_ID.into(), s(&t.user.0)),
        (NAME.into(), s(&t.name)),
        (SCOPE.into(), s(t.scope.as_str())),
        (CREATED_AT_MS.into(), n(t.created_at_ms)),
        (GSI1PK.into(), s(listing_pk(&t.user))),
        (
            GSI1SK.into(),
            s(format!(
                "{:020}#{}",
                order_preserving(t.created_at_ms),
                t.id
            )),
        ),
    ]);
    for (name, value) in [
        (EXPIRES_AT_MS, t.expires_at_ms),
        (LAST_USED_MS, t.last_used_ms),
        (REVOKED_AT_MS, t.revoked_at_ms),
    ] {
        if let Some(value) = value {
            item.insert(name.into(), n(value));
        }
    }
    item
}

fn optional_n(item: &Item, name: &str, what: &str) -> Result<Option<i64>, StoreError> {
    match item.get(name) {
        None | Some(AttributeValue::Null(_)) => Ok(None),
        Some(_) => get_n(item, name, what).map(Some),
    }
}

fn token_from(item: &Item) -> Result<McpToken, StoreError> {
    let what = "MCP token";
    let scope = get_s(item, SCOPE, what)?;
    Ok(McpToken {
        id: get_s(item, ID, what)?.to_owned(),
        hash: get_s(item, HASH, what)?.to_owned(),
        user: get_s(item, USER_ID, what)?.into(),
        name: get_s(item, NAME, what)?.to_owned(),
        scope: TokenScope::parse(scope).ok_or_else(|| StoreError::Corrupt {
            what: what.into(),
            source: format!("scope {scope:?}").into(),
        })?,
        created_at_ms: get_n(item, CREATED_AT_MS, what)?,
        expires_at_ms: optional_n(item, EXPIRES_AT_MS, what)?,
        last_used_ms: optional_n(item, LAST_USED_MS, what)?,
        revoked_at_ms: optional_n(item, REVOKED_AT_MS, what)?,
    })
}

impl DynamoStore {
    fn new_put(&self, item: Item) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    async fn get_item_at(&self, pk: String, sk: &str) -> Result<Option<Item>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(pk))
            .key(SK, s(sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        Ok(out.item)
    }
}

#[async_trait]
impl Tokens for DynamoStore {
    async fn create_token(&self, token: &McpToken) -> Result<(), StoreError> {
        let pointer = Item::from([
            (PK.into(), s(hash_pk(&token.hash))),
            (SK.into(), s(TOKENHASH)),
            (ID.into(), s(&token.id)),
        ]);
        let writes = vec![self.new_put(token_item(token))?, self.new_put(pointer)?];
        let sent = crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await;
        let Err(err) = sent else { return Ok(()) };
        match refused_items(&err) {
            Some(refused) if refused.iter().any(|r| *r) => Err(StoreError::Conflict {
                what: "MCP token".into(),
            }),
            _ => Err(unavailable(err)),
        }
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<McpToken>, StoreError> {
        let Some(pointer) = self.get_item_at(hash_pk(hash), TOKENHASH).await? else {
            return Ok(None);
        };
        let id = get_s(&pointer, ID, "MCP token pointer")?.to_owned();
        let token = self.token(&id).await?;
        // The pointer and the token are written together; a token whose hash differs is not
        // this one.
        Ok(token.filter(|t| t.hash == hash))
    }

    async fn token(&self, id: &str) -> Result<Option<McpToken>, StoreError> {
        self.get_item_at(token_pk(id), TOKEN)
            .await?
            .as_ref()
            .map(token_from)
            .transpose()
    }

    async fn tokens_of(&self, user: &UserId) -> Result<Vec<McpToken>, StoreError> {
        let query = self
            .query()
            .index_name(GSI1)
            .key_condition_expression("#pk = :pk")
            .expression_attribute_names("#pk", GSI1PK)
            .expression_attribute_values(":pk", s(listing_pk(user)));
        let items = self.query_all(query).await?;
        items
            .iter()
            .map(token_from)
            // User ids may hold `#`; the listing key is exact, but compare anyway.
            .filter(|t| !matches!(t, Ok(t) if &t.user != user))
            .collect()
    }

    async fn revoke_token(&self, id: &str, at_ms: i64) -> Result<bool, StoreError> {
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(token_pk(id)))
            .key(SK, s(TOKEN))
            .update_expression("SET #r = if_not_exists(#r, :at)")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#r", REVOKED_AT_MS)
            .expression_attribute_values(":at", n(at_ms))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Ok(false)
            }
            Err(err) => Err(unavailable(err)),
        }
    }

    async fn touch_token(&self, id: &str, at_ms: i64) -> Result<(), StoreError> {
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(token_pk(id)))
            .key(SK, s(TOKEN))
            .update_expression("SET #u = :at")
            .condition_expression("attribute_exists(pk) AND (attribute_not_exists(#u) OR #u < :at)")
            .expression_attribute_names("#u", LAST_USED_MS)
            .expression_attribute_values(":at", n(at_ms))
            .send()
            .await;
        match sent {
            Err(err)
                if !err
                    .as_service_error()
                    .is_some_and(|e| e.is_conditional_check_failed_exception()) =>
            {
                Err(unavailable(err))
            }
            _ => Ok(()),
        }
    }
}
