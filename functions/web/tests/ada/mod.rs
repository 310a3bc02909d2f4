//! The web function as Lambda runs it (its bootstrap under a Runtime API, DynamoDB and Secrets
//! Manager in moto, a fake Bedrock and a fake identity provider), with one account, Ada's, and
//! an MCP access token of hers: where the MCP tests start.

use bridle::admin_cli::tokens::issue_token;
use fake_bedrock::{FakeBedrock, Scenario};
use fake_lambda::{Bootstrap, RuntimeApi, moto_endpoint as moto, moto_secret};
use serde_json::json;
use std::process::Command;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use store::{Account, Accounts, TokenScope};
use store_dynamodb::DynamoStore;
use tests::fake_issuer::FakeIssuer;

const CLIENT: &str = "bridle-web";

/// The running function and what it runs against. The bootstrap is the first field, so it
/// stops before the servers it talks to go away.
#[allow(
    dead_code,
    reason = "each test binary that uses this module reads its own fields"
)]
pub struct Ada {
    pub running: Bootstrap,
    /// The Function URL's base.
    pub base: String,
    /// Ada's MCP access token (scope `write`).
    pub token: String,
    pub store: Arc<DynamoStore>,
    _api: RuntimeApi,
    _bedrock: FakeBedrock,
    /// The identity provider the function signs people in with.
    pub issuer: FakeIssuer,
}

fn unique(prefix: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{now}", std::process::id())
}

impl Ada {
    /// Start it: a fresh table named after `table_prefix`, Ada's token named `token_name`, the
    /// function logging at `log` (`RUST_LOG`).
    pub async fn start(table_prefix: &str, token_name: &str, log: &str) -> Self {
        let (store, table) = tests::moto::dynamo_table(table_prefix).await;
        store
            .put_account(&Account::new("ada", "Ada"))
            .await
            .unwrap();
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let (_, token) = issue_token(
            store.as_ref(),
            &"ada".into(),
            token_name,
            TokenScope::Write,
            None,
            now_ms,
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
            .env("RUST_LOG", log);
        let running = Bootstrap::spawn(cmd).unwrap();
        Self {
            running,
            base,
            token,
            store,
            _api: api,
            _bedrock: bedrock,
            issuer,
        }
    }
}
