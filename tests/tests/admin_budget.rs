//! The budget over HTTP: `/admin/budget` (404 without a token configured, 401 with a wrong
//! one, the page with its chart with the right one), `/api/usage` (the meter shows only near a
//! limit), and both rendered in headless Chromium.

use backend::{ChatRequest, ScriptedModel};
use bridle::AppOptions;
use bridle::guards::GuardOptions;
use budget::config::Cap;
use budget::{BudgetConfig, BudgetGuard, Source};
use engine::{Guard, GuardCall};
use fantoccini::Locator;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use store::BudgetLedger;
use tests::browser::{browser, start_driver};
use tests::server::TestServer;
use transcript::{Conversation, Usage};

const TOKEN: &str = "adm1n-t0ken";

fn config() -> BudgetConfig {
    BudgetConfig {
        user_tokens_per_minute: Cap {
            limit: Some(10_000),
            source: Source::Env("BRIDLE_CAP_USER_TOKENS_PER_MINUTE".into()),
        },
        output_allowance: 0,
        ..BudgetConfig::default()
    }
}

async fn server(admin_token: Option<&str>) -> TestServer {
    let config = Arc::new(config());
    TestServer::start(
        Arc::new(ScriptedModel::new([])),
        AppOptions {
            guards: GuardOptions {
                budget: config,
                // Mid-minute, fixed: a window never rolls over during a test.
                clock: Arc::new(|| 1_800_000_030_000),
                ..GuardOptions::default()
            },
            admin_token: admin_token.map(str::to_owned),
            ..AppOptions::default()
        },
    )
    .await
}

/// Spend through the real budget guard on the server's own store: `tokens` for the local user
/// (in conversation `conv`) and some for another user.
async fn spend(s: &TestServer, conv: &str, tokens: u64) {
    let ledger: Arc<dyn BudgetLedger> = s.app.store.clone();
    let guard = BudgetGuard::new(ledger, s.app.budget.clone(), s.app.clock.clone());
    let request = ChatRequest {
        model: "anthropic.claude-3-5-haiku-20241022-v1:0".into(),
        system: String::new(),
        messages: vec![],
        tools: Default::default(),
        settings: Default::default(),
    };
    for (user, conv, input) in [("local", conv, tokens), ("dana", "c-dana", 2_000)] {
        let conv = Conversation::new(conv, user, "web", "chat");
        let permit = guard
            .before_model_call(&GuardCall {
                conversation: &conv,
                call_number: 1,
                request: &request,
                account: None,
            })
            .await
            .unwrap();
        let usage = Usage {
            input_tokens: input,
            output_tokens: input / 10,
            ..Usage::default()
        };
        guard.after_model_call(&conv, permit, &usage).await;
    }
}

async fn get(s: &TestServer, path: &str, bearer: Option<&str>) -> (u16, String) {
    let mut req = s.client.get(s.url(path));
    if let Some(t) = bearer {
        req = req.bearer_auth(t);
    }
    let res = req.send().await.unwrap();
    (res.status().as_u16(), res.text().await.unwrap())
}

#[tokio::test]
async fn the_admin_page_is_hidden_without_a_token_and_locked_with_one() {
    let open = server(None).await;
    assert_eq!(get(&open, "/admin/budget", None).await.0, 404);
    assert_eq!(get(&open, "/admin/budget", Some("anything")).await.0, 404);
    open.stop().await;

    let s = server(Some(TOKEN)).await;
    spend(&s, "c-local", 5_000).await;
    assert_eq!(get(&s, "/admin/budget", None).await.0, 401);
    let (status, body) = get(&s, "/admin/budget", Some("adm1n-t0ke")).await;
    assert_eq!(status, 401);
    assert!(!body.contains(TOKEN) && !body.contains("<svg"));
    assert_eq!(get(&s, "/admin/budget?token=wrong", None).await.0, 401);
    let (status, body) = get(&s, "/admin/budget", Some(TOKEN)).await;
    assert_eq!(status, 200);
    assert!(body.contains("id=\"spend-chart\""), "{body}");
    assert!(body.contains("c-local") && body.contains("dana"));
    assert!(body.contains("env BRIDLE_CAP_USER_TOKENS_PER_MINUTE"));
    // The token is taken from the Authorization header only: in a URL it would end up in
    // history, logs and Referer headers.
    let (status, by_query) = get(&s, &format!("/admin/budget?token={TOKEN}"), None).await;
    assert_eq!(status, 401);
    assert!(!by_query.contains("<svg"));
    assert!(by_query.contains("Authorization: Bearer"), "{by_query}");
    s.stop().await;
}

#[tokio::test]
async fn the_usage_meter_shows_only_near_a_limit() {
    let s = server(None).await;
    let usage = |s: &TestServer| {
        let url = s.url("/api/usage");
        let client = s.client.clone();
        async move {
            let res = client.get(url).send().await.unwrap();
            assert_eq!(res.status(), 200);
            res.json::<Value>().await.unwrap()
        }
    };
    spend(&s, "c-1", 5_000).await; // 5,500 of 10,000 tokens this minute
    let u = usage(&s).await;
    assert_eq!(u["show"], false, "{u}");
    spend(&s, "c-1", 2_800).await; // 8,580: over 80%
    let u = usage(&s).await;
    assert_eq!(u["show"], true, "{u}");
    let minute = u["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["bucket"] == "user_tokens_minute")
        .unwrap();
    assert!((minute["fraction"].as_f64().unwrap() - 0.858).abs() < 1e-9);
    // Everyone's dollars are the operator's: not shown to a user until full.
    assert!(
        u["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["bucket"] != "global_usd_30d"),
        "{u}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_admin_page_and_the_meter_render_in_chromium() {
    let s = server(Some(TOKEN)).await;
    spend(&s, "c-local", 8_000).await; // 8,800 of 10,000: the meter shows
    let driver = start_driver().await;
    let profile = driver.temp("profile");
    let c = browser(&driver, &profile, (1100, 1000)).await;

    // A browser cannot be made to send the header, so the page (self-contained: no script, no
    // external resources) is fetched with it and opened from a file.
    let (status, html) = get(&s, "/admin/budget", Some(TOKEN)).await;
    assert_eq!(status, 200);
    let page = driver.temp("budget.html");
    std::fs::write(&page, html).unwrap();
    c.goto(&format!("file://{}", page.display())).await.unwrap();
    let chart = c.find(Locator::Css("#spend-chart")).await.unwrap();
    let png = c.screenshot().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("admin-budget.png"), &png).unwrap();
    assert!(png.starts_with(b"\x89PNG"));

    assert!(chart.is_displayed().await.unwrap(), "the chart is visible");
    let size: Value = c
        .execute(
            "const r = document.querySelector('#spend-chart').getBoundingClientRect(); return [r.width, r.height];",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        size[0].as_f64().unwrap() > 300.0 && size[1].as_f64().unwrap() > 100.0,
        "{size}"
    );
    let bars = c
        .find_all(Locator::Css("#spend-chart g.bar"))
        .await
        .unwrap();
    // Global dollars, the strangers' dollars, and 3 buckets for each of two users.
    assert_eq!(bars.len(), 8);
    let local_minute = c
        .find(Locator::Css(
            "#spend-chart g.bar[data-subject='local'][data-bucket='user_tokens_minute'] rect.fill",
        ))
        .await
        .unwrap();
    let html = local_minute.html(false).await.unwrap();
    assert_eq!(
        local_minute.attr("fill").await.unwrap().as_deref(),
        Some("#e3a008"),
        "88%: amber; {html}"
    );

    // The web chat shows the meter, because a bucket is over 80%.
    c.goto(&s.base).await.unwrap();
    let mut shown = false;
    for _ in 0..100 {
        if let Ok(row) = c
            .find(Locator::Css(
                "#usage-meter .meter-row[data-bucket='user_tokens_minute']",
            ))
            .await
        {
            shown = row.is_displayed().await.unwrap_or(false);
            if shown {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(shown, "the usage meter appears near the limit");
    let text = c
        .find(Locator::Css("#usage-meter"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("this minute") && text.contains("88%"),
        "{text}"
    );

    c.close().await.unwrap();
    s.stop().await;
}
