//! The same message posted to two environments of the web function (a client that sends again
//! with its message id while the first post is still answered elsewhere): the second finds the
//! job held by the first and, on its one attempt, leaves it to it. Before, it gave the job up —
//! closing the turn the first was still running, and telling the user it failed.

use bridle::{AppOptions, OtherStore};
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tests::EchoModel;
use tests::server::{TestServer, parse_sse};

async fn post_as(server: &TestServer, conversation: &str, id: &str) -> reqwest::Response {
    server
        .client
        .post(server.url(&format!("/api/conversations/{conversation}/messages")))
        .json(&serde_json::json!({ "text": "hello there", "client_message_id": id }))
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_posted_again_elsewhere_is_left_to_the_first_post() {
    let store: Arc<dyn Store> = Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap());
    let options = || {
        web::in_one_invocation(AppOptions {
            store: Some(OtherStore(store.clone())),
            ..AppOptions::default()
        })
    };
    // The first environment's turn takes a while.
    let a = TestServer::start(EchoModel::new(Duration::from_secs(2)), options()).await;
    let b = TestServer::start(EchoModel::new(Duration::ZERO), options()).await;
    let conversation = a.new_conversation().await;
    let first = post_as(&a, &conversation, "m-1").await;
    assert_eq!(first.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = post_as(&b, &conversation, "m-1").await;
    assert_eq!(again.status(), 200);
    let again = parse_sse(&again.text().await.unwrap());
    let ends: Vec<&serde_json::Value> = again
        .iter()
        .filter(|(name, _)| name == "done")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(ends.len(), 1, "{again:?}");
    assert_eq!(ends[0]["end"], "retrying", "{again:?}");
    let first = parse_sse(&first.text().await.unwrap());
    assert!(
        first
            .iter()
            .any(|(name, data)| name == "done" && data["end"] == "answered"),
        "{first:?}"
    );
    let history: Vec<(String, String)> = a.history(&conversation).await;
    assert_eq!(
        history.len(),
        2,
        "the message and its answer, nothing else: {history:?}"
    );
    assert_eq!(history[0].1, "hello there");
    assert!(
        !history[1].1.contains("couldn't process"),
        "the running turn was not closed: {history:?}"
    );
    a.stop().await;
    b.stop().await;
}
