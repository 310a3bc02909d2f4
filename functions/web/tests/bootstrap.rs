//! The web bootstrap itself (`src/main.rs`), started as Lambda starts it and reached as a browser
//! reaches it: the built binary under a local Lambda Runtime API with a Function URL in front
//! (`fake_lambda::RuntimeApi::function_url`, relaying the streamed responses as they arrive),
//! DynamoDB and Secrets Manager in moto (`AWS_ENDPOINT_URL`; `scripts/test` starts it), the fake
//! Bedrock (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`) and a test OpenID Connect issuer
//! (`tests::fake_issuer`). The sign-in settings come from a Secrets Manager secret, as deployed.
//!
//! What it proves: sign-in through the Function URL (cookies in and out of Lambda's event and
//! prelude), the API answering 401 without a session, a link code for the channels served by the
//! other functions, and a web turn that runs in the invocation that posted it, its tokens reaching
//! the browser while the response is still open, `done` ending it; and a bootstrap without its
//! settings telling Lambda so at `/runtime/init/error`. One test boots it with the environment
//! `infra/template.yaml` gives `WebFunction` (`fake_lambda::template_env`), so the template and
//! the code cannot drift apart.

use backend::{Reply, StopReason};
use fake_bedrock::{FakeBedrock, Scenario};
use fake_lambda::{
    Bootstrap, PostedKind, RuntimeApi, moto_endpoint as moto, moto_secret, template_env,
};
use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, RETRY_AFTER};
use serde_json::{Value, json};
use signed_in::{Browser, header, set_cookie};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tests::fake_issuer::{FakeIssuer, Person};

mod signed_in;

const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const CLIENT: &str = "bridle-web";
const CLIENT_SECRET: &str = "web-client-secret-do-not-log";
/// How long the fake Bedrock pauses between the reply's two pieces.
const PAUSE: Duration = Duration::from_millis(1500);

fn unique(prefix: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{prefix}-{}-{now}", std::process::id())
}

async fn table() -> String {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    let name = unique("web-bootstrap");
    store_dynamodb::create_table(&aws_sdk_dynamodb::Client::new(&config), &name)
        .await
        .unwrap();
    name
}

/// The web secret as the stack writes it, for `issuer` and the Function URL at `base`.
async fn web_secret(issuer: &FakeIssuer, base: &str) -> String {
    moto_secret(
        &unique("web-secret"),
        &json!({
            "BRIDLE_OIDC_ISSUER": issuer.issuer,
            "BRIDLE_OIDC_CLIENT_ID": CLIENT,
            "BRIDLE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "BRIDLE_PUBLIC_URL": format!("{base}/"),
        }),
    )
    .await
}

/// Read server-sent events until the stream ends: each event's name, data and when it arrived.
async fn read_events(res: reqwest::Response) -> (Vec<(String, Value, Instant)>, Instant) {
    let mut body = res.bytes_stream();
    let mut pending = String::new();
    let mut events = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(60), body.next())
        .await
        .expect("the stream moves or ends within a minute")
    {
        pending.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = pending.find("\n\n") {
            let block: String = pending.drain(..end + 2).collect();
            let mut name = String::from("message");
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = n.trim().to_owned();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push_str(d.trim_start());
                }
            }
            if !data.is_empty() {
                events.push((
                    name,
                    serde_json::from_str(&data).unwrap_or(Value::Null),
                    Instant::now(),
                ));
            }
        }
    }
    (events, Instant::now())
}

#[tokio::test]
async fn signed_in_through_the_function_url_a_web_turn_streams_its_tokens_before_done() {
    let table = table().await;
    let bedrock = FakeBedrock::start([Scenario::reply(
        &Reply::new()
            .say("Hello from")
            .then_wait(PAUSE)
            .say(" the web function.")
            .stop(StopReason::EndTurn),
    )])
    .await
    .unwrap();
    let issuer = FakeIssuer::start(CLIENT).await;
    let api = RuntimeApi::start([]).await.unwrap();
    let base = api.function_url().await.unwrap();
    // The web secret as the stack writes it.
    let secret = web_secret(&issuer, &base).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_web"));
    cmd.env_clear()
        .envs(api.lambda_env("web"))
        .env("AWS_ENDPOINT_URL", moto())
        .env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.endpoint())
        .env("TABLE_NAME", &table)
        .env("BEDROCK_MODEL_ID", MODEL)
        .env("BRIDLE_SECRETS_ARN", &secret)
        .env("BRIDLE_SIGNUP", "open")
        .env("BRIDLE_LINKABLE_CHANNELS", "whatsapp,telegram")
        .env("WHATSAPP_DISPLAY_NUMBER", "+15551234567")
        .env("TELEGRAM_BOT_USERNAME", "bridlebot")
        .env("RUST_LOG", "info");
    let running = Bootstrap::spawn(cmd).unwrap();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();

    // The API needs a session; the page sends a visitor to sign in.
    let anonymous = http
        .get(format!("{base}/api/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        header(&anonymous, reqwest::header::CONTENT_TYPE),
        "application/json"
    );

    let ada = Browser::sign_in(http.clone(), &base, &issuer).await;
    let created = ada.post("/api/conversations").send().await.unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    let id = created.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A link code for the channels the other functions serve; this one has no sender.
    let code = ada.post("/api/link-code").send().await.unwrap();
    assert_eq!(code.status(), StatusCode::CREATED);
    let code: Value = code.json().await.unwrap();
    let channels: Vec<&str> = code["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["channel"].as_str().unwrap())
        .collect();
    assert_eq!(channels, ["whatsapp", "telegram"], "{code}");
    assert!(
        code["links"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://wa.me/15551234567?text="),
        "{code}"
    );

    // The turn: queued, run by the worker inside this invocation, streamed as it happens.
    let posted = ada
        .post(&format!("/api/conversations/{id}/messages"))
        .json(&json!({"text": "Hi there"}))
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), StatusCode::OK);
    assert_eq!(
        header(&posted, reqwest::header::CONTENT_TYPE),
        "text/event-stream"
    );
    let (events, ended) = read_events(posted).await;
    let names: Vec<&str> = events.iter().map(|(n, _, _)| n.as_str()).collect();
    let first_token = names.iter().position(|n| *n == "token");
    let done = names.iter().position(|n| *n == "done");
    assert!(
        matches!((first_token, done), (Some(t), Some(d)) if t < d),
        "a token before done: {names:?}"
    );
    assert_eq!(
        done,
        Some(names.len() - 1),
        "done ends the stream: {names:?}"
    );
    let streamed: String = events
        .iter()
        .filter(|(n, _, _)| n == "token")
        .map(|(_, data, _)| data["text"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(streamed, "Hello from the web function.", "{events:?}");
    // The first token reached the browser while the model was still pausing: the response
    // was streamed through the Function URL, not buffered until the turn's end.
    let token_at = events[first_token.unwrap()].2;
    assert!(
        ended.duration_since(token_at) >= PAUSE / 2,
        "the first token arrived only {:?} before the end",
        ended.duration_since(token_at)
    );

    // The turn completed and was recorded in DynamoDB: the history shows it.
    let history: Value = ada
        .get(&format!("/api/conversations/{id}/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let texts: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default())
        .collect();
    let logs = running.stop().logs;
    assert_eq!(
        texts,
        ["Hi there", "Hello from the web function."],
        "{logs}"
    );
    let requests = bedrock.requests();
    assert_eq!(requests.len(), 1, "{logs}");
    assert_eq!(requests[0].model_id, MODEL);
    assert!(logs.contains("web ready"), "{logs}");
    assert!(
        !logs.contains(CLIENT_SECRET),
        "the client secret reached the log: {logs}"
    );
}

#[tokio::test]
async fn a_bootstrap_without_its_sign_in_settings_stops_at_init_and_tells_lambda() {
    let mut api = RuntimeApi::start([]).await.unwrap();
    // The secret holds only the client secret: no issuer, no client id, no public URL.
    let secret = moto_secret(
        &unique("web-secret-partial"),
        &json!({"BRIDLE_OIDC_CLIENT_SECRET": CLIENT_SECRET}),
    )
    .await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_web"));
    cmd.env_clear()
        .envs(api.lambda_env("web"))
        .env("AWS_ENDPOINT_URL", moto())
        .env("BRIDLE_SECRETS_ARN", &secret)
        .env("TABLE_NAME", "bridle")
        .env("BEDROCK_MODEL_ID", MODEL);
    let ran =
        tokio::task::spawn_blocking(move || Bootstrap::run_to_exit(cmd, Duration::from_secs(60)))
            .await
            .unwrap();
    assert!(!ran.status.success(), "{}", ran.logs);
    let posted = api.next_posted(Duration::from_secs(5)).await;
    assert_eq!(posted.kind, PostedKind::InitError, "{}", ran.logs);
    assert_eq!(posted.error_type.as_deref(), Some("Bridle.Misconfigured"));
    let message = posted.body["errorMessage"].as_str().unwrap_or_default();
    for name in [
        "BRIDLE_OIDC_ISSUER",
        "BRIDLE_OIDC_CLIENT_ID",
        "BRIDLE_PUBLIC_URL",
    ] {
        assert!(message.contains(name), "{name}: {message}");
        assert!(ran.logs.contains(name), "{name}: {}", ran.logs);
    }
    assert!(!message.contains("TABLE_NAME"), "{message}");
    assert!(
        !ran.logs.contains(CLIENT_SECRET) && !message.contains(CLIENT_SECRET),
        "the client secret reached the log: {}",
        ran.logs
    );
}

#[tokio::test]
async fn the_template_environment_starts_the_web_function_behind_its_url() {
    let table = table().await;
    let issuer = FakeIssuer::start(CLIENT).await;
    let api = RuntimeApi::start([]).await.unwrap();
    let base = api.function_url().await.unwrap();
    let env = template_env("WebFunction", &[("Table", &table)]);
    let get = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("the template gives WebFunction no {k}: {env:?}"))
    };
    assert_eq!(get("TABLE_NAME"), table);
    // The stack's web secret, by the name the template builds from the stack name. moto is
    // shared by tests running at once, so this test's copy of it gets a name of its own.
    assert_eq!(get("BRIDLE_SECRETS_ARN"), "bridle-test-web");
    let secret = moto_secret(
        &unique("bridle-test-web"),
        &json!({
            "BRIDLE_OIDC_ISSUER": issuer.issuer,
            "BRIDLE_OIDC_CLIENT_ID": CLIENT,
            "BRIDLE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
            "BRIDLE_PUBLIC_URL": format!("{base}/"),
        }),
    )
    .await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_web"));
    cmd.env_clear()
        .envs(api.lambda_env("web"))
        .env("AWS_ENDPOINT_URL", moto())
        .envs(env.clone())
        .env("BRIDLE_SECRETS_ARN", &secret);
    let running = Bootstrap::spawn(cmd).unwrap();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let anonymous = http
        .get(format!("{base}/api/conversations"))
        .send()
        .await
        .unwrap();
    let login = http.get(format!("{base}/auth/login")).send().await.unwrap();
    let page = http.get(format!("{base}/healthz")).send().await.unwrap();
    let (anonymous, login_status, at_issuer, page) = (
        anonymous.status(),
        login.status(),
        header(&login, LOCATION),
        page.text().await.unwrap(),
    );
    let logs = running.stop().logs;
    assert_eq!(anonymous, StatusCode::UNAUTHORIZED, "{logs}");
    assert_eq!(login_status, StatusCode::SEE_OTHER, "{logs}");
    assert!(at_issuer.starts_with(&issuer.issuer), "{at_issuer}");
    assert!(
        at_issuer.contains(&format!(
            "redirect_uri={}",
            encode(&format!("{base}/auth/callback"))
        )),
        "{at_issuer}"
    );
    assert_eq!(page, "ok");
    assert!(logs.contains("web ready"), "{logs}");
    assert!(
        !logs.contains(CLIENT_SECRET),
        "the client secret reached the log: {logs}"
    );
}

/// Sign-ins that would reach the provider are counted per client address here too, the
/// address being the Function URL's `sourceIp` (the fake front sets it from the connection, as
/// Lambda does): past `BRIDLE_SIGN_INS_PER_MINUTE` a callback from the address gets 429 and the
/// provider hears nothing, while a browser on another address signs in.
#[tokio::test]
async fn sign_ins_are_counted_by_the_function_urls_source_ip() {
    let table = table().await;
    let issuer = FakeIssuer::start(CLIENT).await;
    let api = RuntimeApi::start([]).await.unwrap();
    let base = api.function_url().await.unwrap();
    let secret = web_secret(&issuer, &base).await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_web"));
    cmd.env_clear()
        .envs(api.lambda_env("web"))
        .env("AWS_ENDPOINT_URL", moto())
        .envs(template_env("WebFunction", &[("Table", &table)]))
        .env("BRIDLE_SECRETS_ARN", &secret)
        .env("BRIDLE_SIGNUP", "open")
        .env("BRIDLE_SIGN_INS_PER_MINUTE", "2");
    let running = Bootstrap::spawn(cmd).unwrap();
    // The count is per minute of the clock: start well inside one.
    let into_minute = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
        % 60_000;
    if into_minute > 45_000 {
        tokio::time::sleep(Duration::from_millis(60_100 - into_minute as u64)).await;
    }
    let browser = |from: &str| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .local_address(from.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let here = browser("127.0.0.1");
    issuer.sign_in_as(Person::new("sub-ada", "ada@example.com"));
    let login = here.get(format!("{base}/auth/login")).send().await.unwrap();
    let state = set_cookie(&login, "bridle_login").expect("the login cookie");
    let back = here.get(header(&login, LOCATION)).send().await.unwrap();
    let callback = header(&back, LOCATION);
    let mut statuses = Vec::new();
    for code in ["code=made-up-1-", "code=made-up-2-"] {
        let made_up = callback.replace("code=", code);
        let res = here
            .get(made_up)
            .header(COOKIE, format!("bridle_login={state}"))
            .send()
            .await
            .unwrap();
        statuses.push(res.status());
    }
    let over = here
        .get(&callback)
        .header(COOKIE, format!("bridle_login={state}"))
        .send()
        .await
        .unwrap();
    let (over_status, retry_after) = (over.status(), header(&over, RETRY_AFTER));
    let over_page = over.text().await.unwrap();
    let asked_before_elsewhere = issuer.token_requests();
    let elsewhere = Browser::sign_in(browser("127.0.0.2"), &base, &issuer).await;
    let session = elsewhere.get("/api/session").send().await.unwrap().status();
    let logs = running.stop().logs;
    assert_eq!(
        statuses,
        [StatusCode::UNAUTHORIZED, StatusCode::UNAUTHORIZED],
        "{logs}"
    );
    assert_eq!(over_status, StatusCode::TOO_MANY_REQUESTS, "{logs}");
    assert!(
        retry_after
            .parse::<u64>()
            .is_ok_and(|s| (1..=60).contains(&s))
    );
    assert!(
        over_page.contains("More than 2 sign-ins from your network could not be verified"),
        "{over_page}"
    );
    assert_eq!(
        asked_before_elsewhere, 2,
        "the refused callback asked the provider"
    );
    assert_eq!(session, StatusCode::OK);
    assert_eq!(issuer.token_requests(), 3);
    assert!(logs.contains("from=127.0.0.1"), "{logs}");
}

/// `application/x-www-form-urlencoded`, as the authorization URL's query is written.
fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
