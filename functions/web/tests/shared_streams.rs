//! The web function serves one request per environment, so a user's open reply streams are
//! counted in the store (`web::in_one_invocation`, `bridle::server::streams`): two
//! environments on one store are held to the user's one cap together. Before, each counted only
//! its own (one at most), and a user posting within the write rate into a slow conversation
//! held an invocation per post. A stream gives its slot back as it ends, and as its client goes.

use bridle::{AppOptions, OtherStore};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::Store;
use tests::EchoModel;
use tests::server::TestServer;

/// Two environments of the web function on one store, each user allowed two streams.
async fn two_environments(store: Arc<dyn Store>) -> (TestServer, TestServer) {
    let options = || {
        web::in_one_invocation(AppOptions {
            store: Some(OtherStore(store.clone())),
            streams_per_user: 2,
            ..AppOptions::default()
        })
    };
    // Each turn takes a while: its stream stays open meanwhile.
    let model = || EchoModel::new(Duration::from_secs(2));
    let a = TestServer::start(model(), options()).await;
    let b = TestServer::start(model(), options()).await;
    (a, b)
}

async fn post(server: &TestServer, conversation: &str, text: &str) -> reqwest::Response {
    let id = uuid::Uuid::new_v4().simple().to_string();
    post_as(server, conversation, text, &id).await
}

/// A post with the client's own message id (the same id again is the same message).
async fn post_as(
    server: &TestServer,
    conversation: &str,
    text: &str,
    client_message_id: &str,
) -> reqwest::Response {
    server
        .client
        .post(server.url(&format!("/api/conversations/{conversation}/messages")))
        .json(&serde_json::json!({ "text": text, "client_message_id": client_message_id }))
        .send()
        .await
        .unwrap()
}

async fn held_to_one_cap_across_environments(store: Arc<dyn Store>) {
    let (a, b) = two_environments(store).await;
    // Three conversations, so that no turn waits for another's lease.
    let (one, two, three) = (
        a.new_conversation().await,
        b.new_conversation().await,
        a.new_conversation().await,
    );
    let first = post_as(&a, &one, "first", "m-first").await;
    assert_eq!(first.status(), 200);
    let second = post(&b, &two, "second").await;
    assert_eq!(second.status(), 200);
    // Each environment holds one stream of the user's; together they hold the cap.
    for (server, conversation) in [(&a, &three), (&b, &two)] {
        let refused = post(server, conversation, "one too many").await;
        assert_eq!(refused.status(), 429);
        let said: serde_json::Value = refused.json().await.unwrap();
        assert!(
            said["error"]
                .as_str()
                .unwrap()
                .contains("replies are streaming to you already"),
            "{said}"
        );
    }
    // A stream that ends gives its slot back as its last step: the next post goes through.
    let text = first.text().await.unwrap();
    assert!(text.contains("event: done"), "{text}");
    // A message answered already is refused, and gives back the slot it took at once.
    for _ in 0..3 {
        let again = post_as(&a, &one, "first", "m-first").await;
        assert_eq!(again.status(), 409);
    }
    let third = post(&b, &three, "third").await;
    assert_eq!(third.status(), 200);
    // A client that goes away: its stream's slot comes back once its response is dropped.
    drop(third);
    let deadline = Instant::now() + Duration::from_secs(10);
    let fourth = loop {
        let res = post(&a, &one, "fourth").await;
        if res.status() == 200 {
            break res;
        }
        assert_eq!(res.status(), 429);
        assert!(
            Instant::now() < deadline,
            "the dropped stream's slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    drop((second, fourth));
    let history: Vec<String> = a
        .history(&three)
        .await
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    assert!(
        !history.iter().any(|t| t.contains("one too many")),
        "a refused message is not kept: {history:?}"
    );
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_streams_are_held_to_one_cap_across_environments_on_sqlite() {
    let store = Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap());
    held_to_one_cap_across_environments(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_streams_are_held_to_one_cap_across_environments_on_dynamodb() {
    let store = tests::moto::dynamo_store("shared-streams").await;
    held_to_one_cap_across_environments(store).await;
}
