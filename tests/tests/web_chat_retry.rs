//! A web chat turn whose attempt fails under the server (its store unavailable for a moment) is
//! tried again by the server itself; the page says so, asks nothing of the user, and shows the
//! answer once the retry has recorded it — in a real browser, against the real local server on
//! a store that fails the turn's answer once.

use backend::{Reply, ScriptedModel};
use bridle::{AppOptions, OtherStore};
use engine::lines;
use std::sync::Arc;
use store_sqlite::SqliteStore;
use tests::browser::{browser, eventually, send_message, shown_messages, start_driver, text_of};
use tests::crash_store::{Crash, CrashAt, CrashStore};
use tests::server::TestServer;

/// The store write that records the model's answer, failed once.
const ANSWER_WRITE: &str = "append_message_adjusting";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_the_server_retries_by_itself_shows_its_answer_without_being_sent_again() {
    let crash = Crash::at(CrashAt::Blip(ANSWER_WRITE));
    let sqlite = Arc::new(SqliteStore::open_in_memory().unwrap());
    let store = Arc::new(CrashStore::combining(sqlite, crash.clone()));
    let model = ScriptedModel::new([
        Reply::text("Your list is empty."),
        Reply::text("Your list is empty."),
    ]);
    let options = AppOptions {
        store: Some(OtherStore(store)),
        ..AppOptions::default()
    };
    let server = TestServer::start(Arc::new(model), options).await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium");
    let c = browser(&driver, &profile, (1280, 800)).await;

    c.goto(&server.base).await.unwrap();
    send_message(&c, "What's on my list?").await;

    // The attempt fails: the user is told it is being tried again, not to send it again.
    let said = eventually("the retry sentence", || async {
        text_of(&c, ".msg.assistant .error").await
    })
    .await;
    assert_eq!(said, lines::RETRYING, "writes: {:?}", crash.log());

    // The retry answers it, and the page shows the recorded answer in place of the sentence.
    let history = eventually("the answer, shown without a reload", || async {
        let out = shown_messages(&c).await?;
        (out.last().map(String::as_str) == Some("Your list is empty.")).then_some(out)
    })
    .await;
    assert_eq!(history, ["What's on my list?", "Your list is empty."]);
    assert!(text_of(&c, ".msg.assistant .error").await.is_none());
    assert_eq!(
        crash.log().iter().filter(|w| **w == ANSWER_WRITE).count(),
        2,
        "the answer's write failed once and was made by the retry: {:?}",
        crash.log()
    );

    c.close().await.unwrap();
    server.stop().await;
}
