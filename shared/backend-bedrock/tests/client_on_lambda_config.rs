//! `client(&config)` on the SDK configuration the worker builds from Lambda's variables
//! (`aws_roots::lambda_env`, with the compiled-in Amazon roots): it reaches
//! `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`, signs with the function's credentials, and leaves a
//! throttled call to the engine instead of retrying it inside the SDK.

#[allow(dead_code)] // this file sends only the shared request
mod support;

use aws_types::os_shim_internal::Env;
use backend::{BackendError, ChatModel, ModelEvent, Reply};
use backend_bedrock::BedrockModel;
use fake_bedrock::{FakeBedrock, Scenario};
use futures::StreamExt;

#[tokio::test]
async fn a_client_on_lambdas_configuration_reaches_the_bedrock_endpoint_without_sdk_retries() {
    let fake = FakeBedrock::start([
        Scenario::throttled(),
        Scenario::reply(&Reply::text("hello from the fake")),
    ])
    .await
    .unwrap();
    let endpoint = fake.endpoint();
    let env = Env::from_slice(&[
        ("AWS_ACCESS_KEY_ID", "AKIDWORKER"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_SESSION_TOKEN", "session-token"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_LAMBDA_FUNCTION_NAME", "worker"),
        // The global endpoint leads nowhere: the service's own variable must win.
        ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
        ("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", &endpoint),
    ]);
    let config = aws_roots::lambda_env::from_env(&env, aws_roots::http_client())
        .expect("Lambda's variables are enough for a configuration");
    let model = BedrockModel::new(backend_bedrock::client(&config), "worker-model".into());

    match model.stream(support::hi()).await {
        Err(BackendError::Throttled { .. }) => {}
        Err(other) => panic!("expected throttling, got {other:?}"),
        Ok(_) => panic!("a throttled call opened a stream"),
    }
    assert_eq!(fake.requests().len(), 1, "the SDK retried a throttled call");

    let events: Vec<_> = model.stream(support::hi()).await.unwrap().collect().await;
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            Ok(ModelEvent::Text { text }) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "hello from the fake");
    assert!(
        matches!(events.last(), Some(Ok(ModelEvent::Done { .. }))),
        "{events:?}"
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].model_id, "worker-model");
    let auth = &requests[1].headers["authorization"];
    assert!(
        auth.contains("Credential=AKIDWORKER/") && auth.contains("/eu-west-1/bedrock/"),
        "{auth}"
    );
    assert_eq!(requests[1].headers["x-amz-security-token"], "session-token");
}
