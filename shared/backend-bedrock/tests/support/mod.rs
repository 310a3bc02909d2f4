//! What the integration tests share: the real SDK client pointed at a fake Bedrock runtime.

use aws_sdk_bedrockruntime::Client;
use aws_sdk_bedrockruntime::config::retry::RetryConfig;
use aws_sdk_bedrockruntime::config::{BehaviorVersion, Credentials, Region};
use backend::{ChatMessage, ChatRequest, InferenceSettings};
use backend_bedrock::BedrockModel;
use fake_bedrock::{FakeBedrock, Scenario};
use transcript::{Part, Role};

/// The SDK client as production builds it, but pointed at the fake with dummy credentials
/// (no credential chain, no IMDS) and without SDK retries.
pub fn client(endpoint: &str) -> Client {
    let config = aws_sdk_bedrockruntime::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}

/// A fake Bedrock playing `scenarios`, and the adapter for `model_id` pointed at it.
pub async fn serve(model_id: &str, scenarios: Vec<Scenario>) -> (FakeBedrock, BedrockModel) {
    let fake = FakeBedrock::start(scenarios).await.unwrap();
    let model = BedrockModel::new(client(&fake.endpoint()), model_id.to_owned());
    (fake, model)
}

/// The smallest request: one user message, "hi", no system prompt, no tools.
#[allow(dead_code)] // not every test file that shares this module sends it
pub fn hi() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: String::new(),
        messages: vec![ChatMessage {
            role: Role::User,
            parts: vec![Part::text("hi")].into(),
        }],
        tools: Default::default(),
        settings: InferenceSettings::default(),
    }
}
