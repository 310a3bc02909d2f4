//! Queries that follow `LastEvaluatedKey` (DynamoDB ends a page at 1 MB or at `Limit`) and
//! leave out expired items.

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{Item, is_expired, now_s};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
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
        let query = query.set_limit(self.page_limit);
        let now_s = now_s();
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let page = query
                .clone()
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
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(items),
            }
        }
    }

    /// The first live item the query matches, reading one item per request.
    pub(crate) async fn query_first(
        &self,
        query: QueryFluentBuilder,
    ) -> Result<Option<Item>, StoreError> {
        let query = query.limit(1);
        let now_s = now_s();
        let mut start = None;
        loop {
            let page = query
                .clone()
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            let live = page
                .items
                .unwrap_or_default()
                .into_iter()
                .find(|item| !is_expired(item, now_s));
            match (live, page.last_evaluated_key) {
                (Some(item), _) => return Ok(Some(item)),
                (None, Some(key)) if !key.is_empty() => start = Some(key),
                (None, _) => return Ok(None),
            }
        }
    }
}
