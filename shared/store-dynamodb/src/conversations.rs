//! `ConversationStore`: one item per conversation (`CONV#<id>` / `META`), one attribute per
//! field, listed per user through `gsi1`.

use crate::DynamoStore;
use crate::body::ABSENT_OR_EXPIRED;
use crate::error::{unavailable, write_error};
use crate::item::{Item, corrupt, get_n, get_s, is_expired, n, now_s, s};
use crate::keys::{
    GSI1, GSI1PK, GSI1SK, META, PK, SK, TTL, conversation_pk, created_gsi1sk, user_gsi1pk,
};
use async_trait::async_trait;
use store::{ConversationStore, StoreError};
use transcript::{Conversation, ConversationId, ConversationStatus, UserId};

const ID: &str = "id";
const USER_ID: &str = "user_id";
const CHANNEL: &str = "channel";
const PURPOSE: &str = "purpose";
const STATUS: &str = "status";
const PROMPT_VERSION: &str = "prompt_version";
const SEGMENT: &str = "segment";
const COMPACTION_RETRY_AT: &str = "compaction_retry_at_chars";
const TURN: &str = "turn";
const CREATED_AT_MS: &str = "created_at_ms";
/// The position after the last visible entry written in a transaction with the conversation
/// item (a turn's start, a turn's finish): a hint for the next entry's position that saves a
/// Query. Entries written on their own do not move it, so it may lag (never lead): a turn
/// that meets its position taken asks the index.
pub(crate) const VISIBLE_NEXT: &str = "visible_next";

#[async_trait]
impl ConversationStore for DynamoStore {
    async fn create_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(encode(c)))
            // An expired one (an unknown sender's lobby past its date, TTL not run yet) counts
            // as absent, as on reads.
            .condition_expression(ABSENT_OR_EXPIRED)
            .expression_attribute_names("#ttl", TTL)
            .expression_attribute_values(":now", n(now_s()))
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::Conflict {
                    what: format!("conversation {}", c.id),
                })
            })?;
        Ok(())
    }

    async fn conversation(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(conversation_pk(id)))
            .key(SK, s(META))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        match out.item {
            Some(item) if !is_expired(&item, now_s()) => decode(&item).map(Some),
            _ => Ok(None),
        }
    }

    async fn update_conversation(&self, c: &Conversation) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(&self.table)
            // The same change as `conversation_update`, below.
            .key(PK, s(conversation_pk(&c.id)))
            .key(SK, s(META))
            .update_expression(
                "SET #purpose = :purpose, #status = :status, #prompt = :prompt, \
                 #segment = :segment, #turn = :turn, #retry_at = :retry_at",
            )
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#purpose", PURPOSE)
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_names("#prompt", PROMPT_VERSION)
            .expression_attribute_names("#segment", SEGMENT)
            .expression_attribute_names("#turn", TURN)
            .expression_attribute_values(":purpose", s(&c.purpose))
            .expression_attribute_values(":status", s(status_name(c.status)))
            .expression_attribute_values(":prompt", s(&c.prompt_version))
            .expression_attribute_values(":segment", n(c.segment))
            .expression_attribute_values(":turn", n(c.turn))
            .expression_attribute_names("#retry_at", COMPACTION_RETRY_AT)
            .expression_attribute_values(":retry_at", n(c.compaction_retry_at_chars))
            .send()
            .await
            .map_err(|e| {
                write_error(e, || StoreError::NotFound {
                    what: format!("conversation {}", c.id),
                })
            })?;
        Ok(())
    }

    /// Newest first; ties by id, descending (`gsi1sk` read backwards).
    async fn conversations_of(&self, user: &UserId) -> Result<Vec<Conversation>, StoreError> {
        let query = self
            .query()
            .index_name(GSI1)
            .key_condition_expression("#gsi1pk = :user")
            .expression_attribute_names("#gsi1pk", GSI1PK)
            .expression_attribute_values(":user", s(user_gsi1pk(user)))
            .scan_index_forward(false);
        let items = self.query_all(query).await?;
        items.iter().map(decode).collect()
    }

    /// One Query on the same index, from `after`'s key down, `limit` items.
    async fn conversations_page(
        &self,
        user: &UserId,
        after: Option<&(i64, ConversationId)>,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        let query = self
            .query()
            .index_name(GSI1)
            .expression_attribute_names("#gsi1pk", GSI1PK)
            .expression_attribute_values(":user", s(user_gsi1pk(user)))
            .scan_index_forward(false);
        let query = match after {
            None => query.key_condition_expression("#gsi1pk = :user"),
            Some((at, id)) => query
                .key_condition_expression("#gsi1pk = :user AND #gsi1sk < :after")
                .expression_attribute_names("#gsi1sk", GSI1SK)
                .expression_attribute_values(":after", s(created_gsi1sk(*at, id))),
        };
        let items = self.query_first_n(query, limit).await?;
        items.iter().map(decode).collect()
    }
}

impl DynamoStore {
    /// [`ConversationStore::update_conversation`]'s change as one write of a transaction.
    /// ... and notes `visible_next`, the position after the visible entry written with it
    /// (see [`VISIBLE_NEXT`]).
    pub(crate) fn conversation_update(
        &self,
        c: &Conversation,
        visible_next: u64,
    ) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, StoreError> {
        let update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.table)
            .key(PK, s(conversation_pk(&c.id)))
            .key(SK, s(META))
            .update_expression(
                "SET #purpose = :purpose, #status = :status, #prompt = :prompt, \
                 #segment = :segment, #turn = :turn, #retry_at = :retry_at, \
                 #visible_next = :visible_next",
            )
            .expression_attribute_names("#visible_next", VISIBLE_NEXT)
            .expression_attribute_values(":visible_next", n(visible_next))
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#purpose", PURPOSE)
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_names("#prompt", PROMPT_VERSION)
            .expression_attribute_names("#segment", SEGMENT)
            .expression_attribute_names("#turn", TURN)
            .expression_attribute_values(":purpose", s(&c.purpose))
            .expression_attribute_values(":status", s(status_name(c.status)))
            .expression_attribute_values(":prompt", s(&c.prompt_version))
            .expression_attribute_values(":segment", n(c.segment))
            .expression_attribute_values(":turn", n(c.turn))
            .expression_attribute_names("#retry_at", COMPACTION_RETRY_AT)
            .expression_attribute_values(":retry_at", n(c.compaction_retry_at_chars))
            .build()
            .map_err(unavailable)?;
        Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .update(update)
            .build())
    }
}

fn encode(c: &Conversation) -> Item {
    Item::from([
        (PK.into(), s(conversation_pk(&c.id))),
        (SK.into(), s(META)),
        (GSI1PK.into(), s(user_gsi1pk(&c.user_id))),
        (GSI1SK.into(), s(created_gsi1sk(c.created_at_ms, &c.id))),
        (ID.into(), s(&c.id.0)),
        (USER_ID.into(), s(&c.user_id.0)),
        (CHANNEL.into(), s(&c.channel)),
        (PURPOSE.into(), s(&c.purpose)),
        (STATUS.into(), s(status_name(c.status))),
        (PROMPT_VERSION.into(), s(&c.prompt_version)),
        (SEGMENT.into(), n(c.segment)),
        (TURN.into(), n(c.turn)),
        (CREATED_AT_MS.into(), n(c.created_at_ms)),
        (COMPACTION_RETRY_AT.into(), n(c.compaction_retry_at_chars)),
    ])
}

/// The conversation item's [`VISIBLE_NEXT`], if it has one.
pub(crate) fn visible_next(item: &Item) -> Option<u64> {
    item.get(VISIBLE_NEXT)?.as_n().ok()?.parse().ok()
}

impl DynamoStore {
    /// Note `visible_next` on an existing conversation item, as a transaction's update.
    pub(crate) fn visible_next_update(
        &self,
        id: &ConversationId,
        visible_next: u64,
    ) -> Result<aws_sdk_dynamodb::types::TransactWriteItem, StoreError> {
        let update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(&self.table)
            .key(PK, s(conversation_pk(id)))
            .key(SK, s(META))
            .update_expression("SET #visible_next = :visible_next")
            .condition_expression("attribute_exists(pk)")
            .expression_attribute_names("#visible_next", VISIBLE_NEXT)
            .expression_attribute_values(":visible_next", n(visible_next))
            .build()
            .map_err(unavailable)?;
        Ok(aws_sdk_dynamodb::types::TransactWriteItem::builder()
            .update(update)
            .build())
    }
}

pub(crate) fn decode(item: &Item) -> Result<Conversation, StoreError> {
    let what = format!(
        "conversation {}",
        item.get(ID)
            .and_then(|v| v.as_s().ok())
            .map_or("?", String::as_str)
    );
    let status = get_s(item, STATUS, &what)?;
    let status = serde_json::from_value(serde_json::Value::String(status.to_owned()))
        .map_err(|e| corrupt(&what, e))?;
    Ok(Conversation {
        id: ConversationId(get_s(item, ID, &what)?.to_owned()),
        user_id: UserId(get_s(item, USER_ID, &what)?.to_owned()),
        channel: get_s(item, CHANNEL, &what)?.to_owned(),
        purpose: get_s(item, PURPOSE, &what)?.to_owned(),
        status,
        prompt_version: get_s(item, PROMPT_VERSION, &what)?.to_owned(),
        segment: get_n(item, SEGMENT, &what)?,
        turn: get_n(item, TURN, &what)?,
        created_at_ms: get_n(item, CREATED_AT_MS, &what)?,
        // Items written before the mark existed have none: at the threshold.
        compaction_retry_at_chars: match item.get(COMPACTION_RETRY_AT) {
            None => 0,
            Some(_) => get_n(item, COMPACTION_RETRY_AT, &what)?,
        },
    })
}

/// The status's serde name (`active`, `paused`, ...), so new variants need no code here.
fn status_name(status: ConversationStatus) -> String {
    match serde_json::to_value(status) {
        Ok(serde_json::Value::String(name)) => name,
        other => unreachable!("ConversationStatus serializes as a string, got {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let mut c = Conversation::new("c#1", "u", "sms", "billing");
        c.status = ConversationStatus::Closed;
        c.segment = u32::MAX;
        c.turn = u64::MAX;
        c.created_at_ms = i64::MIN;
        c.compaction_retry_at_chars = 180_000;
        assert_eq!(decode(&encode(&c)).unwrap(), c);
    }

    #[test]
    fn an_unknown_status_is_corrupt() {
        let mut item = encode(&Conversation::new("c", "u", "web", "p"));
        item.insert(STATUS.into(), s("sleeping"));
        assert!(matches!(decode(&item), Err(StoreError::Corrupt { .. })));
    }
}
