//! MCP on the web function: the real bootstrap (`src/main.rs`) under a local Lambda Runtime API
//! with a Function URL in front (`fake_lambda`), DynamoDB and Secrets Manager in moto, sign-in
//! settings from the secret as deployed. A token stored in the table opens `/mcp` through the
//! Function URL: initialize, tools/list, a read call and a write call as the token's user, an
//! unknown method answered with a JSON-RPC error; no token, 401 with `WWW-Authenticate`. Each
//! request stands alone (no session), as Lambda instances need. A risky call runs once its
//! owner, signed in through the Function URL, approved it on the page.

mod ada;
mod signed_in;

use ada::Ada;
use reqwest::header::LOCATION;
use serde_json::{Value, json};
use signed_in::{Browser, header};
use store::Records;

async fn rpc(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    method: &str,
    params: Value,
) -> reqwest::Response {
    let mut request = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

#[tokio::test]
async fn a_token_opens_mcp_on_the_web_function() {
    let ada = Ada::start("web-mcp", "web test", "warn").await;
    let (base, token) = (ada.base.clone(), ada.token.clone());
    let http = reqwest::Client::new();
    let url = format!("{base}/mcp");

    let refused = rpc(&http, &url, None, "tools/list", json!({})).await;
    assert_eq!(refused.status().as_u16(), 401);
    assert_eq!(
        refused.headers()["www-authenticate"].to_str().unwrap(),
        "Bearer realm=\"bridle\""
    );

    let init = rpc(
        &http,
        &url,
        Some(&token),
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    )
    .await;
    assert_eq!(init.status().as_u16(), 200);
    let init: Value = init.json().await.unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "bridle", "{init}");

    let listed: Value = rpc(&http, &url, Some(&token), "tools/list", json!({}))
        .await
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"create_event") && !names.contains(&"focus_event"),
        "{listed}"
    );

    let created: Value = rpc(
        &http,
        &url,
        Some(&token),
        "tools/call",
        json!({"name": "create_event", "arguments": {"title": "Lambda Open", "starts_at": "2030-07-01T10:00", "venue": "Pier", "capacity": 5}}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(created["result"]["isError"], false, "{created}");
    let events: Value = rpc(
        &http,
        &url,
        Some(&token),
        "tools/call",
        json!({"name": "list_events", "arguments": {}}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        events["result"]["structuredContent"]["items"][0]["title"], "Lambda Open",
        "{events}"
    );
    let audit = ada.store.audit_log(&"ada".into()).await.unwrap();
    assert_eq!(audit[0].actor, store::ActorKind::Mcp);

    let unknown = rpc(&http, &url, Some(&token), "no/such/method", json!({})).await;
    assert!(unknown.status().as_u16() < 500);
    let unknown: Value = unknown.json().await.unwrap();
    assert!(unknown["error"]["code"].is_i64(), "{unknown}");
}

/// A person signs in through the Function URL, makes a risky-scope token on the page's API, and
/// their client's risky call waits for them: the page's address is the public one, a signed-out
/// browser is sent to sign in and back, and once approved on the page the same call runs.
#[tokio::test]
async fn a_risky_call_runs_once_its_owner_approved_it_through_the_function_url() {
    let ada = Ada::start("web-mcp-approve", "web test", "warn").await;
    let base = ada.base.clone();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let person = Browser::sign_in(http.clone(), &base, &ada.issuer).await;
    let made = person
        .post("/api/mcp-tokens")
        .json(&json!({"name": "Claude", "scope": "risky"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status().as_u16(), 201);
    let token = made.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let url = format!("{base}/mcp");
    let call = |tool: &'static str, arguments: Value| {
        let (http, url, token) = (http.clone(), url.clone(), token.clone());
        async move { tests::mcp_calls::tools_call(&http, &url, &token, tool, arguments).await }
    };
    let event = call(
        "create_event",
        json!({"title": "Lambda Open", "starts_at": "2030-04-12T10:00", "venue": "Court 1", "capacity": 40}),
    )
    .await;
    let id = event["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    call("publish_event", json!({"event_id": id})).await;

    let waits = call("cancel_event", json!({"event_id": id})).await;
    assert_eq!(waits["isError"], true, "{waits}");
    let page = tests::mcp_calls::approval_page_in(&waits);
    assert!(
        page.starts_with(&format!("{base}/approve?token=")),
        "{page}"
    );
    let signed_out = http.get(&page).send().await.unwrap();
    assert_eq!(signed_out.status().as_u16(), 303);
    assert!(
        header(&signed_out, LOCATION).starts_with("/auth/login?return_to=%2Fapprove%3Ftoken"),
        "{}",
        header(&signed_out, LOCATION)
    );

    let api = tests::mcp_calls::approval_api_path(&page);
    let shown: Value = person.get(&api).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        shown["description"],
        "Cancel Lambda Open (published, 2030-04-12T10:00 at Court 1, 0 registered)"
    );
    let approved = person
        .post(&api)
        .json(&json!({"approve": true, "description": shown["description"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status().as_u16(), 200);

    let ran = call("cancel_event", json!({"event_id": id})).await;
    assert_eq!(ran["isError"], false, "{ran}");
    let stored = ada.store.record("event", &id).await.unwrap().unwrap();
    assert_eq!(stored.value["status"], "cancelled");
}
