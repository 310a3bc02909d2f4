//! The official MCP clients against the web function: the real bootstrap (`src/main.rs`) under
//! a local Lambda Runtime API with a Function URL in front (`fake_lambda`), DynamoDB and Secrets
//! Manager in moto. A token stored in the table; then the official Python SDK client (PyPI
//! `mcp`) and the official TypeScript SDK client (npm `@modelcontextprotocol/sdk`) connect to
//! `/mcp` through the Function URL, list the tools, call a read tool and a write tool, and get
//! a readable validation error — each request one invocation, as on Lambda. GET and DELETE on
//! `/mcp` are refused at once with 405, so no client holds an invocation open.

mod ada;
#[path = "../../bridle/tests/support/mcp_clients.rs"]
mod clients;

use ada::Ada;
use clients::{check_client_saw, python, run_client};
use std::path::Path;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_clients_use_the_web_function() {
    let ada = Ada::start("web-mcp-clients", "interop", "info").await;
    let (base, token) = (ada.base.clone(), ada.token.clone());
    let url = format!("{base}/mcp");

    // The clients block while they run; the Function URL and Runtime API are served by this
    // test's runtime, so the clients run on a blocking thread, never on a runtime thread.
    let (u, t) = (url.clone(), token.clone());
    let seen = tokio::task::spawn_blocking(move || run_client(&python(), "client.py", &u, &t))
        .await
        .unwrap();
    check_client_saw(&seen, "Python Open");
    let (u, t) = (url.clone(), token.clone());
    let seen =
        tokio::task::spawn_blocking(move || run_client(Path::new("node"), "client.mjs", &u, &t))
            .await
            .unwrap();
    check_client_saw(&seen, "Node Open");

    // No invocation is held open: the server-to-client stream a client may ask for with GET,
    // and a session's DELETE, are refused at once (stateless: POST only).
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let answer = http
            .request(method.clone(), &url)
            .bearer_auth(&token)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("mcp-session-id", "no-such-session")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} /mcp was not answered at once: {e}"));
        assert_eq!(answer.status().as_u16(), 405, "{method}");
        assert_eq!(answer.headers()["allow"], "POST", "{method}");
        answer.bytes().await.expect("the refusal's body ends");
    }
    let ran = ada.running.stop();
    assert!(!ran.logs.contains(&token), "the token is never logged");
}
