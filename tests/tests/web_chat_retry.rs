//! A web chat turn whose attempt fails under the server (its store unavailable for a moment),
//! or that a restart cut short, is tried again by the server itself; the page says so, asks
//! nothing of the user, and shows the answer once it is recorded — in a real browser, against
//! the real local server (on a store that fails the turn's answer once; across two lives on
//! one database file). A first message whose conversation could not be made was never sent,
//! and goes back in the box. One whose answer was lost on the way (the connection failed after
//! the server took it) is answered once when sent again.

use backend::{Reply, ScriptedModel};
use bridle::{AppOptions, OtherStore};
use engine::lines;
use std::sync::Arc;
use std::time::Duration;
use store_sqlite::SqliteStore;
use tests::browser::{
    browser, eventually, press_send, send_message, shown_messages, shown_when_last_is,
    start_driver, text_of,
};
use tests::crash_store::{Crash, CrashAt, CrashStore};
use tests::server::TestServer;

/// The store write that records the model's answer, failed once.
const ANSWER_WRITE: &str = "append_message_adjusting";

/// The local server on SQLite behind a store that fails the write named `write` once, and a
/// model that answers with `replies`.
async fn on_a_store_that_fails_once(
    write: &'static str,
    replies: impl IntoIterator<Item = Reply>,
) -> (TestServer, Arc<Crash>) {
    let crash = Crash::at(CrashAt::Blip(write));
    let sqlite = Arc::new(SqliteStore::open_in_memory().unwrap());
    let store = Arc::new(CrashStore::combining(sqlite, crash.clone()));
    let options = AppOptions {
        store: Some(OtherStore(store)),
        ..AppOptions::default()
    };
    let server = TestServer::start(Arc::new(ScriptedModel::new(replies)), options).await;
    (server, crash)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_the_server_retries_by_itself_shows_its_answer_without_being_sent_again() {
    let (server, crash) = on_a_store_that_fails_once(
        ANSWER_WRITE,
        [
            Reply::text("Your list is empty."),
            Reply::text("Your list is empty."),
        ],
    )
    .await;
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
    let history = shown_when_last_is(&c, "Your list is empty.").await;
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

/// A turn the server cut short as it stopped is answered after the restart; the page said so,
/// and shows the answer once the restarted server has recorded it, without a reload or a
/// resend — in a real browser, against two lives of the local server on one database file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_cut_short_by_a_restart_shows_its_answer_once_the_server_is_back() {
    let dir = tempfile::Builder::new()
        .prefix("bridle-restart-page-")
        .tempdir()
        .unwrap();
    let options = || AppOptions {
        db: bridle::Db::File(dir.path().join("bridle.db")),
        shutdown_grace: Duration::from_millis(300),
        ..AppOptions::default()
    };
    // First life: the model takes its time, and the server stops under it.
    let slow = Arc::new(ScriptedModel::new([Reply::new()
        .then_wait(Duration::from_secs(60))
        .say("too late")]));
    let (listener, base) = TestServer::bind().await;
    let addr = listener.local_addr().unwrap();
    let first = bridle::build_app(slow.clone(), options()).unwrap();
    let server = TestServer::serve_on(listener, first).await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium-restart");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&base).await.unwrap();
    send_message(&c, "What's on my list?").await;
    eventually("the model to be asked", || async {
        (slow.requests().len() == 1).then_some(())
    })
    .await;
    server.stop().await;
    let said = eventually("the restart sentence", || async {
        text_of(&c, ".msg.assistant .error").await
    })
    .await;
    assert_eq!(said, lines::INTERRUPTED);

    // Second life, at the same address: the job resumes and is answered.
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let answer = ScriptedModel::new([Reply::text("Your list is empty.")]);
    let second = bridle::build_app(Arc::new(answer), options()).unwrap();
    let server = TestServer::serve_on(listener, second).await;
    let history = shown_when_last_is(&c, "Your list is empty.").await;
    assert_eq!(history, ["What's on my list?", "Your list is empty."]);
    c.close().await.unwrap();
    server.stop().await;
}

/// A first message whose conversation could not be made (the store failed the write) was
/// never sent: the page says so, the words go back in the box, and sending again works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_message_whose_conversation_could_not_be_made_stays_in_the_box() {
    let (server, _) =
        on_a_store_that_fails_once("create_conversation", [Reply::text("Your list is empty.")])
            .await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium-first");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();

    send_message(&c, "What's on my list?").await;
    let status = eventually("the failure", || async {
        text_of(&c, "#status").await.filter(|t| !t.is_empty())
    })
    .await;
    assert_eq!(
        status,
        "Something went wrong on our side; please try again."
    );
    let input = c.find(fantoccini::Locator::Id("input")).await.unwrap();
    assert_eq!(
        input.prop("value").await.unwrap().as_deref(),
        Some("What's on my list?")
    );
    assert_eq!(
        shown_messages(&c).await,
        Some(Vec::new()),
        "nothing shown as sent"
    );

    press_send(&c).await;
    let history = shown_when_last_is(&c, "Your list is empty.").await;
    assert_eq!(history, ["What's on my list?", "Your list is empty."]);
    c.close().await.unwrap();
    server.stop().await;
}

/// The first message's answer is lost: its request reaches the server, whose answer the page
/// never gets (the browser reports a failed connection, as for a dropped network).
const LOSE_FIRST_ANSWER: &str = r#"
    const real = window.fetch;
    let lost = false;
    window.fetch = async (path, options) => {
      const res = await real(path, options);
      if (!lost && options && options.method === "POST" && String(path).endsWith("/messages")) {
        lost = true;
        res.body.cancel();
        throw new TypeError("Failed to fetch");
      }
      return res;
    };
"#;

/// The local server answering with `model`, and a browser (its profile named `profile`) on the
/// chat, whose first message's answer will be lost.
async fn losing_the_first_answer(
    model: &Arc<ScriptedModel>,
    profile: &str,
) -> (TestServer, tests::browser::Driver, fantoccini::Client) {
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let driver = start_driver().await;
    let profile = driver.temp(profile);
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();
    c.execute(LOSE_FIRST_ANSWER, vec![]).await.unwrap();
    (server, driver, c)
}

/// The connection fails after the server took the message (its answer never reaches the
/// page): the page cannot know whether it arrived, so the words go back in the box; sent again
/// unchanged, the message goes with the same id, the server recognises it, and the page shows
/// the one answer it got — one model call, not a second turn doing the same thing again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_whose_answer_was_lost_on_the_way_is_answered_once_when_sent_again() {
    let model = Arc::new(ScriptedModel::new([
        Reply::text("Booked the room."),
        Reply::text("Booked the room again."),
    ]));
    let (server, _driver, c) = losing_the_first_answer(&model, "chromium-lost").await;

    send_message(&c, "Book the big room").await;
    let status = eventually("the failure", || async {
        text_of(&c, "#status").await.filter(|t| !t.is_empty())
    })
    .await;
    assert!(status.starts_with("The connection failed"), "{status}");
    let input = c.find(fantoccini::Locator::Id("input")).await.unwrap();
    assert_eq!(
        input.prop("value").await.unwrap().as_deref(),
        Some("Book the big room")
    );

    press_send(&c).await;
    let history = shown_when_last_is(&c, "Booked the room.").await;
    assert_eq!(history, ["Book the big room", "Booked the room."]);
    assert_eq!(
        text_of(&c, "#status").await.as_deref(),
        Some("That message had reached us already; its answer shows here when it is ready.")
    );
    assert_eq!(model.requests().len(), 1, "one turn, not two");

    c.close().await.unwrap();
    server.stop().await;
}

/// A message whose answer was lost, seen answered once the person opens the conversation again,
/// is done with: the same words sent again after that are a new message (a new id, a new turn),
/// not taken for the lost one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_words_sent_after_the_lost_one_shows_answered_are_a_new_message() {
    let model = Arc::new(ScriptedModel::new([
        Reply::text("Booked the room."),
        Reply::text("Booked it again."),
    ]));
    let (server, _driver, c) = losing_the_first_answer(&model, "chromium-lost-again").await;

    send_message(&c, "Book the big room").await;
    eventually("the failure", || async {
        text_of(&c, "#status").await.filter(|t| !t.is_empty())
    })
    .await;
    // The server answers it; the person opens the conversation again and sees that.
    eventually("the answer recorded", || async {
        (model.requests().len() == 1).then_some(())
    })
    .await;
    let hash = |c: &fantoccini::Client| {
        let c = c.clone();
        async move {
            let h = c.execute("return location.hash", vec![]).await.unwrap();
            h.as_str().unwrap_or_default().to_owned()
        }
    };
    let first = hash(&c).await;
    let back = format!("#conversations a[href='{first}']");
    // Away to a new conversation and back to this one, until its answer shows (each visit
    // loads its history).
    let history = eventually("the conversation shown answered", || async {
        c.find(fantoccini::Locator::Id("new-chat"))
            .await
            .ok()?
            .click()
            .await
            .ok()?;
        eventually("a new conversation", || async {
            (hash(&c).await != first).then_some(())
        })
        .await;
        c.find(fantoccini::Locator::Css(&back))
            .await
            .ok()?
            .click()
            .await
            .ok()?;
        let out = eventually("its history", || async {
            shown_messages(&c).await.filter(|out| !out.is_empty())
        })
        .await;
        (out.last().map(String::as_str) == Some("Booked the room.")).then_some(out)
    })
    .await;
    assert_eq!(history, ["Book the big room", "Booked the room."]);

    // The words are still in the box; sent, they are a new message.
    press_send(&c).await;
    let history = shown_when_last_is(&c, "Booked it again.").await;
    assert_eq!(
        history,
        [
            "Book the big room",
            "Booked the room.",
            "Book the big room",
            "Booked it again."
        ]
    );
    assert_eq!(model.requests().len(), 2);
    c.close().await.unwrap();
    server.stop().await;
}
