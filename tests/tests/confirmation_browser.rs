//! The web chat's confirmation buttons in a real browser (headless Chromium through
//! ChromeDriver): a held call's reply shows the server's "Yes, do it" / "No" as real buttons,
//! and clicking Yes runs the held call although the model never repeats it.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use fantoccini::Locator;
use planner::{Caller, NewEvent, Planner};
use serde_json::json;
use std::sync::Arc;
use store::Store;
use tests::browser::{browser, eventually, send_message, start_driver, text_of};
use tests::server::TestServer;
use transcript::{ConversationId, UserId};

/// The local user acting directly.
fn owner() -> Caller {
    Caller::from_ctx(&tools::Ctx {
        user_id: UserId::from("local"),
        actor: tools::Actor::User,
        action_id: tools::ActionId("setup".into()),
        conversation_id: ConversationId::from("setup"),
        call_key: None,
        grant: tools::Grant::default(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clicking_yes_runs_the_held_call() {
    let model = Arc::new(ScriptedModel::new([]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let store: Arc<dyn Store> = server.app.store.clone();
    let planner = Planner::new(store);
    let new_event = NewEvent {
        title: "Spring Open".into(),
        starts_at: "2025-04-12T10:00".into(),
        venue: "Court 1".into(),
        capacity: 10,
    };
    let event = planner.create_event(&owner(), new_event).await.unwrap();
    planner.publish_event(&owner(), &event.id).await.unwrap();
    let dana = planner
        .register_attendee(&owner(), &event.id, "Dana Lee", "d@example.com")
        .await
        .unwrap();
    // The model's own buttons lose to the server's.
    model.push(Reply::tool_call(
        "c1",
        "withdraw_attendee",
        json!({"attendee_id": dana.id}),
    ));
    model.push(Reply::text(
        "Withdraw Dana Lee from Spring Open? <buttons>Sure | Nope</buttons>",
    ));
    model.push(Reply::text("Done: Dana Lee is withdrawn."));

    let driver = start_driver().await;
    let profile = driver.temp("confirm");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();
    send_message(&c, "withdraw Dana").await;

    let titles = eventually("the confirmation buttons", || async {
        let buttons = c.find_all(Locator::Css(".choices .choice")).await.ok()?;
        let mut titles = Vec::new();
        for b in buttons {
            titles.push(b.text().await.ok()?);
        }
        (titles.len() == 2).then_some(titles)
    })
    .await;
    assert_eq!(titles, ["Yes, do it", "No"]);
    assert_eq!(
        planner
            .list_attendees(&owner(), &event.id)
            .await
            .unwrap()
            .len(),
        1,
        "held, not run"
    );

    c.find(Locator::Css(".choices .choice"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    eventually("the answer after the press", || async {
        let all = c
            .find_all(Locator::Css(".msg.assistant:not(.streaming)"))
            .await
            .ok()?;
        let last = all.last()?.text().await.ok()?;
        last.contains("Dana Lee is withdrawn").then_some(())
    })
    .await;
    let said = text_of(&c, "#messages .msg.user:last-of-type").await;
    assert!(
        planner
            .list_attendees(&owner(), &event.id)
            .await
            .unwrap()
            .is_empty(),
        "the click ran the held call (the user's words: {said:?})"
    );
    let asked = model.requests();
    let last_user: String = asked
        .last()
        .unwrap()
        .messages
        .last()
        .unwrap()
        .parts
        .iter()
        .filter_map(transcript::Part::as_text)
        .collect();
    assert!(
        last_user.contains("Yes, do it") && last_user.contains("the harness ran it"),
        "{last_user}"
    );

    c.close().await.unwrap();
    server.stop().await;
}
