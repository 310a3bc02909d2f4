//! What the web app's reads cost on DynamoDB, counted from outside: the local server's router on
//! a table in moto reached through a proxy that tallies each request's operation
//! (`X-Amz-Target`). The conversation list and a page of history cost the same whatever the
//! length of the history and however many conversations the user has: the list, one Query for
//! the page and one per conversation on it (its preview); a page of history, the conversation's
//! item, its end and the page. The items the Queries read (`ScannedCount`) are counted too, so
//! one call reading the whole history would not pass for a cheap one.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use bridle::{AppOptions, OtherStore};
use fake_lambda::moto_proxy::forward_to_moto;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use store::Store;
use store_dynamodb::DynamoStore;
use tests::EchoModel;
use tests::server::TestServer;

/// Calls by operation since the last take, and the items the Queries among them read
/// (their `ScannedCount`).
#[derive(Clone, Default)]
struct Tally(Arc<Mutex<(BTreeMap<String, usize>, usize)>>);

impl Tally {
    fn take(&self) -> (BTreeMap<String, usize>, usize) {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[derive(Clone)]
struct Proxy {
    tally: Tally,
    moto: String,
    http: reqwest::Client,
}

async fn forward(
    State(p): State<Proxy>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.rsplit('.').next())
        .unwrap_or("?")
        .to_owned();
    *p.tally
        .0
        .lock()
        .unwrap()
        .0
        .entry(target.clone())
        .or_default() += 1;
    let answer = forward_to_moto(&p.http, &p.moto, headers, body).await;
    if target == "Query" {
        let read: Value = serde_json::from_slice(&answer.2).unwrap_or_default();
        let scanned = read["ScannedCount"].as_u64().unwrap_or_default();
        p.tally.0.lock().unwrap().1 += scanned as usize;
    }
    answer
}

/// A fresh table in moto, and a store on it through the counting proxy.
async fn counted_store() -> (Arc<dyn Store>, Tally) {
    let (_, table) = tests::moto::dynamo_table("web-reads").await;
    let tally = Tally::default();
    let proxy = Proxy {
        tally: tally.clone(),
        moto: tests::moto::endpoint(),
        http: reqwest::Client::new(),
    };
    let client =
        tests::moto::client_through(Router::new().route("/", post(forward)).with_state(proxy))
            .await;
    (Arc::new(DynamoStore::new(client, table)), tally)
}

fn calls(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_and_a_page_of_history_cost_the_same_however_long_and_however_many() {
    let (store, tally) = counted_store().await;
    let options = AppOptions {
        store: Some(OtherStore(store)),
        ..AppOptions::default()
    };
    let server = TestServer::start(EchoModel::new(std::time::Duration::ZERO), options).await;
    let mut ids = Vec::new();
    for _ in 0..60 {
        ids.push(server.new_conversation().await);
    }
    // The two newest conversations: one with a long history, one with a single entry.
    server.seed_history(&ids[59], 260).await;
    server.seed_history(&ids[58], 1).await;
    let get = |path: String| {
        let url = server.url(&path);
        async move {
            let res = reqwest::get(url).await.unwrap();
            assert_eq!(res.status(), 200);
            res.json::<Value>().await.unwrap()
        }
    };

    tally.take();
    let listed = get("/api/conversations".into()).await;
    assert_eq!(listed.as_array().unwrap().len(), 50);
    assert_eq!(
        tally.take(),
        (calls(&[("Query", 51)]), 53),
        "the page's Query (51 items: one more tells that another page follows) and one per \
         conversation on it (its first entry, if any: two have one), not 60 and not 261 entries"
    );

    let long = format!("/api/conversations/{}/messages", ids[59]);
    let newest = get(long.clone()).await;
    assert_eq!(newest["messages"].as_array().unwrap().len(), 100);
    assert_eq!(newest["messages"][99]["text"], "entry 259");
    assert_eq!(
        tally.take(),
        (calls(&[("GetItem", 1), ("Query", 2)]), 101),
        "the conversation, its end (one item) and the page (100), not 260 entries"
    );
    let earlier = get(format!("{long}?before=60")).await;
    assert_eq!(earlier["messages"].as_array().unwrap().len(), 60);
    assert_eq!(earlier["earlier"], false);
    assert_eq!(tally.take(), (calls(&[("GetItem", 1), ("Query", 1)]), 60));

    let short = get(format!("/api/conversations/{}/messages", ids[58])).await;
    assert_eq!(short["messages"].as_array().unwrap().len(), 1);
    assert_eq!(
        tally.take(),
        (calls(&[("GetItem", 1), ("Query", 2)]), 2),
        "the same calls for one entry as for 260"
    );
    server.stop().await;
}

/// An id longer than any of ours names nothing: 404 (400 for a page's `after_id`) without
/// asking the store. DynamoDB would refuse the key (over 2,048 bytes), which reads as an
/// outage: a 500 and an error log for anyone who sends a long address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_too_long_to_be_ours_is_not_found_without_a_store_call() {
    let (store, tally) = counted_store().await;
    let options = AppOptions {
        store: Some(OtherStore(store)),
        ..AppOptions::default()
    };
    let server = TestServer::start(EchoModel::new(std::time::Duration::ZERO), options).await;
    let long = "c".repeat(2_100);
    tally.take();
    let http = reqwest::Client::new();
    for (path, status) in [
        (format!("/api/conversations/{long}/messages"), 404),
        (
            format!("/api/conversations?after_ms=1&after_id={long}"),
            400,
        ),
    ] {
        let res = http.get(server.url(&path)).send().await.unwrap();
        assert_eq!(res.status(), status, "{}", &path[..40]);
    }
    let res = http
        .post(server.url(&format!("/api/conversations/{long}/messages")))
        .json(&serde_json::json!({"text": "hi", "client_message_id": "m-1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let res = http
        .delete(server.url(&format!("/api/mcp-tokens/{long}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    let (asked, _) = tally.take();
    assert!(asked.is_empty(), "the store was not asked: {asked:?}");
}
