//! The web chat's "Timetable" panel in a real browser (headless Chromium through
//! ChromeDriver): the scripted model creates an event and makes its program by tool calls; the
//! grid appears without a reload, each session in its room's column at its time's row, the
//! break across both rooms, the markup title shown as text (no element, no alert); a
//! `move_session` moves the session on the page. Screenshots are kept as test artifacts.

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use fantoccini::{Client, Locator};
use serde_json::{Value, json};
use std::sync::Arc;
use tests::browser::{browser, eventually, send_message, start_driver, text_of};
use tests::program_script::{XSS_TITLE, build_program, create_event, move_session};
use tests::server::TestServer;
use transcript::UserId;

/// Send `text` in the chat and wait for the assistant's answer `answer`.
async fn say(c: &Client, text: &str, answer: &str) {
    send_message(c, text).await;
    eventually(&format!("the answer {answer:?}"), || async {
        let all = c
            .find_all(Locator::Css(".msg.assistant:not(.streaming)"))
            .await
            .ok()?;
        let last = all.last()?.text().await.ok()?;
        (last == answer).then_some(())
    })
    .await;
}

/// Where day `day`'s room headers, sessions and breaks are on the page.
async fn layout(c: &Client, day: u32) -> Value {
    c.execute(
        r#"
        const day = document.querySelector(`#timetable .tt-day[data-day="${arguments[0]}"]`);
        if (!day) return null;
        const box = (n) => { const b = n.getBoundingClientRect();
            return { left: b.left, right: b.right, top: b.top, bottom: b.bottom }; };
        const rooms = {};
        day.querySelectorAll(".tt-room").forEach((h) => { rooms[h.dataset.room] = box(h); });
        const sessions = {};
        day.querySelectorAll(".tt-session").forEach((s) => {
            sessions[s.querySelector(".tt-title").textContent] =
                { room: s.dataset.room, start: s.dataset.start, id: s.dataset.sessionId, ...box(s) };
        });
        const breaks = {};
        day.querySelectorAll(".tt-break").forEach((b) => {
            breaks[b.querySelector(".tt-title").textContent] = box(b);
        });
        return { rooms, sessions, breaks };
        "#,
        vec![json!(day)],
    )
    .await
    .unwrap()
}

fn f(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} of {v}"))
}

/// `a` and `b` are within a pixel of each other.
fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1.0
}

/// The session sits in its room's column.
fn in_column(grid: &Value, title: &str, room: &str) -> bool {
    let (s, r) = (&grid["sessions"][title], &grid["rooms"][room]);
    near(f(s, "left"), f(r, "left")) && near(f(s, "right"), f(r, "right"))
}

fn save_screenshot(png: &[u8], name: &str) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), png).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_timetable_grid_follows_the_assistants_planning_without_a_reload() {
    let model = Arc::new(ScriptedModel::new([]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let driver = start_driver().await;
    let profile = driver.temp("timetable");
    let c = browser(&driver, &profile, (1400, 900)).await;
    c.goto(&server.base).await.unwrap();
    eventually("the empty timetable panel", || async {
        (text_of(&c, "#timetable").await? == "No events yet.").then_some(())
    })
    .await;
    c.find(Locator::Id("timetable-wide"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // Set on this page only: still there at the end means the page was never reloaded.
    c.execute("window.sameTimetablePage = true;", vec![])
        .await
        .unwrap();

    model.push(create_event("Rust Summit"));
    model.push(Reply::text("Created Rust Summit."));
    say(&c, "Create the Rust Summit", "Created Rust Summit.").await;
    eventually("the new event in the panel", || async {
        let said = text_of(&c, "#timetable").await?;
        said.contains("No program yet").then_some(())
    })
    .await;
    let events = server
        .app
        .store
        .records_of(&UserId::from("local"), planner::EVENT)
        .await
        .unwrap();
    let event = events[0].id.clone();

    model.push(build_program(&event));
    model.push(Reply::text("The timetable is built."));
    say(&c, "Plan its program", "The timetable is built.").await;
    let day1 = eventually("day 1's grid with its three sessions", || async {
        let grid = layout(&c, 1).await;
        (grid["sessions"].as_object()?.len() == 3).then_some(grid)
    })
    .await;

    // Columns: each session under its room's header.
    assert!(in_column(&day1, "Keynote", "Main Hall"), "{day1}");
    assert!(in_column(&day1, XSS_TITLE, "Room B"), "{day1}");
    assert!(
        in_column(&day1, "Rust in Production", "Main Hall"),
        "{day1}"
    );
    let (main, room_b) = (&day1["rooms"]["Main Hall"], &day1["rooms"]["Room B"]);
    assert!(
        f(main, "right") <= f(room_b, "left"),
        "Main Hall, then Room B: {day1}"
    );
    // Rows: both 09:00 sessions start on one line, below the headers; lengths follow minutes.
    let keynote = &day1["sessions"]["Keynote"];
    let markup = &day1["sessions"][XSS_TITLE];
    let rust = &day1["sessions"]["Rust in Production"];
    let coffee = &day1["breaks"]["Coffee"];
    assert!(near(f(keynote, "top"), f(markup, "top")), "{day1}");
    assert!(f(keynote, "top") >= f(main, "bottom") - 1.0, "{day1}");
    let per_minute = (f(keynote, "bottom") - f(keynote, "top")) / 60.0;
    assert!(per_minute > 0.5, "{day1}");
    let minutes = |from: &Value, to: &Value| (f(to, "top") - f(from, "top")) / per_minute;
    assert!(
        (minutes(keynote, rust) - 120.0).abs() < 3.0,
        "11:00 is two hours after 09:00: {day1}"
    );
    assert!(
        (minutes(keynote, coffee) - 90.0).abs() < 3.0,
        "the break at 10:30: {day1}"
    );
    assert!(
        ((f(markup, "bottom") - f(markup, "top")) / per_minute - 45.0).abs() < 3.0,
        "45 minutes long: {day1}"
    );
    // The break runs across both rooms.
    assert!(near(f(coffee, "left"), f(main, "left")), "{day1}");
    assert!(near(f(coffee, "right"), f(room_b, "right")), "{day1}");
    // Day 2 is its own grid.
    let day2 = layout(&c, 2).await;
    assert_eq!(
        day2["sessions"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        vec!["Workshop"]
    );
    assert!(in_column(&day2, "Workshop", "Room B"), "{day2}");

    // The markup title is text: no image element, no alert, the title shown as written.
    let images = c
        .find_all(Locator::Css("#timetable img"))
        .await
        .unwrap()
        .len();
    assert_eq!(images, 0);
    assert!(c.get_alert_text().await.is_err(), "no alert is open");
    let shown = c
        .find(Locator::Css(&format!(
            "#timetable .tt-session[data-session-id=\"{}\"] .tt-title",
            markup["id"].as_str().unwrap()
        )))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(shown, XSS_TITLE);
    save_screenshot(&c.screenshot().await.unwrap(), "timetable-built.png");

    // The assistant moves "Rust in Production" to 11:30 in Room B: the grid follows.
    let rust_id = rust["id"].as_str().unwrap().to_owned();
    model.push(move_session(&event, &rust_id, "11:30", "Room B"));
    model.push(Reply::text("Moved it."));
    say(
        &c,
        "Move Rust in Production to 11:30 in Room B",
        "Moved it.",
    )
    .await;
    let moved = eventually("the moved session", || async {
        let grid = layout(&c, 1).await;
        let s = &grid["sessions"]["Rust in Production"];
        (s["room"] == "Room B" && s["start"] == "11:30").then_some(grid)
    })
    .await;
    assert!(in_column(&moved, "Rust in Production", "Room B"), "{moved}");
    let keynote = &moved["sessions"]["Keynote"];
    let rust = &moved["sessions"]["Rust in Production"];
    assert!(
        (minutes(keynote, rust) - 150.0).abs() < 3.0,
        "11:30: {moved}"
    );
    assert!(
        in_column(&moved, "Keynote", "Main Hall"),
        "the rest stays: {moved}"
    );
    let same_page = c
        .execute("return window.sameTimetablePage === true;", vec![])
        .await
        .unwrap();
    assert_eq!(same_page, json!(true), "the page was never reloaded");
    save_screenshot(&c.screenshot().await.unwrap(), "timetable-moved.png");

    c.close().await.unwrap();
}
