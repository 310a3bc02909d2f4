//! MCP on the web function: the real bootstrap (`src/main.rs`) under a local Lambda Runtime API
//! with a Function URL in front (`fake_lambda`), DynamoDB and Secrets Manager in moto, sign-in
//! settings from the secret as deployed. A token stored in the table opens `/mcp` through the
//! Function URL: initialize, tools/list, a read call and a write call as the token's user, an
//! unknown method answered with a JSON-RPC error; no token, 401 with `WWW-Authenticate`. Each
//! request stands alone (no session), as Lambda instances need.

use bridle::admin_cli::tokens::issue_token;
use fake_bedrock::{FakeBedrock, Scenario};
use fake_lambda::{Bootstrap, RuntimeApi, moto_endpoint as moto, moto_secret};
use serde_json::{Value, json};
use std::process::Command;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use store::{Account, Accounts, Records, TokenScope};
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
    let name = unique("web-mcp");
    store_dynamodb::create_table(&client, &name).await.unwrap();
    (Arc::new(DynamoStore::new(client, name.clone())), name)
}

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
    let (store, table) = store().await;
    store
        .put_account(&Account::new("ada", "Ada"))
        .await
        .unwrap();
    let (_, token) = issue_token(
        store.as_ref(),
        &"ada".into(),
        "web test",
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
        .env("RUST_LOG", "warn");
    let _running = Bootstrap::spawn(cmd).unwrap();
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
    let audit = store.audit_log(&"ada".into()).await.unwrap();
    assert_eq!(audit[0].actor, store::ActorKind::Mcp);

    let unknown = rpc(&http, &url, Some(&token), "no/such/method", json!({})).await;
    assert!(unknown.status().as_u16() < 500);
    let unknown: Value = unknown.json().await.unwrap();
    assert!(unknown["error"]["code"].is_i64(), "{unknown}");
}
