//! A disk that fails to sync (EIO: the kernel may have dropped what it could not write) is an
//! ordinary day too. The local server on a file whose syncs begin to fail says so where a
//! supervisor looks (`/healthz` answers 503 with the reason), refuses new messages with a clear
//! error rather than acknowledging what it cannot promise to keep, and a restart on the same file
//! (which reads the log again) serves as before.

use bridle::{AppOptions, Db};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tests::EchoModel;
use tests::server::TestServer;

/// The local server on the database file at `path`, whose syncs fail once `failing` is set.
async fn server_on(path: &std::path::Path, failing: Arc<AtomicBool>) -> TestServer {
    let db = store_sqlite::Db::open_syncing_with(path, move || {
        if failing.load(Ordering::SeqCst) {
            Err(std::io::Error::other("EIO"))
        } else {
            Ok(())
        }
    })
    .unwrap();
    let options = AppOptions {
        db: Db::Opened(path.to_owned(), Arc::new(db)),
        ..AppOptions::default()
    };
    TestServer::start(EchoModel::new(Duration::ZERO), options).await
}

async fn health(s: &TestServer) -> (u16, String) {
    let res = s.client.get(s.url("/healthz")).send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

/// Post `text` to `conversation`: the status and the body.
async fn post(s: &TestServer, conversation: &str, text: &str) -> (u16, String) {
    let res = s
        .client
        .post(s.url(&format!("/api/conversations/{conversation}/messages")))
        .json(&serde_json::json!({ "text": text }))
        .send()
        .await
        .unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_is_reported_and_new_messages_are_refused_until_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bridle.db");
    let failing = Arc::new(AtomicBool::new(false));
    let s = server_on(&path, failing.clone()).await;
    let conversation = s.new_conversation().await;
    s.say(&conversation, "before").await;
    assert_eq!(health(&s).await, (200, "ok".to_owned()));

    failing.store(true, Ordering::SeqCst);
    // The message whose sync failed: committed, but not promised kept, so not acknowledged.
    let (status, body) = post(&s, &conversation, "during").await;
    assert!(status >= 500, "{status} {body}");
    assert!(body.contains("\"error\""), "a JSON sentence: {body}");
    let (status, why) = health(&s).await;
    assert_eq!(status, 503, "{why}");
    assert!(why.contains("EIO"), "the reason, for the operator: {why}");
    // One after it is refused before it is written at all: nothing is queued that the client
    // was told failed.
    let (status, body) = post(&s, &conversation, "after").await;
    assert!(status >= 500, "{status} {body}");
    assert!(!body.contains("event: queued"), "{body}");
    // Reads go on.
    let seen = s.history(&conversation).await;
    assert!(
        seen.iter().any(|(_, text)| text.contains("before")),
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|(_, text)| text.contains("after")),
        "{seen:?}"
    );
    s.stop().await;

    // A restart reads the log again: healthy, and the conversation goes on.
    let s = server_on(&path, Arc::new(AtomicBool::new(false))).await;
    assert_eq!(health(&s).await, (200, "ok".to_owned()));
    let events = s.say(&conversation, "again").await;
    assert_eq!(events.last().map(|(name, _)| name.as_str()), Some("done"));
    let seen = s.history(&conversation).await;
    assert!(
        seen.iter().any(|(_, text)| text.contains("again")),
        "{seen:?}"
    );
    s.stop().await;
}
