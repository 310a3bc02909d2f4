//! The turn inspector in headless Chromium: an admin signs in (the steerable test issuer),
//! opens `/admin/inspect`, and sees their conversation's turn — the context block, the tool
//! call and its result, tokens and cost — with stored text shown as text, never as markup.
//! Screenshot: `target/test-artifacts/inspector.png`.

mod inspect_site;

use fantoccini::Locator;
use inspect_site::{ALICE_SAYS, alice, alice_and_bob, site};
use tests::browser::{browser, eventually, start_driver, text_of};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_inspects_a_turn_in_chromium() {
    let s = site(None).await;
    let (_, conv_a, _, conv_b) = alice_and_bob(&s).await;

    let driver = start_driver().await;
    let profile = driver.temp("inspect");
    let c = browser(&driver, &profile, (1280, 2400)).await;
    // Signing in: the app sends the browser to the issuer, which signs alice in at once.
    s.issuer.sign_in_as(alice());
    c.goto(&s.url("/")).await.unwrap();
    eventually("the signed-in chat", || async {
        text_of(&c, "#who-name")
            .await
            .filter(|t| t.contains("alice@example.com"))
    })
    .await;

    c.goto(&s.url("/admin/inspect")).await.unwrap();
    let listed = eventually("the conversation picker", || async {
        let buttons = c
            .find_all(Locator::Css("nav button.conversation"))
            .await
            .ok()?;
        (!buttons.is_empty()).then_some(buttons)
    })
    .await;
    assert_eq!(listed.len(), 1, "only alice's own conversation is listed");
    let id = listed[0].attr("data-id").await.unwrap();
    assert_eq!(id.as_deref(), Some(conv_a.as_str()));
    assert_ne!(id.as_deref(), Some(conv_b.as_str()));

    let context = eventually("the context block", || async {
        text_of(&c, ".turn .context").await
    })
    .await;
    assert!(context.starts_with("now: "), "{context}");
    assert!(context.contains("on web"), "{context}");
    let words = text_of(&c, ".turn .words").await.unwrap();
    assert_eq!(words, ALICE_SAYS);
    let injected = c.find_all(Locator::Css("#detail img")).await.unwrap();
    assert!(injected.is_empty(), "stored text never becomes markup");

    let tool = text_of(&c, ".turn .tool-call .tool-name").await.unwrap();
    assert_eq!(tool, "create_event (tu-1)");
    let input = text_of(&c, ".turn .tool-call .tool-input").await.unwrap();
    assert!(input.contains("Spring Open"), "{input}");
    let result = text_of(&c, ".turn .tool-call .tool-result").await.unwrap();
    assert!(
        !result.is_empty() && result != "(no result stored)",
        "{result}"
    );

    let tokens = text_of(&c, ".turn .totals .tokens").await.unwrap();
    assert_eq!(tokens, "2700 in · 52 out · 6000 cache read · 0 cache write");
    let cost = text_of(&c, ".turn .totals .cost").await.unwrap();
    assert!(cost.starts_with('$') && cost != "$0.000000", "{cost}");
    let requests = c.find_all(Locator::Css(".turn .request")).await.unwrap();
    assert_eq!(requests.len(), 2);
    let latency = text_of(&c, ".turn .request .latency").await.unwrap();
    assert!(latency.ends_with(" ms"), "{latency}");
    let shown = text_of(&c, ".turn .shown.assistant .shown-text")
        .await
        .unwrap();
    assert_eq!(shown, "Created Spring Open, a draft for now.");

    let png = c.screenshot().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("inspector.png"), &png).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
    c.close().await.unwrap();
}
