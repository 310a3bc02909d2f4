//! The MCP token port's conformance checks on SQLite.

#[tokio::test]
async fn tokens() {
    let store = store_sqlite::SqliteStore::open_in_memory().unwrap();
    store::conformance_tokens::check_tokens(&store).await;
}
