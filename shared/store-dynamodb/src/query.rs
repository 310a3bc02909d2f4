//! Queries that follow `LastEvaluatedKey` (DynamoDB ends a page at 1 MB or at `Limit`) and
//! leave out expired items, and consistent batch reads.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{Item, is_expired, now_s};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::KeysAndAttributes;
use store::StoreError;

impl DynamoStore {
    /// A query on this store's table (key condition and values still to add).
    pub(crate) fn query(&self) -> QueryFluentBuilder {
        self.client.query().table_name(&self.table)
    }

    /// Every live item the query matches, in its order, page after page.
    pub(crate) async fn query_all(
        &self,
        query: QueryFluentBuilder,
    ) -> Result<Vec<Item>, StoreError> {
        self.query_up_to(query, None).await
    }

    /// The first live item the query matches, reading one item per request.
    pub(crate) async fn query_first(
        &self,
        query: QueryFluentBuilder,
    ) -> Result<Option<Item>, StoreError> {
        Ok(self.query_first_n(query, 1).await?.pop())
    }

    /// The first `n` live items the query matches, in its order, asking for `n` at a time
    /// (another request only when expired items or DynamoDB's 1 MB cut a page short).
    pub(crate) async fn query_first_n(
        &self,
        query: QueryFluentBuilder,
        n: usize,
    ) -> Result<Vec<Item>, StoreError> {
        self.query_up_to(query, Some(n)).await
    }

    /// The live items the query matches, in its order, following `LastEvaluatedKey`: all of
    /// them (`None`), or the first `n`, each request asking only for what is still missing.
    async fn query_up_to(
        &self,
        query: QueryFluentBuilder,
        n: Option<usize>,
    ) -> Result<Vec<Item>, StoreError> {
        let now_s = now_s();
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let limit = match n {
                None => self.page_limit,
                Some(n) => Some(
                    i32::try_from(n - items.len())
                        .unwrap_or(i32::MAX)
                        .min(self.page_limit.unwrap_or(i32::MAX)),
                ),
            };
            let page = query
                .clone()
                .set_limit(limit)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            items.extend(
                page.items
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|item| !is_expired(item, now_s)),
            );
            if n.is_some_and(|n| items.len() >= n) {
                break;
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        if let Some(n) = n {
            items.truncate(n);
        }
        Ok(items)
    }

    /// The items at `keys` (absent ones left out), read consistently, a hundred a request,
    /// asking again for what DynamoDB left unprocessed.
    pub(crate) async fn get_consistent(
        &self,
        keys: Vec<Item>,
        what: &str,
    ) -> Result<Vec<Item>, StoreError> {
        const TRIES: usize = 5;
        let mut items = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(100) {
            let mut ask = chunk.to_vec();
            for _ in 0..TRIES {
                let out = self
                    .client
                    .batch_get_item()
                    .request_items(
                        &self.table,
                        KeysAndAttributes::builder()
                            .set_keys(Some(std::mem::take(&mut ask)))
                            .consistent_read(true)
                            .build()
                            .map_err(unavailable)?,
                    )
                    .send()
                    .await
                    .map_err(unavailable)?;
                items.extend(
                    out.responses
                        .and_then(|mut r| r.remove(&self.table))
                        .unwrap_or_default(),
                );
                ask = out
                    .unprocessed_keys
                    .and_then(|mut u| u.remove(&self.table))
                    .map(|k| k.keys)
                    .unwrap_or_default();
                if ask.is_empty() {
                    break;
                }
            }
            if !ask.is_empty() {
                return Err(StoreError::Unavailable(
                    format!("{what}: still unprocessed after {TRIES} tries").into(),
                ));
            }
        }
        Ok(items)
    }
}
