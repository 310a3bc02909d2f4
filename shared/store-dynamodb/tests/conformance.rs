//! The store conformance suite against the DynamoDB emulator, each check on a table of its own.
//! Needs `AWS_ENDPOINT_URL` (see `support`).

mod support;

store::conformance_tests!(support::fresh_store().await);

/// Again with one item per query page, so every read follows `LastEvaluatedKey` many times.
mod one_item_pages {
    store::conformance_tests!(super::support::fresh_store().await.with_page_limit(1));
}
