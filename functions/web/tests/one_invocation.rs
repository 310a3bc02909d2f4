//! The web function runs a posted message's turn inside the invocation that posted it, on an
//! in-memory queue that a frozen environment never runs again: with its options
//! (`web::in_one_invocation`), a turn whose attempt fails is not left for a retry that would
//! never come. It is closed in the transcript and the browser is told, in one calm sentence,
//! to send it again. The real router and worker, in-process, on a store that fails the turn's
//! answer once.

use backend::{Reply, ScriptedModel};
use bridle::{AppOptions, OtherStore};
use engine::lines;
use std::sync::Arc;
use store_sqlite::SqliteStore;
use tests::crash_store::{Crash, CrashAt, CrashStore};
use tests::server::TestServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_web_turn_is_closed_and_the_user_told_at_once_not_left_for_a_retry() {
    let crash = Crash::at(CrashAt::Blip("append_message_adjusting"));
    let sqlite = Arc::new(SqliteStore::open_in_memory().unwrap());
    let store = Arc::new(CrashStore::combining(sqlite, crash.clone()));
    let model = ScriptedModel::new([
        Reply::text("Your list is empty."),
        Reply::text("never said: no retry runs"),
    ]);
    let options = web::in_one_invocation(AppOptions {
        store: Some(OtherStore(store)),
        ..AppOptions::default()
    });
    let server = TestServer::start(Arc::new(model), options).await;
    let id = server.new_conversation().await;

    let events = server.say(&id, "What's on my list?").await;
    let (name, error) = &events[events.len() - 2];
    assert_eq!(name, "error", "{events:?}");
    assert_eq!(error["message"], lines::GAVE_UP, "{events:?}");
    let (name, done) = events.last().unwrap();
    assert_eq!(name, "done");
    assert_eq!(done["end"], "backend_failed", "{events:?}");

    // The turn is closed in the transcript with what the user saw, and nothing comes after.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let history = server.history(&id).await;
    assert_eq!(
        history,
        [
            ("user".to_owned(), "What's on my list?".to_owned()),
            ("assistant".to_owned(), lines::GAVE_UP.to_owned()),
        ],
        "writes: {:?}",
        crash.log()
    );
    server.stop().await;
}
