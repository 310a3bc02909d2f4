//! Bodies over the 400 KB item limit: split into a head item and continuation items written in
//! one transaction, put back together on read.

use crate::DynamoStore;
use crate::error::{unavailable, write_error};
use crate::item::{Item, corrupt, get_n, get_s, n, now_s, s};
use crate::keys::{LSI1SK, PK, SK, TTL, part_suffix};
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use store::StoreError;

/// The most body bytes one item holds; the rest of the item (keys, a few numbers) stays far
/// below the 400 KB limit.
pub(crate) const CHUNK_BYTES: usize = 350_000;
/// A transaction carries at most 4 MB: ten chunks and their keys fit.
pub(crate) const MAX_CHUNKS: usize = 10;

pub(crate) const BODY: &str = "body";
/// On a head: how many chunks the body has (1 when it fits in the head).
pub(crate) const CHUNKS: &str = "chunks";
/// On a continuation item: which chunk it holds (1-based).
pub(crate) const CHUNK: &str = "chunk";

/// The condition of a new item: none there, or one past its `ttl` (`:now`, epoch seconds).
pub(crate) const ABSENT_OR_EXPIRED: &str = "attribute_not_exists(pk) OR #ttl < :now";

/// A new record whose body may span items: the head's keys and attributes, and the body.
#[derive(Debug)]
pub(crate) struct NewRecord {
    pub(crate) pk: String,
    pub(crate) sk: String,
    /// The head's `lsi1sk`, when the record is in the local index.
    pub(crate) lsi1sk: Option<String>,
    /// Attributes of the head besides keys and body.
    pub(crate) attrs: Item,
    pub(crate) body: String,
}

impl DynamoStore {
    /// Write a record that must not exist yet. `Conflict { what }` when its head exists and is
    /// not past its `ttl` (an expired one counts as absent, as on reads, and is replaced).
    pub(crate) async fn put_new(&self, record: NewRecord, what: &str) -> Result<(), StoreError> {
        self.put_items(record.into_items()?, what).await
    }

    /// [`DynamoStore::put_new`] of a record's items.
    async fn put_items(&self, mut items: Vec<Item>, what: &str) -> Result<(), StoreError> {
        let conflict = || StoreError::Conflict {
            what: what.to_owned(),
        };
        if items.len() == 1 {
            let head = items.pop().unwrap_or_default();
            return self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(head))
                .condition_expression(ABSENT_OR_EXPIRED)
                .expression_attribute_names("#ttl", TTL)
                .expression_attribute_values(":now", n(now_s()))
                .send()
                .await
                .map(drop)
                .map_err(|e| write_error(e, conflict));
        }
        let writes = self.transact_puts(items)?;
        crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await
        .map(drop)
        .map_err(|e| write_error(e, conflict))
    }
}

impl DynamoStore {
    /// Write several records that must not exist yet, and `also`, all or none: one
    /// transaction, each head conditioned as in [`DynamoStore::put_new`]; `Conflict { what }`
    /// when any condition is false. Records too large to share one transaction are written one
    /// after another instead (`also` first, as one transaction).
    pub(crate) async fn put_new_together(
        &self,
        records: Vec<NewRecord>,
        also: Vec<TransactWriteItem>,
        what: &str,
    ) -> Result<(), StoreError> {
        let mut heads = Vec::new();
        for record in records {
            heads.push(record.into_items()?);
        }
        if heads.iter().map(Vec::len).sum::<usize>() > MAX_CHUNKS {
            if !also.is_empty() {
                crate::transact::send(
                    self.client
                        .transact_write_items()
                        .set_transact_items(Some(also)),
                )
                .await
                .map_err(|e| {
                    write_error(e, || StoreError::Conflict {
                        what: what.to_owned(),
                    })
                })?;
            }
            for items in heads {
                self.put_items(items, what).await?;
            }
            return Ok(());
        }
        let mut writes = also;
        for items in heads {
            writes.extend(self.transact_puts(items)?);
        }
        crate::transact::send(
            self.client
                .transact_write_items()
                .set_transact_items(Some(writes)),
        )
        .await
        .map(drop)
        .map_err(|e| {
            write_error(e, || StoreError::Conflict {
                what: what.to_owned(),
            })
        })
    }

    /// A record's items as transaction puts, its head conditioned on its key being free.
    pub(crate) fn transact_puts(
        &self,
        items: Vec<Item>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut writes = Vec::with_capacity(items.len());
        for (chunk, item) in items.into_iter().enumerate() {
            let put = Put::builder().table_name(&self.table).set_item(Some(item));
            let put = if chunk == 0 {
                put.condition_expression(ABSENT_OR_EXPIRED)
                    .expression_attribute_names("#ttl", TTL)
                    .expression_attribute_values(":now", n(now_s()))
            } else {
                put
            };
            writes.push(
                TransactWriteItem::builder()
                    .put(put.build().map_err(unavailable)?)
                    .build(),
            );
        }
        Ok(writes)
    }
}

impl NewRecord {
    /// The head item, then one item per further chunk.
    pub(crate) fn into_items(self) -> Result<Vec<Item>, StoreError> {
        let chunks = split(&self.body, CHUNK_BYTES);
        if chunks.len() > MAX_CHUNKS {
            return Err(StoreError::Unavailable(
                format!(
                    "{} {}: a body of {} bytes is over this adapter's limit of {} bytes",
                    self.pk,
                    self.sk,
                    self.body.len(),
                    MAX_CHUNKS * CHUNK_BYTES
                )
                .into(),
            ));
        }
        let mut head = self.attrs;
        head.insert(PK.into(), s(&self.pk));
        head.insert(SK.into(), s(&self.sk));
        if let Some(lsi1sk) = &self.lsi1sk {
            head.insert(LSI1SK.into(), s(lsi1sk));
        }
        head.insert(CHUNKS.into(), n(chunks.len()));
        head.insert(BODY.into(), s(chunks[0]));
        let mut items = vec![head];
        for (chunk, text) in chunks.iter().enumerate().skip(1) {
            let suffix = part_suffix(chunk);
            let mut part = Item::from([
                (PK.into(), s(&self.pk)),
                (SK.into(), s(format!("{}{suffix}", self.sk))),
                (CHUNK.into(), n(chunk)),
                (BODY.into(), s(*text)),
            ]);
            if let Some(lsi1sk) = &self.lsi1sk {
                part.insert(LSI1SK.into(), s(format!("{lsi1sk}{suffix}")));
            }
            items.push(part);
        }
        Ok(items)
    }
}

/// `text` in pieces of at most `max` bytes, cut on character boundaries; one (maybe empty)
/// piece at least.
fn split(text: &str, max: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        pieces.push(piece);
        rest = tail;
    }
    pieces.push(rest);
    pieces
}

/// A stored record put back together: its head item and its whole body.
#[derive(Debug)]
pub(crate) struct Record {
    pub(crate) head: Item,
    pub(crate) body: String,
}

/// Put records back together from items in sort-key order (a head, then its continuations).
pub(crate) fn assemble(items: Vec<Item>) -> Result<Vec<Record>, StoreError> {
    let mut records: Vec<(Record, usize, usize)> = Vec::new(); // (record, chunks, seen)
    for item in items {
        let what = describe(&item);
        if item.contains_key(CHUNKS) {
            if let Some((_, chunks, seen)) = records.last()
                && seen < chunks
            {
                return Err(corrupt(
                    what,
                    format!("the record before misses chunks {seen}..{chunks}"),
                ));
            }
            let chunks: usize = get_n(&item, CHUNKS, &what)?;
            if chunks == 0 {
                return Err(corrupt(what, "a head of 0 chunks"));
            }
            let body = get_s(&item, BODY, &what)?.to_owned();
            records.push((Record { head: item, body }, chunks, 1));
        } else {
            let chunk: usize = get_n(&item, CHUNK, &what)?;
            let Some((record, chunks, seen)) = records.last_mut() else {
                return Err(corrupt(what, "a continuation without its head"));
            };
            if chunk != *seen || chunk >= *chunks {
                return Err(corrupt(
                    what,
                    format!("chunk {chunk} where {seen} of {chunks} was due"),
                ));
            }
            record.body.push_str(get_s(&item, BODY, &what)?);
            *seen += 1;
        }
    }
    if let Some((record, chunks, seen)) = records.last()
        && seen < chunks
    {
        return Err(corrupt(
            describe(&record.head),
            format!("chunks {seen}..{chunks} are missing"),
        ));
    }
    Ok(records.into_iter().map(|(record, _, _)| record).collect())
}

/// `pk sk` of an item, for error messages.
fn describe(item: &Item) -> String {
    let key = |name| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .map_or("?", String::as_str)
    };
    format!("{} {}", key(PK), key(SK))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(body: &str) -> NewRecord {
        NewRecord {
            pk: "CONV#c".into(),
            sk: "SEEN#1".into(),
            lsi1sk: Some("L".into()),
            attrs: Item::from([("position".into(), n(1))]),
            body: body.into(),
        }
    }

    #[test]
    fn split_cuts_on_char_boundaries() {
        let text = "a\u{00E9}\u{1F600}b".repeat(5);
        for max in 4..12 {
            let pieces = split(&text, max);
            assert!(pieces.iter().all(|p| p.len() <= max));
            assert_eq!(pieces.concat(), text);
        }
        assert_eq!(split("", 4), [""]);
    }

    #[test]
    fn small_bodies_stay_in_one_item() {
        let items = record("{}").into_items().unwrap();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0][CHUNKS], n(1));
        assert_eq!(items[0]["position"], n(1));
        let back = assemble(items).unwrap();
        assert_eq!(back[0].body, "{}");
    }

    #[test]
    fn large_bodies_split_and_reassemble() {
        let body = "\u{00E9}xyz".repeat(CHUNK_BYTES / 2);
        let items = record(&body).into_items().unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[1][SK], s("SEEN#1#PART#001"));
        assert_eq!(items[2][LSI1SK], s("L#PART#002"));
        assert!(
            items
                .iter()
                .all(|i| i[BODY].as_s().unwrap().len() <= CHUNK_BYTES)
        );
        let back = assemble(items).unwrap();
        assert_eq!(back.len(), 1);
        assert!(back[0].body == body);
    }

    #[test]
    fn too_large_a_body_is_refused() {
        let body = "x".repeat(MAX_CHUNKS * CHUNK_BYTES + 1);
        let result = record(&body).into_items();
        assert!(
            matches!(result, Err(StoreError::Unavailable(_))),
            "{result:?}"
        );
    }

    #[test]
    fn missing_or_stray_chunks_are_corrupt() {
        let body = "x".repeat(CHUNK_BYTES * 2 + 1);
        let items = record(&body).into_items().unwrap();
        let mut missing_last = items.clone();
        missing_last.pop();
        let mut missing_middle = items.clone();
        missing_middle.remove(1);
        let mut next_head = missing_last.clone();
        next_head.extend(record("{}").into_items().unwrap());
        let orphan = items[1..].to_vec();
        for broken in [missing_last, missing_middle, next_head, orphan] {
            let result = assemble(broken);
            assert!(
                matches!(result, Err(StoreError::Corrupt { .. })),
                "{result:?}"
            );
        }
    }
}
