//! The page where an AI client's owner approves a risky change (`/approve`), in a real browser
//! (headless Chromium through ChromeDriver): it shows what the database says the call would do
//! and which token asks, Approve records the approval, and the client's same call then runs;
//! ids Bridle never made are no question; `/connect` without sign-in says what that means.

use backend::ScriptedModel;
use bridle::admin_cli::tokens::issue_token;
use bridle::{AppOptions, OtherStore};
use fantoccini::Locator;
use serde_json::{Value, json};
use std::sync::Arc;
use store::{Account, Accounts, ConversationStore, TokenScope};
use store_sqlite::SqliteStore;
use tests::browser::{browser, eventually, start_driver, text_of};
use tests::server::TestServer;
use transcript::UserId;

async fn call(server: &TestServer, token: &str, tool: &str, arguments: Value) -> Value {
    tests::mcp_calls::tools_call(&server.client, &server.url("/mcp"), token, tool, arguments).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_on_the_page_lets_the_clients_same_call_run() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .put_account(&Account::new("local", "You"))
        .await
        .unwrap();
    let options = AppOptions {
        store: Some(OtherStore(store.clone())),
        tokens: Some(store.clone()),
        ..AppOptions::default()
    };
    let server = TestServer::start(Arc::new(ScriptedModel::new(vec![])), options).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let (_, token) = issue_token(
        store.as_ref(),
        &UserId::from("local"),
        "Claude at home",
        TokenScope::Risky,
        None,
        now,
    )
    .await
    .unwrap();
    let made = call(
        &server,
        &token,
        "create_event",
        json!({"title": "Spring Open", "starts_at": "2030-04-12T10:00", "venue": "Court 1", "capacity": 40}),
    )
    .await;
    let id = made["structuredContent"]["id"].as_str().unwrap().to_owned();
    call(&server, &token, "publish_event", json!({"event_id": id})).await;
    let waits = call(&server, &token, "cancel_event", json!({"event_id": id})).await;
    assert_eq!(waits["isError"], true, "{waits}");
    let page = tests::mcp_calls::approval_page_in(&waits);

    let driver = start_driver().await;
    let profile = driver.temp("approve");
    let c = browser(&driver, &profile, (1280, 800)).await;

    // An address whose ids Bridle never made is no question, and the page calls nothing with
    // them (`..` would otherwise reach another API: this one would make a conversation).
    c.goto(&server.url("/approve?token=..&call=conversations"))
        .await
        .unwrap();
    let problem = eventually("the page's sentence", || async {
        let problem = text_of(&c, "#problem").await?;
        (!problem.is_empty()).then_some(problem)
    })
    .await;
    assert!(problem.contains("names no question"), "{problem}");
    assert!(
        store
            .conversations_of(&UserId::from("local"))
            .await
            .unwrap()
            .is_empty(),
        "no conversation was made"
    );

    c.goto(&page).await.unwrap();
    let shown = eventually("the question", || async {
        let ready = c
            .find(Locator::Id("yes"))
            .await
            .ok()?
            .is_enabled()
            .await
            .ok()?;
        ready.then_some(())?;
        text_of(&c, "#description").await
    })
    .await;
    assert_eq!(
        shown,
        "Cancel Spring Open (published, 2030-04-12T10:00 at Court 1, 0 registered)"
    );
    assert_eq!(
        text_of(&c, "#client").await.as_deref(),
        Some("Claude at home")
    );
    let status = || async {
        let listed = call(&server, &token, "list_events", json!({})).await;
        listed["structuredContent"]["items"][0]["status"].clone()
    };
    assert_eq!(
        status().await,
        "published",
        "nothing runs before the approval"
    );

    c.find(Locator::Id("yes"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let done = eventually("the approval", || async {
        let done = text_of(&c, "#done").await?;
        (!done.is_empty()).then_some(done)
    })
    .await;
    assert!(done.starts_with("Approved"), "{done}");

    let ran = call(&server, &token, "cancel_event", json!({"event_id": id})).await;
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(status().await, "cancelled");

    // The page again: the question is answered, and it says so.
    c.refresh().await.unwrap();
    let problem = eventually("the page's sentence", || async {
        let problem = text_of(&c, "#problem").await?;
        (!problem.is_empty()).then_some(problem)
    })
    .await;
    assert!(problem.contains("no such question"), "{problem}");

    // Without sign-in, the page that makes tokens says what a risky one can do here.
    c.goto(&server.url("/connect")).await.unwrap();
    let warned = eventually("the no-sign-in note", || async {
        let note = c.find(Locator::Id("no-sign-in")).await.ok()?;
        note.is_displayed()
            .await
            .ok()?
            .then_some(note.text().await.ok()?)
    })
    .await;
    assert!(warned.contains("approve its own changes"), "{warned}");

    // The client's last change (the approved cancellation) can be undone from this page: it
    // says what the undo would put back, asks, and undoes exactly that.
    let undo = eventually("the undo button", || async {
        c.find(Locator::XPath("//button[text()='Undo its last change']"))
            .await
            .ok()
    })
    .await;
    undo.click().await.unwrap();
    let asked = eventually("the question", || async { c.get_alert_text().await.ok() }).await;
    assert!(
        asked.contains("put the event \u{201c}Spring Open\u{201d} back as it was (published"),
        "{asked}"
    );
    c.accept_alert().await.unwrap();
    let said = eventually("the undo's answer", || async {
        let said = text_of(&c, "#problem").await?;
        said.starts_with("Undone").then_some(said)
    })
    .await;
    assert!(said.contains("reverted"), "{said}");
    assert_eq!(status().await, "published", "the event is back");
}
