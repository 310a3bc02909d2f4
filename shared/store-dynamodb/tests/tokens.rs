//! The MCP token port's conformance checks on the DynamoDB emulator. Needs `AWS_ENDPOINT_URL`
//! (see `support`).

mod support;

#[tokio::test]
async fn tokens() {
    let store = support::fresh_store().await;
    store::conformance_tokens::check_tokens(&store).await;
}

/// Every listing read follows `LastEvaluatedKey`.
#[tokio::test]
async fn tokens_one_item_pages() {
    let store = support::fresh_store().await.with_page_limit(1);
    store::conformance_tokens::check_tokens(&store).await;
}
