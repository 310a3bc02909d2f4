//! The turn inspector over HTTP (`/admin/inspect`): an admin sees each turn of their own
//! conversation as the model saw it — the prompt version, the context block, each request's
//! new messages, the tool call and its result, what the user was shown, tokens, cost and
//! latency — read from the stored transcripts; a signed-in user without the admin role gets
//! 404 for all of it, and an admin gets 404 for another user's conversation (and for one that
//! does not exist). On SQLite and on DynamoDB (moto). Without sign-in, it follows the budget
//! page: hidden without `BRIDLE_ADMIN_TOKEN`, 401 without the bearer token.

mod inspect_site;

use backend::{Reply, ScriptedModel};
use bridle::AppOptions;
use inspect_site::{MODEL, Site, alice_and_bob, site};
use reqwest::StatusCode;
use serde_json::Value;
use std::sync::Arc;
use store::Store;
use tests::server::TestServer;

async fn admin_sees_turns_and_others_get_404(s: Site) {
    let (a, conv_a, b, conv_b) = alice_and_bob(&s).await;

    // The picker lists alice's own conversations only.
    let list: Value = s
        .get(&a, "/admin/inspect/conversations")
        .await
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [conv_a.as_str()]);

    let res = s
        .get(&a, &format!("/admin/inspect/conversations/{conv_a}"))
        .await;
    assert_eq!(res.status(), StatusCode::OK);
    let conv: Value = res.json().await.unwrap();
    assert_eq!(conv["channel"], "web");
    assert_eq!(conv["prompt_version"], engine::PROMPT_VERSION);
    let turns = conv["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "{conv:#}");
    let turn = &turns[0];
    assert_eq!(turn["number"], 1);
    let context = turn["user"]["context"].as_str().unwrap();
    assert!(context.starts_with("now: "), "{context}");
    assert!(context.contains("on web\n"), "{context}");
    assert_eq!(turn["user"]["words"], inspect_site::ALICE_SAYS);

    // Two requests: the first added the user's message, the second the tool's result.
    let requests = turn["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2);
    let first = &requests[0];
    assert_eq!(first["new_messages"][0]["role"], "user");
    assert_eq!(first["reply"]["parts"][0]["type"], "tool_use");
    assert_eq!(first["call"]["model"], MODEL);
    assert_eq!(first["call"]["stop_reason"], "tool_use");
    assert_eq!(first["call"]["usage"]["input_tokens"], 1200);
    assert_eq!(first["call"]["usage"]["cache_read_tokens"], 3000);
    assert!(first["call"]["cost_micros"].as_u64().unwrap() > 0);
    assert!(first["call"]["latency_ms"].is_u64());
    let offered = first["call"]["tools_offered"].as_array().unwrap();
    assert!(offered.iter().any(|t| t == "create_event"), "{offered:?}");
    let second = &requests[1];
    assert_eq!(second["new_messages"][0]["role"], "tool");
    assert_eq!(second["new_messages"][0]["parts"][0]["type"], "tool_result");
    assert_eq!(second["call"]["stop_reason"], "end_turn");

    // The cost is the price table's, as `bridle eval` computes it.
    let prices = budget::PriceTable::defaults();
    let usage: transcript::Usage = serde_json::from_value(first["call"]["usage"].clone()).unwrap();
    assert_eq!(
        first["call"]["cost_micros"].as_u64().unwrap(),
        prices.cost(MODEL, &usage)
    );
    assert_eq!(turn["totals"]["usage"]["input_tokens"], 2700);
    assert_eq!(turn["totals"]["requests"], 2);
    assert_eq!(conv["totals"]["cost_micros"], turn["totals"]["cost_micros"]);

    let call = &turn["tool_calls"][0];
    assert_eq!(call["id"], "tu-1");
    assert_eq!(call["name"], "create_event");
    assert_eq!(call["input"]["title"], "Spring Open");
    assert!(!call["result"].is_null(), "{call}");
    assert_eq!(call["is_error"], false);

    // What the user saw: their words and the reply, as delivered.
    let shown = turn["shown"].as_array().unwrap();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert_eq!(shown[0]["role"], "user");
    assert_eq!(shown[1]["role"], "assistant");
    assert_eq!(shown[1]["text"], "Created Spring Open, a draft for now.");

    // An admin still reads only their own: bob's conversation is as absent as a made-up one.
    for id in [conv_b.as_str(), "no-such-conversation"] {
        let res = s
            .get(&a, &format!("/admin/inspect/conversations/{id}"))
            .await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{id}");
        let body = res.text().await.unwrap();
        assert!(!body.contains("secret"), "{body}");
    }

    // Bob has no admin role: the inspector does not exist for him, not even for his own.
    for path in [
        "/admin/inspect".to_owned(),
        "/admin/inspect.js".to_owned(),
        "/admin/inspect/conversations".to_owned(),
        format!("/admin/inspect/conversations/{conv_b}"),
        format!("/admin/inspect/conversations/{conv_a}"),
    ] {
        let res = s.get(&b, &path).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND, "{path}");
        let body = res.text().await.unwrap();
        assert!(
            !body.contains("Spring Open") && !body.contains("secret"),
            "{body}"
        );
    }

    // The page is alice's to open; signed out, nothing is.
    let page = s.get(&a, "/admin/inspect").await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("Turn inspector"));
    let anonymous = s
        .http
        .get(s.url("/admin/inspect/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn admin_sees_turns_and_others_get_404_on_sqlite() {
    admin_sees_turns_and_others_get_404(site(None).await).await;
}

#[tokio::test]
async fn admin_sees_turns_and_others_get_404_on_dynamodb() {
    let store: Arc<dyn Store> = tests::moto::dynamo_store("inspect").await;
    admin_sees_turns_and_others_get_404(site(Some(store)).await).await;
}

async fn local(admin_token: Option<&str>) -> TestServer {
    TestServer::start(
        Arc::new(ScriptedModel::new([Reply::text("Hello.")])),
        AppOptions {
            admin_token: admin_token.map(str::to_owned),
            ..AppOptions::default()
        },
    )
    .await
}

#[tokio::test]
async fn without_sign_in_it_takes_the_admin_token_like_the_budget_page() {
    let get = |s: &TestServer, path: &str, bearer: Option<&str>| {
        let mut req = s.client.get(s.url(path));
        if let Some(t) = bearer {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap() }
    };
    let open = local(None).await;
    for path in ["/admin/inspect", "/admin/inspect/conversations"] {
        assert_eq!(get(&open, path, Some("x")).await.status(), 404, "{path}");
    }
    open.stop().await;

    let s = local(Some("adm1n")).await;
    let conv = s.new_conversation().await;
    s.say(&conv, "hi").await;
    // The page holds no data: it opens, and asks for the token.
    assert_eq!(get(&s, "/admin/inspect", None).await.status(), 200);
    let path = format!("/admin/inspect/conversations/{conv}");
    for bearer in [None, Some("adm1"), Some("wrong")] {
        let res = get(&s, &path, bearer).await;
        assert_eq!(res.status(), 401, "{bearer:?}");
        let body: Value = res.json().await.unwrap();
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("Authorization: Bearer")
        );
    }
    let res = get(&s, &path, Some("adm1n")).await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["turns"][0]["user"]["words"], "hi");
    assert_eq!(body["turns"][0]["shown"][1]["text"], "Hello.");
    s.stop().await;
}
