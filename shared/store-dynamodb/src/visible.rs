//! `VisibleStore`: what the user saw, one record per entry (`CONV#<id>` / `SEEN#<position>`),
//! the whole entry as JSON.

use crate::DynamoStore;
use crate::body::{CHUNKS, MAX_CHUNKS, NewRecord, Record, assemble};
use crate::item::{Item, corrupt, n, s};
use crate::keys::{PK, SEEN, SK, TTL, conversation_pk, part_suffix, position_in, visible_sk};
use crate::messages::next_after;
use async_trait::async_trait;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use store::{StoreError, VisibleEntry, VisibleStore};
use transcript::ConversationId;

const POSITION: &str = "position";

#[async_trait]
impl VisibleStore for DynamoStore {
    async fn append_visible(&self, e: &VisibleEntry) -> Result<(), StoreError> {
        let (record, what) = visible_record(e)?;
        self.put_new(record, &what).await
    }

    fn turn_writes(&self) -> Option<&dyn store::TurnWrites> {
        Some(self)
    }

    async fn visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Vec<VisibleEntry>, StoreError> {
        let items = self.query_all(self.seen_query(conversation)).await?;
        assemble(items)?
            .into_iter()
            .map(|record| decode(conversation, record))
            .collect()
    }

    async fn next_visible_position(
        &self,
        conversation: &ConversationId,
    ) -> Result<u64, StoreError> {
        let query = self
            .seen_query(conversation)
            .projection_expression("#pk, #sk, #ttl")
            .expression_attribute_names("#ttl", TTL)
            .scan_index_forward(false);
        next_after(self.query_first(query).await?, SEEN, conversation)
    }

    /// One Query (newest first, one item) whatever the transcript's length; an entry whose
    /// body spans items (the newest item is then its last continuation) costs a second one for
    /// its items.
    async fn last_visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        let newest = self.seen_query(conversation).scan_index_forward(false);
        let item = self.query_first(newest).await?;
        self.entry_of(conversation, item).await
    }

    /// One Query (oldest first, one item); a second for an entry whose body spans items.
    async fn first_visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        let item = self.query_first(self.seen_query(conversation)).await?;
        self.entry_of(conversation, item).await
    }

    /// One Query over the range's keys (every item of position `p` sorts from `SEEN#p` up to,
    /// not including, `SEEN#p+1`), paged by DynamoDB's 1 MB.
    async fn visible_range(
        &self,
        conversation: &ConversationId,
        from: u64,
        before: u64,
    ) -> Result<Vec<VisibleEntry>, StoreError> {
        if from >= before {
            return Ok(Vec::new());
        }
        let last = before - 1;
        let range = self
            .query()
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :from AND :to")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(conversation_pk(conversation)))
            .expression_attribute_values(":from", s(visible_sk(from)))
            .expression_attribute_values(":to", s(visible_sk(last) + &part_suffix(MAX_CHUNKS)))
            .consistent_read(true);
        let items = self.query_all(range).await?;
        assemble(items)?
            .into_iter()
            .map(|record| decode(conversation, record))
            .collect()
    }
}

impl DynamoStore {
    /// The entry `item` (any of its items) belongs to: that item alone when the entry is one
    /// item, else one more Query for the entry's items.
    async fn entry_of(
        &self,
        conversation: &ConversationId,
        item: Option<Item>,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        let Some(item) = item else {
            return Ok(None);
        };
        let whole = item
            .get(CHUNKS)
            .and_then(|v| v.as_n().ok())
            .map(String::as_str)
            == Some("1");
        let items = if whole {
            vec![item]
        } else {
            let position = next_after(Some(item), SEEN, conversation)? - 1;
            let entry = self
                .seen_query(conversation)
                .expression_attribute_values(":seen", s(visible_sk(position)));
            self.query_all(entry).await?
        };
        let record = assemble(items)?.pop();
        record.map(|r| decode(conversation, r)).transpose()
    }

    /// A conversation's visible items, strongly consistent.
    fn seen_query(&self, conversation: &ConversationId) -> QueryFluentBuilder {
        self.query()
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :seen)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(conversation_pk(conversation)))
            .expression_attribute_values(":seen", s(SEEN))
            .consistent_read(true)
    }
}

/// An entry as the record it is stored as, and its name for errors.
pub(crate) fn visible_record(e: &VisibleEntry) -> Result<(NewRecord, String), StoreError> {
    let what = format!("visible entry {}@{}", e.conversation_id, e.position);
    let body = serde_json::to_string(e).map_err(|err| corrupt(&what, err))?;
    let record = NewRecord {
        pk: conversation_pk(&e.conversation_id),
        sk: visible_sk(e.position),
        lsi1sk: None,
        attrs: Item::from([(POSITION.into(), n(e.position))]),
        body,
    };
    Ok((record, what))
}

/// The stored JSON, checked against the key it was stored under.
fn decode(conversation: &ConversationId, record: Record) -> Result<VisibleEntry, StoreError> {
    let sk = record
        .head
        .get(SK)
        .and_then(|v| v.as_s().ok())
        .map_or("", String::as_str);
    let what = format!("visible entry {conversation} {sk}");
    let entry: VisibleEntry = serde_json::from_str(&record.body).map_err(|e| corrupt(&what, e))?;
    if &entry.conversation_id != conversation || position_in(sk, SEEN) != Some(entry.position) {
        return Err(corrupt(what, "body does not match the item's key"));
    }
    Ok(entry)
}
