//! MCP on the web function: the real bootstrap (`src/main.rs`) under a local Lambda Runtime API
//! with a Function URL in front (`fake_lambda`), DynamoDB and Secrets Manager in moto, sign-in
//! settings from the secret as deployed. A token stored in the table opens `/mcp` through the
//! Function URL: initialize, tools/list, a read call and a write call as the token's user, an
//! unknown method answered with a JSON-RPC error; no token, 401 with `WWW-Authenticate`. Each
//! request stands alone (no session), as Lambda instances need.

mod ada;

use ada::Ada;
use serde_json::{Value, json};
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
