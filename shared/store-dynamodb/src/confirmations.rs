//! `Confirmations`: one item per pending confirmation (`CONV#<id>` / `PENDING#<hash>`) with a
//! `ttl`. Taking reads the record (consistently), then deletes it only as read, live and of
//! another action, in a one-item transaction (`transact::write_once`: applied once if its
//! answer is lost), so a record is consumed once.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{Item, get_n, get_s, n, s, ttl_for};
use crate::keys::{PK, SK, TTL, conversation_pk, pending_sk};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};
use store::{Confirmations, Pending, StoreError};
use transcript::ConversationId;

const CREATED_ON_ACTION: &str = "created_on_action";
const DESCRIPTION: &str = "description";
const EXPIRES_AT_MS: &str = "expires_at_ms";

#[async_trait]
impl Confirmations for DynamoStore {
    async fn put_pending(&self, pending: &Pending) -> Result<(), StoreError> {
        let item = Item::from([
            (PK.into(), s(conversation_pk(&pending.conversation))),
            (SK.into(), s(pending_sk(&pending.hash))),
            (CREATED_ON_ACTION.into(), s(&pending.created_on_action)),
            (DESCRIPTION.into(), s(&pending.description)),
            (EXPIRES_AT_MS.into(), n(pending.expires_at_ms)),
            (TTL.into(), n(ttl_for(pending.expires_at_ms))),
        ]);
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    async fn take_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        current_action: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, StoreError> {
        // Read, then deleted as read in a transaction of its own, applied once
        // ([`crate::transact::write_once`]): a plain delete whose answer was lost is sent
        // again by the SDK and fails its own condition, and a Yes press whose record it took
        // would run nothing. One read more, on a press or a typed yes only.
        let Some(pending) = self.read_pending(conversation, hash, now_ms).await? else {
            return Ok(None);
        };
        if pending.created_on_action == current_action {
            return Ok(None);
        }
        // Taken only as read: not taken by another meanwhile, nor replaced by a new question,
        // nor expired since.
        let delete = Delete::builder()
            .table_name(&self.table)
            .key(PK, s(conversation_pk(conversation)))
            .key(SK, s(pending_sk(hash)))
            .condition_expression("#action = :action AND #expires = :expires AND #expires > :now")
            .expression_attribute_names("#action", CREATED_ON_ACTION)
            .expression_attribute_names("#expires", EXPIRES_AT_MS)
            .expression_attribute_values(":action", s(&pending.created_on_action))
            .expression_attribute_values(":expires", n(pending.expires_at_ms))
            .expression_attribute_values(":now", n(now_ms))
            .build()
            .map_err(unavailable)?;
        let taken = crate::transact::write_once(
            &self.client,
            TransactWriteItem::builder().delete(delete).build(),
        )
        .await?;
        Ok(taken.then_some(pending))
    }

    async fn read_pending(
        &self,
        conversation: &ConversationId,
        hash: &str,
        now_ms: i64,
    ) -> Result<Option<Pending>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(conversation_pk(conversation)))
            .key(SK, s(pending_sk(hash)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let Some(item) = out.item else {
            return Ok(None);
        };
        // TTL deletes late: an expired record reads as absent.
        let pending = pending_from(conversation, hash, &item)?;
        Ok((pending.expires_at_ms > now_ms).then_some(pending))
    }
}

fn pending_from(
    conversation: &ConversationId,
    hash: &str,
    item: &Item,
) -> Result<Pending, StoreError> {
    let what = format!("pending confirmation {conversation}/{hash}");
    Ok(Pending {
        conversation: conversation.clone(),
        hash: hash.to_owned(),
        created_on_action: get_s(item, CREATED_ON_ACTION, &what)?.to_owned(),
        description: get_s(item, DESCRIPTION, &what)?.to_owned(),
        expires_at_ms: get_n(item, EXPIRES_AT_MS, &what)?,
    })
}
