//! `MessageStore`: the model transcript, one record per message (`CONV#<id>` /
//! `MSG#<position>`), the whole message as JSON; a segment is read through `lsi1`.

use crate::DynamoStore;
use crate::body::{NewRecord, Record, assemble};
use crate::item::{Item, corrupt, n, s};
use crate::keys::{
    LSI1, LSI1SK, MSG, PK, SK, TTL, conversation_pk, message_lsi1sk, message_sk, position_in,
    segment_prefix,
};
use async_trait::async_trait;
use store::{MessageStore, StoreError, VisibleEntry};
use transcript::{Conversation, ConversationId, Message};

const SEGMENT: &str = "segment";
const POSITION: &str = "position";

#[async_trait]
impl MessageStore for DynamoStore {
    async fn append_message(&self, m: &Message) -> Result<(), StoreError> {
        let (record, what) = message_record(m)?;
        self.put_new(record, &what).await
    }

    /// One `TransactWriteItems` for both (each head conditioned on its key being free).
    async fn start_turn(
        &self,
        c: &Conversation,
        m: &Message,
        e: &VisibleEntry,
    ) -> Result<(), StoreError> {
        let (message, what) = message_record(m)?;
        let (entry, seen) = crate::visible::visible_record(e)?;
        let moved_on = self.conversation_update(c, e.position + 1)?;
        self.put_new_together(
            vec![message, entry],
            vec![moved_on],
            &format!("{what} or {seen} (or conversation {} gone)", c.id),
        )
        .await
    }

    async fn messages(
        &self,
        conversation: &ConversationId,
        segment: u32,
    ) -> Result<Vec<Message>, StoreError> {
        let query = self
            .query()
            .index_name(LSI1)
            .key_condition_expression("#pk = :pk AND begins_with(#lsi1sk, :segment)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#lsi1sk", LSI1SK)
            .expression_attribute_values(":pk", s(conversation_pk(conversation)))
            .expression_attribute_values(":segment", s(segment_prefix(segment)))
            .consistent_read(true);
        let items = self.query_all(query).await?;
        assemble(items)?
            .into_iter()
            .map(|record| decode(conversation, segment, record))
            .collect()
    }

    async fn next_position(&self, conversation: &ConversationId) -> Result<u64, StoreError> {
        let query = self
            .query()
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :msg)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(conversation_pk(conversation)))
            .expression_attribute_values(":msg", s(MSG))
            .projection_expression("#pk, #sk, #ttl")
            .expression_attribute_names("#ttl", TTL)
            .scan_index_forward(false)
            .consistent_read(true);
        next_after(self.query_first(query).await?, MSG, conversation)
    }
}

/// A message as the record it is stored as, and its name for errors.
pub(crate) fn message_record(m: &Message) -> Result<(NewRecord, String), StoreError> {
    let what = format!("message {}@{}", m.conversation_id, m.position);
    let body = serde_json::to_string(m).map_err(|e| corrupt(&what, e))?;
    let record = NewRecord {
        pk: conversation_pk(&m.conversation_id),
        sk: message_sk(m.position),
        lsi1sk: Some(message_lsi1sk(m.segment, m.position)),
        attrs: Item::from([
            (SEGMENT.into(), n(m.segment)),
            (POSITION.into(), n(m.position)),
        ]),
        body,
    };
    Ok((record, what))
}

/// The position after the one in `last`'s sort key; 0 when there is none.
pub(crate) fn next_after(
    last: Option<Item>,
    prefix: &str,
    conversation: &ConversationId,
) -> Result<u64, StoreError> {
    let Some(item) = last else { return Ok(0) };
    let sk = item
        .get(SK)
        .and_then(|v| v.as_s().ok())
        .map_or("", String::as_str);
    let position = position_in(sk, prefix).ok_or_else(|| {
        corrupt(
            format!("{conversation} {sk}"),
            "no position in the sort key",
        )
    })?;
    position.checked_add(1).ok_or_else(|| {
        corrupt(
            format!("{conversation} {sk}"),
            "the last position is u64::MAX",
        )
    })
}

/// The stored JSON, checked against the key it was stored under.
fn decode(
    conversation: &ConversationId,
    segment: u32,
    record: Record,
) -> Result<Message, StoreError> {
    let sk = record
        .head
        .get(SK)
        .and_then(|v| v.as_s().ok())
        .map_or("", String::as_str);
    let what = format!("message {conversation} {sk}");
    let message: Message = serde_json::from_str(&record.body).map_err(|e| corrupt(&what, e))?;
    if &message.conversation_id != conversation
        || message.segment != segment
        || position_in(sk, MSG) != Some(message.position)
    {
        return Err(corrupt(what, "body does not match the item's key"));
    }
    Ok(message)
}
