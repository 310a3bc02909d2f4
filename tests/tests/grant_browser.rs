//! The web chat's "What the assistant may do" control in a real browser (headless Chromium
//! through ChromeDriver): it shows the person's grant, choosing "read" stores it, and the
//! assistant's next write in the chat is refused with the readable sentence while the tools it
//! is offered stay the same.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use fantoccini::Locator;
use serde_json::json;
use std::sync::Arc;
use tests::browser::{browser, eventually, send_message, start_driver, text_of};
use tests::server::TestServer;
use transcript::{Grant, Part, Role, UserId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn choosing_read_in_the_page_stops_the_next_write() {
    let model = Arc::new(ScriptedModel::new([]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let store = server.app.store.clone();
    let local = UserId::from("local");

    let driver = start_driver().await;
    let profile = driver.temp("grant");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();
    let shown = eventually("the grant control", || async {
        let select = c.find(Locator::Id("grant-choice")).await.ok()?;
        let enabled = select.is_enabled().await.ok()?;
        let value = select.prop("value").await.ok()??;
        enabled.then_some(value)
    })
    .await;
    assert_eq!(shown, "risky", "the default is shown");

    c.find(Locator::Id("grant-choice"))
        .await
        .unwrap()
        .select_by_value("read")
        .await
        .unwrap();
    let said = eventually("the saved note", || async {
        let said = text_of(&c, "#grant-said").await?;
        said.starts_with("Saved").then_some(said)
    })
    .await;
    assert_eq!(said, "Saved: the assistant may only read.");
    let account = store.account(&local).await.unwrap().unwrap();
    assert_eq!(account.assistant_grant, Grant::Read);

    model.push(Reply::tool_call(
        "c1",
        "create_event",
        json!({"title": "Spring Open", "starts_at": "2025-04-12T10:00", "venue": "Court 1", "capacity": 10}),
    ));
    model.push(Reply::text(
        "Your settings let me only read, so I added nothing.",
    ));
    send_message(&c, "add Spring Open").await;
    eventually("the relayed refusal", || async {
        let all = c
            .find_all(Locator::Css(".msg.assistant:not(.streaming)"))
            .await
            .ok()?;
        let last = all.last()?.text().await.ok()?;
        last.contains("only read").then_some(())
    })
    .await;

    let conversations = store.conversations_of(&local).await.unwrap();
    let messages = store.messages(&conversations[0].id, 0).await.unwrap();
    let result = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            Part::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .expect("the call's result");
    assert_eq!(result["error"], tools::not_allowed(Grant::Read));
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        serde_json::to_vec(&requests[0].tools).unwrap(),
        serde_json::to_vec(&requests[1].tools).unwrap(),
        "the same tools before and after the refusal"
    );
    assert!(
        requests[0].tools.iter().any(|t| t.name == "create_event"),
        "the write tool is still offered under read"
    );
}
