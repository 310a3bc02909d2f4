//! The web app on AWS end to end, as a person meets it: the built `web` bootstrap under a local
//! Lambda Runtime API with a Function URL in front that relays streamed responses as they
//! arrive (`fake_lambda`), DynamoDB and Secrets Manager in moto, the fake Bedrock, and the
//! OpenID-certified provider from npm (`oidc-provider`, `tests/oidc`), driven by headless
//! Chromium: redirected to the provider's login page, signed in, a reply that streams, a link
//! code; then the platform side the webhook and worker Lambdas run (a signed delivery through
//! `webhook::Webhook`, the job through `channel_jobs` on the same DynamoDB table) links the
//! account and runs the next message as that person.

use backend::{Reply, ScriptedModel, StopReason};
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome};
use fake_bedrock::{FakeBedrock, Scenario};
use fake_lambda::{Bootstrap, RuntimeApi, moto_endpoint as moto, moto_secret};
use fantoccini::Locator;
use queue::JobQueue;
use serde_json::json;
use std::collections::HashMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::{Email, Store};
use tests::browser::{
    api_status, browser, eventually, sign_in_at_provider, sign_out_with, start_driver, text_of,
};
use tests::oidc_provider::OidcProvider;
use transcript::ConversationId;

const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
const GENERIC_SECRET: &str = "generic-webhook-secret";
const CALLBACK_SECRET: &str = "generic-callback-secret";

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A platform that keeps what the worker sends it.
async fn platform() -> (Arc<Mutex<Vec<serde_json::Value>>>, String) {
    use axum::extract::State;
    let got = Arc::new(Mutex::new(Vec::new()));
    let app =
        axum::Router::new()
            .route(
                "/callback",
                axum::routing::post(
                    |State(got): State<Arc<Mutex<Vec<serde_json::Value>>>>,
                     body: axum::body::Bytes| async move {
                        got.lock()
                            .unwrap()
                            .push(serde_json::from_slice(&body).unwrap_or_default());
                        "ok"
                    },
                ),
            )
            .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/callback", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (got, url)
}

/// A signed delivery from the generic channel, as the webhook Lambda receives it.
async fn deliver(webhook: &webhook::Webhook, id: &str, text: &str) -> u16 {
    let body =
        json!({"type": "message", "id": id, "user": "u-77", "conversation": "c-9", "text": text})
            .to_string();
    let now = now_s();
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("x-bridle-timestamp".to_owned(), now.to_string()),
        (
            "x-bridle-signature".to_owned(),
            channels::generic::sign(GENERIC_SECRET.as_bytes(), now, body.as_bytes()),
        ),
    ];
    let response = webhook
        .handle(webhook::Incoming {
            method: "POST",
            path: "/webhooks/generic",
            query: None,
            headers: &headers,
            body: body.as_bytes(),
            now_ms: now * 1000,
            origin: None,
        })
        .await;
    response.status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_chromium_through_the_function_url_sign_in_chat_link_and_the_next_message_runs_as_that_user()
 {
    // The deployed pieces: the table, the model, the provider, the web function behind its URL.
    let (table, table_name) = tests::moto::dynamo_table("web-browser").await;
    let bedrock = FakeBedrock::start([Scenario::reply(
        &Reply::new()
            .say("Welcome to")
            .then_wait(Duration::from_millis(1200))
            .say(" the web app.")
            .stop(StopReason::EndTurn),
    )])
    .await
    .unwrap();
    let api = RuntimeApi::start([]).await.unwrap();
    let base = api.function_url().await.unwrap();
    let callback = format!("{base}/auth/callback");
    let provider = tokio::task::spawn_blocking(move || {
        OidcProvider::start("bridle-web", "bridle-web-secret", &[callback.as_str()])
    })
    .await
    .unwrap();
    let secret = moto_secret(
        &format!("web-browser-{}", std::process::id()),
        &json!({
            "BRIDLE_OIDC_ISSUER": provider.issuer,
            "BRIDLE_OIDC_CLIENT_ID": provider.client_id,
            "BRIDLE_OIDC_CLIENT_SECRET": provider.client_secret,
            "BRIDLE_PUBLIC_URL": base,
        }),
    )
    .await;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_web"));
    cmd.env_clear()
        .envs(api.lambda_env("web"))
        .env("AWS_ENDPOINT_URL", moto())
        .env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", bedrock.endpoint())
        .env("TABLE_NAME", &table_name)
        .env("BEDROCK_MODEL_ID", MODEL)
        .env("BRIDLE_SECRETS_ARN", &secret)
        .env("BRIDLE_SIGNUP", "open")
        .env("BRIDLE_LINKABLE_CHANNELS", "generic")
        .env("RUST_LOG", "warn");
    let _running = Bootstrap::spawn(cmd).unwrap();

    let driver = start_driver().await;
    let profile = driver.temp("profile");
    let c = browser(&driver, &profile, (1280, 800)).await;

    // Not signed in: to the provider's login page, and back signed in.
    c.goto(&format!("{base}/")).await.unwrap();
    sign_in_at_provider(&c, "ada").await;
    eventually("the signed-in name", || async {
        text_of(&c, "#who-name")
            .await
            .filter(|t| t == "ada@example.com")
    })
    .await;

    // A reply that streams through the Function URL: part of it shows before the rest.
    c.find(Locator::Css("#input"))
        .await
        .unwrap()
        .send_keys("Hello")
        .await
        .unwrap();
    c.find(Locator::Css("#send"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let partial = eventually("the first streamed words", || async {
        text_of(&c, ".msg.assistant.streaming")
            .await
            .filter(|t| t.contains("Welcome"))
    })
    .await;
    assert!(!partial.contains("web app"), "{partial}");
    eventually("the whole reply", || async {
        text_of(&c, ".msg.assistant:not(.streaming)")
            .await
            .filter(|t| t.contains("Welcome to the web app."))
    })
    .await;

    // A link code, from the web app on AWS.
    c.find(Locator::Css("#link-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let code = eventually("the link code", || async {
        text_of(&c, "#link-result .link-code")
            .await
            .filter(|t| !t.is_empty())
    })
    .await;
    let store: Arc<dyn Store> = table.clone();
    let ada = store
        .account_by_email(&Email::parse("ada@example.com").unwrap())
        .await
        .unwrap()
        .expect("the first sign-in made ada's account");

    // The platform side on the same table: the webhook's handler verifies and queues, the
    // worker's job path links the account, then answers the next message as ada.
    let queue: Arc<dyn JobQueue> = Arc::new(
        queue_sqlite::SqliteQueue::open_in_memory(queue::QueueSettings::default()).unwrap(),
    );
    let hook = webhook::Webhook::new(
        vec![Arc::new(channels::generic::GenericChannel::new(
            GENERIC_SECRET,
        ))],
        queue.clone(),
        64 * 1024,
    )
    .with_metrics(metrics::Metrics::off());
    let (sent, callback_url) = platform().await;
    let model = Arc::new(ScriptedModel::new([Reply::text("Hello again, Ada.")]));
    let assembled = assembly::assemble(assembly::Parts {
        model: model.clone(),
        store: store.clone(),
        registry: tools::Registry::default(),
        risk: None,
        engine: engine::EngineOptions {
            model_id: MODEL.into(),
            ..engine::EngineOptions::default()
        },
        guards: assembly::GuardOptions::default(),
    })
    .unwrap();
    let mut senders: HashMap<String, Arc<dyn channels::Sender>> = HashMap::new();
    senders.insert(
        "generic".into(),
        Arc::new(channels::generic::GenericSender::new(
            reqwest::Client::new(),
            callback_url,
            CALLBACK_SECRET,
        )),
    );
    let jobs = ChannelJobs {
        engine: assembled.engine,
        store: store.clone(),
        senders,
        options: JobOptions {
            metrics: metrics::Metrics::off(),
            ..JobOptions::default()
        },
    };
    let run_next = || async {
        let got = queue.receive(1, Duration::from_secs(2)).await.unwrap();
        assert_eq!(got.len(), 1);
        let outcome = jobs.run(&got[0].job, Duration::from_secs(60)).await;
        queue.ack(&got[0].receipt).await.unwrap();
        outcome
    };
    assert_eq!(deliver(&hook, "m-1", &format!("my code {code}")).await, 200);
    assert!(matches!(run_next().await, JobOutcome::Answered(_)));
    assert_eq!(
        store.identity("generic", "u-77").await.unwrap(),
        Some(ada.user.clone()),
        "the code from the web app bound the account to ada"
    );
    assert_eq!(deliver(&hook, "m-2", "What's on?").await, 200);
    assert_eq!(run_next().await, JobOutcome::Done);
    let conv = store
        .conversation(&ConversationId(format!("generic:c-9@{}", ada.user)))
        .await
        .unwrap()
        .expect("ada's conversation for that chat");
    assert_eq!(conv.user_id, ada.user);
    let said: Vec<String> = sent
        .lock()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(said.len(), 2, "{said:?}");
    assert!(said[0].contains("Linked"), "{said:?}");
    assert_eq!(said[1], "Hello again, Ada.");
    let seen = serde_json::to_string(&model.requests()[0].messages).unwrap();
    assert!(seen.contains("Ada"), "the turn runs as ada: {seen}");

    // Signing out ends the session for this browser.
    sign_out_with(&c, "#sign-out").await;
    assert_eq!(api_status(&c).await, json!(401));
    c.close().await.unwrap();
    drop(provider);
}
