//! The web chat holds a long conversation (issue 19, point 5), in a real browser (headless
//! Chromium through ChromeDriver): with 60 messages the message list is what scrolls — the page
//! never does, the sidebar, notes and composer stay in the window — at desktop and phone widths;
//! new tokens are followed unless the user scrolled up; a failure sentence keeps its style after
//! a reload; a tool the model asked for before its answer failed ends as "not run".
//! Screenshots go to target/test-artifacts/.

use backend::{BackendError, Reply, ScriptedModel};
use bridle::AppOptions;
use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::{VisibleEntry, VisibleRole};
use tests::browser::{browser, eventually, phone_browser, send_message, start_driver, text_of};
use tests::server::TestServer;
use transcript::{ConversationId, StopReason};

const MESSAGES: u64 = 60;

/// A conversation with `MESSAGES` entries, user and assistant in turn, some of them long.
async fn long_conversation(server: &TestServer) -> String {
    let id = server.new_conversation().await;
    let conv_id = ConversationId::from(id.as_str());
    for position in 0..MESSAGES {
        let turn = position / 2 + 1;
        let (role, text) = if position % 2 == 0 {
            (
                VisibleRole::User,
                format!("Question {turn}: what about the venue?"),
            )
        } else {
            let body = "The venue holds two hundred people and opens at nine. ".repeat(3);
            (VisibleRole::Assistant, format!("Answer {turn}. {body}"))
        };
        let entry = VisibleEntry {
            conversation_id: conv_id.clone(),
            position,
            role,
            text,
            buttons: Vec::new(),
            reaction: None,
            turn,
            created_at_ms: 1_700_000_000_000 + position as i64,
        };
        server.app.store.append_visible(&entry).await.unwrap();
    }
    // The stored conversation has had those turns, so the next reply is recorded as new.
    let mut conv = server
        .app
        .store
        .conversation(&conv_id)
        .await
        .unwrap()
        .unwrap();
    conv.turn = MESSAGES / 2;
    server.app.store.update_conversation(&conv).await.unwrap();
    id
}

/// Where things are, read in the page: the window, whether the page itself can scroll, the
/// boxes of the sidebar, the notes, the composer and the message list, and the list's scroll.
const MEASURE: &str = r##"
const box = (sel) => {
  const el = document.querySelector(sel);
  const r = el.getBoundingClientRect();
  return { top: r.top, bottom: r.bottom, left: r.left, right: r.right,
           shown: getComputedStyle(el).display !== "none" && r.width > 0 && r.height > 0 };
};
const m = document.querySelector("#messages");
return {
  width: innerWidth, height: innerHeight,
  page_scroll_height: document.scrollingElement.scrollHeight,
  page_scroll_y: scrollY,
  sidebar: box("#sidebar"), notes: box("#notes-panel"), composer: box("#composer"),
  list: box("#messages"),
  list_scroll_height: m.scrollHeight, list_client_height: m.clientHeight,
  list_scroll_top: m.scrollTop,
  jump_hidden: document.querySelector("#jump").hidden,
};
"##;

async fn measure(c: &Client) -> Value {
    c.execute(MEASURE, vec![]).await.unwrap()
}

fn assert_in_window(m: &Value, what: &str) {
    let b = &m[what];
    let (w, h) = (m["width"].as_f64().unwrap(), m["height"].as_f64().unwrap());
    assert_eq!(b["shown"], true, "{what} is shown: {m}");
    assert!(
        b["top"].as_f64().unwrap() >= 0.0
            && b["left"].as_f64().unwrap() >= 0.0
            && b["bottom"].as_f64().unwrap() <= h
            && b["right"].as_f64().unwrap() <= w,
        "{what} within the {w}×{h} window: {m}"
    );
}

fn list_at_bottom(m: &Value) -> bool {
    let (sh, ch, top) = (
        m["list_scroll_height"].as_f64().unwrap(),
        m["list_client_height"].as_f64().unwrap(),
        m["list_scroll_top"].as_f64().unwrap(),
    );
    sh - top - ch <= 2.0
}

/// The page does not scroll, the message list does and shows the newest message, and `boxes`
/// are in the window.
fn assert_fixed_layout(m: &Value, boxes: &[&str]) {
    for b in boxes {
        assert_in_window(m, b);
    }
    assert!(
        m["page_scroll_height"].as_f64().unwrap() <= m["height"].as_f64().unwrap(),
        "the page itself does not scroll: {m}"
    );
    assert!(
        m["list_scroll_height"].as_f64().unwrap() > m["list_client_height"].as_f64().unwrap(),
        "the message list is what scrolls: {m}"
    );
    assert!(list_at_bottom(m), "the list shows the newest message: {m}");
}

fn save_screenshot(png: &[u8], name: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), png).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
}

/// Open the conversation and wait for its history.
async fn open(c: &Client, server: &TestServer, id: &str) {
    c.goto(&format!("{}/#{id}", server.base)).await.unwrap();
    eventually("the 60 messages", || async {
        let n = c.find_all(Locator::Css("#messages .msg")).await.ok()?.len();
        (n as u64 == MESSAGES).then_some(())
    })
    .await;
}

/// A reply of `lines` lines, one every 50 ms, so the bubble grows while it streams.
fn growing(lines: u32) -> Reply {
    let mut reply = Reply::new();
    for n in 1..=lines {
        reply = reply
            .say(&format!("line {n}\n"))
            .then_wait(Duration::from_millis(50));
    }
    reply.say("the end").stop(StopReason::EndTurn)
}

async fn streamed_has(c: &Client, text: &str) -> Option<()> {
    let t = text_of(c, ".msg.assistant.streaming").await?;
    t.contains(text).then_some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_messages_scroll_inside_the_list_at_desktop_and_phone_widths() {
    let model = ScriptedModel::new([growing(60)]);
    let server = TestServer::start(Arc::new(model), AppOptions::default()).await;
    let id = long_conversation(&server).await;
    let driver = start_driver().await;

    // Phone width: the sidebar is a bar on top, the notes open over the chat.
    let profile = driver.temp("layout-phone");
    let c = phone_browser(&driver, &profile, (390, 844)).await;
    open(&c, &server, &id).await;
    let m = measure(&c).await;
    assert_eq!(
        (m["width"].as_f64(), m["height"].as_f64()),
        (Some(390.0), Some(844.0)),
        "{m}"
    );
    assert_fixed_layout(&m, &["sidebar", "composer", "list"]);
    // Scrolling the window moves nothing: only the list scrolls.
    c.execute("window.scrollTo(0, 100000);", vec![])
        .await
        .unwrap();
    let after = measure(&c).await;
    assert_eq!(after["page_scroll_y"], 0, "{after}");
    assert_eq!(after["composer"], m["composer"]);
    save_screenshot(&c.screenshot().await.unwrap(), "web-chat-long-phone.png");
    c.find(Locator::Id("show-notes"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let with_notes = measure(&c).await;
    assert_in_window(&with_notes, "notes");
    assert_fixed_layout(&with_notes, &["sidebar", "composer"]);
    c.find(Locator::Id("show-chats"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let link = c
        .find(Locator::Css("#conversations a.active"))
        .await
        .unwrap();
    assert!(
        link.is_displayed().await.unwrap(),
        "the chats open on a phone"
    );
    save_screenshot(
        &c.screenshot().await.unwrap(),
        "web-chat-long-phone-chats.png",
    );
    c.close().await.unwrap();

    // Desktop width: sidebar, list and notes side by side, each in the window.
    let profile = driver.temp("layout-desk");
    let c = browser(&driver, &profile, (1280, 800)).await;
    open(&c, &server, &id).await;
    let m = measure(&c).await;
    assert!(
        m["width"].as_f64().unwrap() > 900.0,
        "a desktop window: {m}"
    );
    assert_fixed_layout(&m, &["sidebar", "notes", "composer", "list"]);
    save_screenshot(&c.screenshot().await.unwrap(), "web-chat-long-desktop.png");

    // A new answer streams in: the list follows it while the user stays at the bottom.
    send_message(&c, "Tell me more, line by line").await;
    eventually("line 5", || streamed_has(&c, "line 5\n")).await;
    let early = measure(&c).await;
    eventually("line 15", || streamed_has(&c, "line 15\n")).await;
    let later = measure(&c).await;
    assert!(
        later["list_scroll_height"].as_f64() > early["list_scroll_height"].as_f64(),
        "the answer grew: {early} then {later}"
    );
    assert!(list_at_bottom(&later), "followed the new tokens: {later}");
    assert_fixed_layout(&later, &["sidebar", "notes", "composer"]);

    // The user scrolls up to read: the list stays where they put it, and offers a way back.
    c.execute("document.querySelector('#messages').scrollTop = 0;", vec![])
        .await
        .unwrap();
    eventually("the jump-to-latest button", || async {
        c.find(Locator::Css("#jump:not([hidden])")).await.ok()
    })
    .await;
    eventually("line 30", || streamed_has(&c, "line 30\n")).await;
    let reading = measure(&c).await;
    assert_eq!(reading["list_scroll_top"], 0, "not pulled down: {reading}");
    assert_eq!(reading["jump_hidden"], false);
    c.find(Locator::Id("jump"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let back = measure(&c).await;
    assert!(list_at_bottom(&back), "jumped to the latest: {back}");
    assert_eq!(back["jump_hidden"], true);
    eventually("the whole answer", || async {
        let all = c
            .find_all(Locator::Css(".msg.assistant:not(.streaming)"))
            .await
            .ok()?;
        let last = all.last()?.text().await.ok()?;
        last.ends_with("the end").then_some(())
    })
    .await;
    let end = measure(&c).await;
    assert_fixed_layout(&end, &["sidebar", "notes", "composer"]);
    save_screenshot(
        &c.screenshot().await.unwrap(),
        "web-chat-long-desktop-streamed.png",
    );

    c.close().await.unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_answer_keeps_its_error_style_after_reload_and_its_tool_ends_not_run() {
    // The model says a few words and asks for a tool, then its stream breaks.
    let model = ScriptedModel::new([Reply::new()
        .say("Let me write that down. ")
        .call("t1", "add_note", json!({"text": "Call the venue"}))
        .then_fail(BackendError::Overloaded)]);
    let server = TestServer::start(Arc::new(model), AppOptions::default()).await;
    let driver = start_driver().await;
    let profile = driver.temp("layout-err");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();
    send_message(&c, "Note: call the venue").await;

    let live = eventually("the error sentence", || async {
        text_of(&c, ".msg.assistant .error").await
    })
    .await;
    assert_eq!(live, engine::lines::OVERLOADED);
    eventually("the tool chip to end as not run", || async {
        c.find(Locator::Css(
            ".tool[data-tool='add_note'][data-state='not_run']",
        ))
        .await
        .ok()
    })
    .await;
    // The words above the chip are not repeated below it.
    let mut bubbles = Vec::new();
    for b in c.find_all(Locator::Css(".msg.assistant")).await.unwrap() {
        bubbles.push(b.text().await.unwrap().trim().to_owned());
    }
    assert_eq!(
        bubbles,
        ["Let me write that down.", engine::lines::OVERLOADED],
        "live"
    );
    save_screenshot(&c.screenshot().await.unwrap(), "web-chat-error-live.png");

    c.refresh().await.unwrap();
    let restored = eventually("the error after the reload", || async {
        text_of(&c, ".msg.assistant .error").await
    })
    .await;
    assert_eq!(restored, engine::lines::OVERLOADED);
    let bubble = text_of(&c, ".msg.assistant").await.unwrap();
    assert!(
        bubble.starts_with("Let me write that down.")
            && bubble.ends_with(engine::lines::OVERLOADED),
        "{bubble}"
    );
    let color = c
        .execute(
            "return getComputedStyle(document.querySelector('.msg.assistant .error')).color;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(color, "rgb(224, 49, 49)", "the error colour (--err)");
    save_screenshot(
        &c.screenshot().await.unwrap(),
        "web-chat-error-reloaded.png",
    );

    c.close().await.unwrap();
    server.stop().await;
}

/// Every `tool_use` the stream shows is answered before `error` / `done`, by a `tool_result` or
/// a `tool_not_run` (a plain HTTP client reading the server's events).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_use_in_the_stream_is_answered_before_it_ends() {
    let model = ScriptedModel::new([
        // Asked for, then the stream broke.
        Reply::new()
            .call("a1", "add_note", json!({"text": "one"}))
            .then_fail(BackendError::Overloaded),
        // Asked for in an answer cut off at the output limit: not run.
        Reply::new()
            .say("Noting ")
            .call("b1", "add_note", json!({"text": "two"}))
            .stop(StopReason::MaxTokens),
        // Asked for and run.
        Reply::tool_call("c1", "add_note", json!({"text": "three"})),
        Reply::text("Noted."),
    ]);
    let server = TestServer::start(Arc::new(model), AppOptions::default()).await;
    let id = server.new_conversation().await;
    for (call, answered) in [
        ("a1", "tool_not_run"),
        ("b1", "tool_not_run"),
        ("c1", "tool_result"),
    ] {
        let events = server.say(&id, "please note").await;
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let asked = events
            .iter()
            .position(|(n, d)| n == "tool_use" && d["id"] == call)
            .unwrap_or_else(|| panic!("{call} shown: {names:?}"));
        let answer = events
            .iter()
            .position(|(n, d)| n == answered && d["id"] == call)
            .unwrap_or_else(|| panic!("{call} answered with {answered}: {names:?}"));
        let end = events
            .iter()
            .position(|(n, _)| n == "error" || n == "done")
            .unwrap();
        assert!(asked < answer && answer < end, "{names:?}");
        assert_eq!(events.last().unwrap().0, "done", "{names:?}");
    }
    server.stop().await;
}

/// A stream cut off after a `tool_use` (no `tool_result`, no `done`): the chip stops spinning
/// and the person is told in one sentence. The browser's `fetch` is replaced for the message
/// post only, by a response that ends early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_off_after_a_tool_use_leaves_no_tool_running() {
    let server = TestServer::start(Arc::new(ScriptedModel::new([])), AppOptions::default()).await;
    let driver = start_driver().await;
    let profile = driver.temp("layout-cut");
    let c = browser(&driver, &profile, (1280, 800)).await;
    c.goto(&server.base).await.unwrap();
    eventually("the page's script", || async {
        c.find(Locator::Css("#messages .empty")).await.ok()
    })
    .await;
    c.execute(
        r#"
        const real = window.fetch;
        window.fetch = (path, options) => {
          if (!(options && options.method === "POST" && String(path).endsWith("/messages"))) {
            return real(path, options);
          }
          const body = 'event: queued\ndata: {"message_id":"m"}\n\n' +
            'event: token\ndata: {"text":"Saving it. "}\n\n' +
            'event: tool_use\ndata: {"id":"t1","name":"add_note","input":{"text":"x"}}\n\n';
          return Promise.resolve(new Response(body, {
            status: 200, headers: { "Content-Type": "text/event-stream" },
          }));
        };
        "#,
        vec![],
    )
    .await
    .unwrap();
    send_message(&c, "note x").await;
    eventually("the chip to end as not run", || async {
        c.find(Locator::Css(
            ".tool[data-tool='add_note'][data-state='not_run']",
        ))
        .await
        .ok()
    })
    .await;
    let status = eventually("the status sentence", || async {
        text_of(&c, "#status").await.filter(|t| !t.is_empty())
    })
    .await;
    assert_eq!(
        status,
        "The connection dropped before the answer finished. Reload to see it."
    );
    assert!(
        c.find(Locator::Css(".msg.assistant.streaming"))
            .await
            .is_err(),
        "nothing is left streaming"
    );
    c.close().await.unwrap();
    server.stop().await;
}
