//! MCP as a plain client sends it, for the tests of the approval page: one `tools/call` with a
//! bearer token, and the page's API behind an approval URL.

use serde_json::{Value, json};

/// One `tools/call` to `mcp_url` with `token` (protocol 2025-06-18: no elicitation); the
/// result object. Panics unless the answer is 200.
pub async fn tools_call(
    http: &reqwest::Client,
    mcp_url: &str,
    token: &str,
    tool: &str,
    arguments: Value,
) -> Value {
    let res = http
        .post(mcp_url)
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    res.json::<Value>().await.unwrap()["result"].clone()
}

/// The page's address a tool result's sentence gives (a client that cannot open pages).
pub fn approval_page_in(result: &Value) -> String {
    let said = result["content"][0]["text"].as_str().unwrap_or_default();
    said.split_whitespace()
        .find(|w| w.contains("/approve?token="))
        .unwrap_or_else(|| panic!("the page's address in {said:?}"))
        .to_owned()
}

/// The path of the approval API behind an approval page's address
/// (`…/approve?token=T&call=C` → `/api/mcp-approvals/T/C`).
pub fn approval_api_path(page: &str) -> String {
    let query = page.split_once('?').expect("a query").1;
    let pairs: std::collections::HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    format!("/api/mcp-approvals/{}/{}", pairs["token"], pairs["call"])
}
