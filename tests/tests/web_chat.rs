//! The web chat in a real browser: headless Chromium, driven through ChromeDriver (Debian's
//! `chromium` and `chromium-driver`; `.ci/run` installs them).

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use fantoccini::Locator;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tests::browser::{
    browser, eventually, send_message, shown_messages, shown_when_last_is, start_driver, text_of,
};
use tests::server::TestServer;
use transcript::StopReason;

fn slow(text: &str) -> Reply {
    let mut reply = Reply::new();
    for word in text.split_inclusive(' ') {
        reply = reply.say(word).then_wait(Duration::from_millis(60));
    }
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_chats_sees_streaming_and_tools_and_history_survives_reload() {
    let model = ScriptedModel::new([
        slow("Sure, I will write that down for you right away.")
            .call(
                "t1",
                "add_note",
                json!({"text": "Call the venue on Monday"}),
            )
            .stop(StopReason::ToolUse),
        slow("Done. Your note says: Call the venue on Monday.").stop(StopReason::EndTurn),
    ]);
    let server = TestServer::start(Arc::new(model), AppOptions::default()).await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium");
    let c = browser(&driver, &profile, (1280, 800)).await;

    c.goto(&server.base).await.unwrap();
    send_message(&c, "Please note: call the venue on Monday").await;

    // Tokens appear while the answer is still streaming.
    let partial = eventually("streamed text", || async {
        let t = text_of(&c, ".msg.assistant.streaming").await?;
        (!t.is_empty()).then_some(t)
    })
    .await;
    assert!(
        "Sure, I will write that down for you right away.".starts_with(partial.trim_end()),
        "partial text {partial:?}"
    );
    assert!(
        partial.trim_end().len() < 49,
        "seen before the stream ended: {partial:?}"
    );

    // The tool call is rendered and turns green when it succeeds; the notes panel refreshes.
    eventually("the add_note chip to succeed", || async {
        text_of(&c, ".tool[data-tool='add_note'][data-state='ok']").await
    })
    .await;
    eventually("the note in the panel", || async {
        let t = text_of(&c, "#notes li").await?;
        (t == "Call the venue on Monday").then_some(())
    })
    .await;
    let final_text = eventually("the final answer", || async {
        let all = c
            .find_all(Locator::Css(".msg.assistant:not(.streaming)"))
            .await
            .ok()?;
        let last = all.last()?.text().await.ok()?;
        last.contains("Your note says").then_some(last)
    })
    .await;
    assert_eq!(
        final_text,
        "Done. Your note says: Call the venue on Monday."
    );

    // Keep a screenshot as a test artifact.
    let png = c.screenshot().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("web-chat.png"), &png).unwrap();
    assert!(png.starts_with(b"\x89PNG"));

    // After a reload, the history comes back from the visible transcript.
    c.refresh().await.unwrap();
    let history = eventually("the restored history", || async {
        let msgs = c.find_all(Locator::Css("#messages .msg")).await.ok()?;
        let mut out = Vec::new();
        for m in msgs {
            out.push((m.attr("class").await.ok()??, m.text().await.ok()?));
        }
        (out.len() == 2).then_some(out)
    })
    .await;
    assert_eq!(
        history[0],
        (
            "msg user".into(),
            "Please note: call the venue on Monday".into()
        )
    );
    assert_eq!(history[1].0, "msg assistant");
    assert_eq!(
        history[1].1,
        "Sure, I will write that down for you right away.\n\nDone. Your note says: Call the venue on Monday."
    );
    let sidebar = text_of(&c, "#conversations a.active").await.unwrap();
    assert_eq!(sidebar, "Please note: call the venue on Monday");

    c.close().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_gets_a_link_code_with_open_the_chat_links() {
    let channels = tests::server::channels_from(&[
        (
            "TELEGRAM_SECRET_TOKEN",
            "tg-secret-0123456789abcdef-0123456",
        ),
        ("TELEGRAM_BOT_TOKEN", "123456:ABC-def"),
        ("TELEGRAM_BOT_USERNAME", "bridlebot"),
        ("SLACK_SIGNING_SECRET", "s"),
        ("SLACK_BOT_TOKEN", "xoxb-1"),
    ]);
    let server = TestServer::start(
        Arc::new(ScriptedModel::new([])),
        AppOptions {
            channels,
            ..AppOptions::default()
        },
    )
    .await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium-link");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();
    c.find(Locator::Id("link-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let shown = eventually("the link code", || async {
        let t = text_of(&c, "#link-result .link-code").await?;
        (!t.is_empty()).then_some(t)
    })
    .await;
    let code = channels::link_code::canonical(&shown).expect("a code is shown");
    let telegram = c
        .find(Locator::Css("#link-result a[href^='https://t.me/']"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(telegram, format!("https://t.me/bridlebot?start={code}"));
    let slack = text_of(&c, "#link-result li:nth-child(2)").await.unwrap();
    assert!(slack.contains(&shown), "{slack}");
    // The code shown is live for the signed-in user.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert_eq!(
        server
            .app
            .store
            .consume_link_code(&code, "telegram#42", now)
            .await
            .unwrap(),
        Some("local".into())
    );
    c.close().await.unwrap();
    server.stop().await;
}

/// A message the server turns away (here: longer than the limit) is not shown as sent: the
/// page says why, the text stays in the box to shorten, and nothing reaches the model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_the_server_refuses_stays_in_the_box_and_is_not_shown_as_sent() {
    let model = Arc::new(ScriptedModel::new([Reply::text("Noted.")]));
    let server = TestServer::start(
        model.clone(),
        AppOptions {
            max_message_chars: 20,
            ..AppOptions::default()
        },
    )
    .await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium-refused");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();

    let long = "Please remember the venue's door code";
    send_message(&c, long).await;
    let status = eventually("the refusal", || async {
        let t = text_of(&c, "#status").await?;
        (!t.is_empty()).then_some(t)
    })
    .await;
    assert_eq!(
        status,
        format!(
            "The message is {} characters long; the limit is 20.",
            long.len()
        )
    );
    let input = c.find(Locator::Id("input")).await.unwrap();
    assert_eq!(input.prop("value").await.unwrap().as_deref(), Some(long));
    assert!(
        c.find_all(Locator::Css("#messages .msg"))
            .await
            .unwrap()
            .is_empty(),
        "nothing is shown as sent"
    );

    input.clear().await.unwrap();
    send_message(&c, "Door code 4711").await;
    let history = shown_when_last_is(&c, "Noted.").await;
    assert_eq!(history, ["Door code 4711", "Noted."]);
    assert_eq!(
        model.requests().len(),
        1,
        "the refused message reached no model"
    );
    c.close().await.unwrap();
    server.stop().await;
}

/// A link whose fragment is not a conversation ("#../link-code?", which a page elsewhere can
/// send someone) opens none, and the next message goes to a new conversation of the sender's,
/// not to the address the fragment would make of its path (here it would mint a link code).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crafted_fragment_in_the_address_turns_no_message_into_another_request() {
    let model = Arc::new(ScriptedModel::new([Reply::text("Noted.")]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium-fragment");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&format!("{}/#../link-code?", server.base))
        .await
        .unwrap();
    send_message(&c, "Door code 4711").await;
    let history = shown_when_last_is(&c, "Noted.").await;
    assert_eq!(history, ["Door code 4711", "Noted."]);
    let fragment = c
        .execute("return location.hash", vec![])
        .await
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        uuid::Uuid::parse_str(fragment.trim_start_matches('#')).is_ok(),
        "a new conversation of the sender's: {fragment}"
    );
    assert_eq!(model.requests().len(), 1);
    c.close().await.unwrap();
    server.stop().await;
}

/// A long conversation opens on its newest page; "Show earlier messages" puts the page before
/// it above, until the first message; a new message still lands at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_conversation_opens_on_its_newest_page_and_shows_earlier_ones_on_asking() {
    let model = Arc::new(ScriptedModel::new([Reply::text("Noted.")]));
    let server = TestServer::start(model, AppOptions::default()).await;
    let id = server.new_conversation().await;
    server.seed_history(&id, 130).await;
    let driver = start_driver().await;
    let profile = driver.temp("chromium-pages");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&format!("{}/#{id}", server.base)).await.unwrap();

    let shown = eventually("the newest page", || async {
        shown_messages(&c).await.filter(|t| t.len() == 100)
    })
    .await;
    assert_eq!(
        (shown[0].as_str(), shown[99].as_str()),
        ("entry 30", "entry 129")
    );
    c.find(Locator::Css("#messages button.earlier"))
        .await
        .expect("a way to the earlier messages")
        .click()
        .await
        .unwrap();
    let shown = eventually("the earlier page above", || async {
        shown_messages(&c).await.filter(|t| t.len() == 130)
    })
    .await;
    assert_eq!(shown[0], "entry 0");
    assert_eq!(shown[129], "entry 129");
    assert!(
        c.find(Locator::Css("#messages button.earlier"))
            .await
            .is_err(),
        "nothing comes before the first message"
    );

    send_message(&c, "And now?").await;
    let shown = eventually("the answer at the end", || async {
        shown_messages(&c)
            .await
            .filter(|t| t.last().map(String::as_str) == Some("Noted."))
    })
    .await;
    assert_eq!(shown.len(), 132);
    assert_eq!(shown[130], "And now?");
    c.close().await.unwrap();
    server.stop().await;
}

/// The sidebar lists the newest 50 conversations; "Older conversations" adds the rest, and
/// they stay listed when the list is read again after a turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidebar_shows_the_newest_conversations_and_older_ones_on_asking() {
    let model = Arc::new(ScriptedModel::new([Reply::text("Hello.")]));
    let server = TestServer::start(model, AppOptions::default()).await;
    for _ in 0..53 {
        server.new_conversation().await;
    }
    let driver = start_driver().await;
    let profile = driver.temp("chromium-sidebar");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();
    let listed = || async {
        let links = c.find_all(Locator::Css("#conversations a")).await.ok()?;
        Some(links.len())
    };
    eventually("the newest page", || async {
        listed().await.filter(|n| *n == 50)
    })
    .await;
    // The page opens the newest conversation once the list is in, and that draws the list
    // again (with it marked): wait for it, so the click is not on a list about to be replaced.
    eventually("the newest conversation opened", || async {
        c.find(Locator::Css("#conversations a.active")).await.ok()
    })
    .await;
    eventually("a way to the older conversations, clicked", || async {
        c.find(Locator::Css("#conversations button.older"))
            .await
            .ok()?
            .click()
            .await
            .ok()
    })
    .await;
    eventually("all of them", || async {
        listed().await.filter(|n| *n == 53)
    })
    .await;
    assert!(
        c.find(Locator::Css("#conversations button.older"))
            .await
            .is_err(),
        "none older than the last"
    );
    send_message(&c, "Hi").await;
    shown_when_last_is(&c, "Hello.").await;
    let preview = eventually("the list read again", || async {
        text_of(&c, "#conversations a.active")
            .await
            .filter(|t| t == "Hi")
    })
    .await;
    assert_eq!(preview, "Hi");
    assert_eq!(listed().await, Some(53), "the older ones stay listed");
    c.close().await.unwrap();
    server.stop().await;
}

/// "Older conversations" pressed while the list is being drawn again (a turn ended, a
/// conversation opened): the older page stays, in its place at the end, whichever answer comes
/// first.
#[tokio::test]
async fn older_conversations_pressed_while_the_list_is_drawn_again_stay_listed() {
    let model = Arc::new(ScriptedModel::new([Reply::text("Hello.")]));
    let server = TestServer::start(model, AppOptions::default()).await;
    for _ in 0..53 {
        server.new_conversation().await;
    }
    // The API's order (newest first; made in the same millisecond, by id).
    let all: Vec<serde_json::Value> = server
        .client
        .get(server.url("/api/conversations?limit=200"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let made: Vec<String> = all
        .iter()
        .map(|c| c["id"].as_str().unwrap().into())
        .collect();
    assert_eq!(made.len(), 53);
    let driver = start_driver().await;
    let profile = driver.temp("chromium-sidebar-race");
    let c = browser(&driver, &profile, (1280, 800)).await;
    // Both orders of starting the two: the press before the drawing, and after it.
    let races = [
        "document.querySelector('#conversations button.older').click(); loadConversations();",
        "loadConversations(); document.querySelector('#conversations button.older').click();",
    ];
    for race in races {
        c.goto(&server.base).await.unwrap();
        eventually("the newest conversation opened", || async {
            c.find(Locator::Css("#conversations a.active")).await.ok()
        })
        .await;
        c.execute(race, vec![]).await.unwrap();
        let listed = eventually("all of them listed", || async {
            let mut ids = Vec::new();
            for a in c.find_all(Locator::Css("#conversations a")).await.ok()? {
                ids.push(a.attr("data-id").await.ok()??);
            }
            (ids.len() >= 53).then_some(ids)
        })
        .await;
        assert_eq!(listed, made, "{race}: each once, newest first");
        assert!(
            c.find(Locator::Css("#conversations button.older"))
                .await
                .is_err(),
            "{race}: no way to older ones left in the list"
        );
    }
    c.close().await.unwrap();
    server.stop().await;
}
