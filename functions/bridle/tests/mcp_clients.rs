//! The real `bridle serve` binary as an MCP server for the official clients: tokens made with
//! `bridle tokens` on its database, then the official Python SDK client (PyPI `mcp`) and the
//! official TypeScript SDK client (npm `@modelcontextprotocol/sdk`) connect to `/mcp`, list the
//! tools, call a read tool and a write tool, and get a readable validation error. Both clients
//! are pinned in `tests/mcp-clients/` and installed there by `scripts/test`. Also: an unknown
//! JSON-RPC method is a JSON-RPC error, GET and DELETE on `/mcp` are 405 at once (stateless:
//! POST only), and a revoked token is refused at once.

#[path = "support/mcp_clients.rs"]
mod clients;

use clients::{check_client_saw, clients_dir, python, run_client};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

struct Server {
    child: Child,
    base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory for one test's database, removed when dropped (pass or fail). Bind it
/// before the server that uses it, so the server is killed before it goes.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("bridle-mcp-{name}-"))
        .tempdir()
        .unwrap()
}

/// `bridle serve` on a free loopback port, no sign-in (the local user), data in `dir`.
fn serve(dir: &Path) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bridle"))
        .arg("serve")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("BRIDLE_ADDR", "127.0.0.1:0")
        .env("BRIDLE_DB", dir.join("bridle.db"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the bridle binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = lines
        .next()
        .expect("the server says where it listens")
        .unwrap();
    let base = line
        .split("Open ")
        .nth(1)
        .and_then(|rest| rest.split('/').nth(2))
        .map(|host| format!("http://{host}"))
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    std::thread::spawn(move || for _ in lines {});
    Server { child, base }
}

/// `bridle tokens …` on the server's database: exit code, stdout, stderr.
fn tokens_cli(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bridle"))
        .arg("tokens")
        .args(args)
        .arg("--db")
        .arg(dir.join("bridle.db"))
        .env_remove("TABLE_NAME")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[tokio::test]
async fn the_official_python_and_typescript_clients_use_bridle_serve() {
    let dir = temp_dir("clients");
    let server = serve(dir.path());
    let url = format!("{}/mcp", server.base);

    let (code, stdout, stderr) = tokens_cli(
        dir.path(),
        &["create", "local", "--scope", "write", "--name", "interop"],
    );
    assert_eq!(code, 0, "{stderr}");
    let token = stdout.lines().last().unwrap().to_owned();
    assert!(
        token.starts_with("brd_"),
        "the token alone on the last line: {stdout}"
    );

    let python = python();
    check_client_saw(
        &run_client(&python, "client.py", &url, &token),
        "Python Open",
    );
    check_client_saw(
        &run_client(Path::new("node"), "client.mjs", &url, &token),
        "Node Open",
    );

    // Both clients' events are the local user's.
    let (code, stdout, _) = tokens_cli(dir.path(), &["list", "local", "--json"]);
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listed[0]["name"], "interop");
    assert_eq!(listed[0]["scope"], "write");
    assert!(listed[0]["last_used_ms"].is_i64(), "{listed}");
    assert!(!stdout.contains(&token), "a listing never shows the token");

    // An unknown method: a JSON-RPC error, not a hang or a 500.
    let http = reqwest::Client::new();
    let unknown = http
        .post(&url)
        .bearer_auth(&token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "frobnicate/everything", "params": {}}))
        .send()
        .await
        .unwrap();
    assert!(unknown.status().as_u16() < 500);
    let body: Value = unknown.json().await.unwrap();
    assert!(body["error"]["code"].is_i64(), "{body}");

    // Stateless, POST only: the server-to-client stream a client may open with GET, and a
    // session's DELETE, are refused at once with 405, never held open.
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let answer = quick
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

    // A risky call through the Python client, which sends its human to Bridle's page (URL-mode
    // elicitation): declined, nothing runs; accepted by the client without the page's approval
    // (a script answering its own question), nothing runs; approved on the page, it runs.
    let (code, stdout, stderr) = tokens_cli(dir.path(), &["create", "local", "--scope", "risky"]);
    assert_eq!(code, 0, "{stderr}");
    let risky = stdout.lines().last().unwrap().to_owned();
    let call = |name: &str, arguments: Value| {
        http.post(&url)
            .bearer_auth(&risky)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": name, "arguments": arguments}}))
            .send()
    };
    let published = |title: &'static str, starts_at: &'static str| async move {
        let made: Value = call(
            "create_event",
            json!({"title": title, "starts_at": starts_at, "venue": "Court 1", "capacity": 40}),
        )
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        let id = made["result"]["structuredContent"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        call("publish_event", json!({"event_id": id}))
            .await
            .unwrap();
        id
    };
    let event = published("Spring Open", "2030-04-12T10:00").await;
    let ask_on = |event: &str, answer: &str| {
        let out = Command::new(&python)
            .arg(clients_dir().join("elicit.py"))
            .args([url.as_str(), risky.as_str(), event, answer])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let ask = |answer: &str| ask_on(&event, answer);
    let declined = ask("decline");
    let question = &declined["asked"][0];
    assert_eq!(question["mode"], "url", "{declined}");
    assert!(
        question["message"]
            .as_str()
            .unwrap()
            .contains("Cancel Spring Open"),
        "{declined}"
    );
    assert!(
        question["url"]
            .as_str()
            .unwrap()
            .contains("/approve?token="),
        "{declined}"
    );
    assert_eq!(declined["is_error"], true, "{declined}");
    let status_of = |id: String| async move {
        let listed: Value = call("list_events", json!({}))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let items = listed["result"]["structuredContent"]["items"]
            .as_array()
            .unwrap()
            .clone();
        items
            .into_iter()
            .find(|e| e["id"] == id.as_str())
            .map(|e| e["status"].clone())
            .unwrap()
    };
    assert_eq!(
        status_of(event.clone()).await,
        "published",
        "declined: not run"
    );
    let self_accepted = ask("self");
    assert_eq!(self_accepted["is_error"], true, "{self_accepted}");
    assert!(
        self_accepted["text"]
            .as_str()
            .unwrap()
            .contains("has not been approved"),
        "{self_accepted}"
    );
    assert_eq!(
        status_of(event.clone()).await,
        "published",
        "the client's own accept: not run"
    );
    let approved = ask("approve");
    assert_eq!(approved["is_error"], false, "{approved}");
    assert_eq!(
        status_of(event.clone()).await,
        "cancelled",
        "approved on the page: run"
    );

    // A client that accepted before its owner approved: once approved on the page (its API,
    // as its script calls it), the same call made again runs, without asking.
    let second = published("Summer Open", "2030-07-12T10:00").await;
    let early = ask_on(&second, "self");
    assert_eq!(early["is_error"], true, "{early}");
    let page = early["asked"][0]["url"].as_str().unwrap().to_owned();
    let query = page.split_once('?').unwrap().1;
    let ids: std::collections::HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    let api = format!(
        "{}/api/mcp-approvals/{}/{}",
        url.trim_end_matches("/mcp"),
        ids["token"],
        ids["call"]
    );
    let shown: Value = http.get(&api).send().await.unwrap().json().await.unwrap();
    assert!(
        shown["description"]
            .as_str()
            .unwrap()
            .contains("Summer Open"),
        "{shown}"
    );
    let approved = http
        .post(&api)
        .json(&json!({"approve": true, "description": shown["description"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(approved.status().as_u16(), 200);
    assert_eq!(status_of(second.clone()).await, "published");
    let again = ask_on(&second, "self");
    assert_eq!(again["is_error"], false, "{again}");
    assert_eq!(again["asked"], json!([]), "{again}");
    assert_eq!(status_of(second).await, "cancelled");

    // Revoked with the CLI: refused at once.
    let id = listed[0]["id"].as_str().unwrap();
    let (code, stdout, _) = tokens_cli(dir.path(), &["revoke", id]);
    assert_eq!(code, 0);
    assert!(stdout.contains("Revoked"), "{stdout}");
    let refused = http
        .post(&url)
        .bearer_auth(&token)
        .json(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    assert!(refused.headers().contains_key("www-authenticate"));
}

#[test]
fn tokens_cli_json_and_refusals() {
    let dir = temp_dir("cli");
    // The database exists once the server has started.
    drop(serve(dir.path()));
    let (code, stdout, stderr) = tokens_cli(
        dir.path(),
        &[
            "create",
            "local",
            "--scope",
            "read",
            "--expires",
            "12h",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let made: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(made["id"].as_str().unwrap().starts_with("tok_"));
    assert!(made["token"].as_str().unwrap().starts_with("brd_"));
    assert_eq!(made["scope"], "read");
    assert!(made["expires_at_ms"].is_i64());

    let (code, _, stderr) = tokens_cli(dir.path(), &["create", "nobody", "--scope", "read"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("No account has the id \"nobody\""),
        "{stderr}"
    );
    let (code, _, stderr) = tokens_cli(
        dir.path(),
        &["create", "local", "--scope", "read", "--expires", "soon"],
    );
    assert_eq!(code, 1);
    assert!(stderr.contains("--expires"), "{stderr}");
    let (code, _, stderr) = tokens_cli(dir.path(), &["revoke", "tok_nope"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("No token has the id"), "{stderr}");
    let (code, _, _) = tokens_cli(dir.path(), &["create", "local", "--scope", "admin"]);
    assert_eq!(code, 2, "clap refuses an unknown scope");
}
