//! Bedrock refusing an optional feature, in its real wording, before the stream opens and
//! inside it: what `BedrockModel::stream` makes of it. `FeatureRejected` lets the engine drop
//! the feature (lean mode); `ReasoningRejected` makes it strip replayed reasoning and retry.

mod support;

use backend::{
    BackendError, ChatMessage, ChatModel, ChatRequest, InferenceSettings, ModelEvent,
    OptionalFeature, Reply,
};
use fake_bedrock::{Frame, Scenario};
use futures::StreamExt;
use support::serve;
use transcript::{Part, Role};

const CLAUDE: &str = "anthropic.claude-sonnet-4-20250514-v1:0";

const CACHE_REFUSED: &str = "You invoked an unsupported model or your request did not allow prompt caching. See the documentation for more information.";

fn request() -> ChatRequest {
    ChatRequest {
        model: String::new(),
        system: "You are Bridle.".into(),
        messages: vec![ChatMessage {
            role: Role::User,
            parts: vec![Part::text("Hi")].into(),
        }],
        tools: Default::default(),
        settings: InferenceSettings {
            reasoning_budget: Some(2048),
            ..InferenceSettings::default()
        },
    }
}

/// The error the adapter reports for `scenario`, whether the call fails before the stream or
/// the stream's first item (after keep-alives: `messageStart` says nothing) is the failure.
async fn failure(scenario: Scenario) -> BackendError {
    let (_fake, model) = serve(CLAUDE, vec![scenario]).await;
    match model.stream(request()).await {
        Err(err) => err,
        Ok(stream) => {
            let mut stream =
                stream.filter(|e| std::future::ready(!matches!(e, Ok(ModelEvent::KeepAlive))));
            match stream.next().await {
                Some(Err(err)) => err,
                other => panic!("expected a failure, got {other:?}"),
            }
        }
    }
}

fn assert_feature(err: &BackendError, expected: OptionalFeature, wording: &str) {
    match err {
        BackendError::FeatureRejected { feature, message } => {
            assert_eq!(*feature, expected, "{err:?}");
            assert!(message.contains(wording), "{message}");
        }
        other => panic!("expected FeatureRejected({expected:?}), got {other:?}"),
    }
}

#[tokio::test]
async fn the_prompt_cache_refusal_as_validation_and_as_access_denied() {
    let err = failure(Scenario::validation_error(CACHE_REFUSED)).await;
    assert_feature(&err, OptionalFeature::PromptCache, "prompt caching");
    let err = failure(Scenario::access_denied(CACHE_REFUSED)).await;
    assert_feature(&err, OptionalFeature::PromptCache, "prompt caching");
    // Inside the stream, as an exception frame.
    let err = failure(Scenario::frames([Frame::exception(
        "validationException",
        CACHE_REFUSED,
    )]))
    .await;
    assert_feature(&err, OptionalFeature::PromptCache, "prompt caching");
}

#[tokio::test]
async fn a_validation_error_naming_cache_points_rejects_prompt_caching() {
    let err = failure(Scenario::validation_error(
        "Malformed input request: #/system/1: extraneous key [cachePoint] is not permitted, please reformat your input and try again.",
    ))
    .await;
    assert_feature(&err, OptionalFeature::PromptCache, "cachePoint");
}

#[tokio::test]
async fn refused_reasoning_settings() {
    for message in [
        "Malformed input request: #: extraneous key [thinking] is not permitted, please reformat your input and try again.",
        "The model returned the following errors: thinking: Extra inputs are not permitted",
    ] {
        let err = failure(Scenario::validation_error(message)).await;
        assert_feature(&err, OptionalFeature::Reasoning, "thinking");
    }
}

#[tokio::test]
async fn an_invalid_replayed_signature_is_reasoning_rejected_not_a_settings_problem() {
    for message in [
        "The model returned the following errors: messages.39.content.0: Invalid signature in thinking block",
        "The model returned the following errors: messages.39.content.0: Invalid `signature` in `thinking` block",
    ] {
        let err = failure(Scenario::validation_error(message)).await;
        assert!(
            matches!(&err, BackendError::ReasoningRejected { message } if message.contains("messages.39")),
            "{message} → {err:?}"
        );
    }
}

#[tokio::test]
async fn an_access_denied_about_permissions_stays_auth() {
    let err = failure(Scenario::access_denied(
        "You don't have access to the model with the specified model ID.",
    ))
    .await;
    assert!(matches!(err, BackendError::Auth { .. }), "{err:?}");
}

#[tokio::test]
async fn the_fakes_scripted_refusals_round_trip() {
    // What a scripted `FeatureRejected` plays as on the fake: an HTTP error before the
    // stream, or an exception frame inside it.
    for feature in [
        OptionalFeature::PromptCache,
        OptionalFeature::Reasoning,
        OptionalFeature::ToolChoice,
    ] {
        let scripted = BackendError::FeatureRejected {
            feature,
            message: String::new(),
        };
        for scenario in [
            Scenario::open_error(&scripted),
            Scenario::reply(&Reply::new().then_fail(scripted.clone())),
        ] {
            let err = failure(scenario).await;
            assert!(
                matches!(err, BackendError::FeatureRejected { feature: f, .. } if f == feature),
                "{feature:?} → {err:?}"
            );
        }
    }
}
