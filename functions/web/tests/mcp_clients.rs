//! The official MCP clients against the web function: the real bootstrap (`src/main.rs`) under
//! a local Lambda Runtime API with a Function URL in front (`fake_lambda`), DynamoDB and Secrets
//! Manager in moto. A token stored in the table; then the official Python SDK client (PyPI
//! `mcp`) and the official TypeScript SDK client (npm `@modelcontextprotocol/sdk`) connect to
//! `/mcp` through the Function URL, list the tools, call a read tool and a write tool, and get
//! a readable validation error — each request one invocation, as on Lambda. GET and DELETE on
//! `/mcp` are refused at once with 405, so no client holds an invocation open.

#[path = "../../bridle/tests/support/mcp_clients.rs"]
mod clients;

use bridle::admin_cli::tokens::issue_token;
use clients::{check_client_saw, python, run_client};
use fake_bedrock::{FakeBedrock, Scenario};
use fake_lambda::{Bootstrap, RuntimeApi, moto_endpoint as moto, moto_secret};
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{Account, Accounts, TokenScope};
use store_dynamodb::DynamoStore;
use tests::fake_issuer::FakeIssuer;

const CLIENT: &str = "bridle-web";

fn unique(prefix: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{now}", std::process::id())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn store() -> (Arc<DynamoStore>, String) {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    let client = aws_sdk_dynamodb::Client::new(&config);
    let name = unique("web-mcp-clients");
    store_dynamodb::create_table(&client, &name).await.unwrap();
    (Arc::new(DynamoStore::new(client, name.clone())), name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_clients_use_the_web_function() {
    let (store, table) = store().await;
    store
        .put_account(&Account::new("ada", "Ada"))
        .await
        .unwrap();
    let (_, token) = issue_token(
        store.as_ref(),
        &"ada".into(),
        "interop",
        TokenScope::Write,
        None,
        now_ms(),
    )
    .await
    .unwrap();
    let bedrock = FakeBedrock::start(Vec::<Scenario>::new()).await.unwrap();
    let issuer = FakeIssuer::start(CLIENT).await;
    let api = RuntimeApi::start([]).await.unwrap();
    let base = api.function_url().await.unwrap();
    let secret = moto_secret(
        &unique("web-secret"),
        &json!({
            "BRIDLE_OIDC_ISSUER": issuer.issuer,
            "BRIDLE_OIDC_CLIENT_ID": CLIENT,
            "BRIDLE_OIDC_CLIENT_SECRET": "web-client-secret",
            "BRIDLE_PUBLIC_URL": format!("{base}/"),
        }),
    )
    .await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_web"));
    cmd.env_clear()
        .envs(api.lambda_env("web"))
        .env("AWS_ENDPOINT_URL", moto())
        .env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.endpoint())
        .env("TABLE_NAME", &table)
        .env(
            "BEDROCK_MODEL_ID",
            "anthropic.claude-3-5-haiku-20241022-v1:0",
        )
        .env("BRIDLE_SECRETS_ARN", &secret)
        .env("RUST_LOG", "info");
    let running = Bootstrap::spawn(cmd).unwrap();
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
    let ran = running.stop();
    assert!(!ran.logs.contains(&token), "the token is never logged");
}
