//! Context discipline on the wire: the real engine talking to the fake Bedrock through the real
//! SDK client. What Bedrock received is checked byte for byte: the stable prefix and where the
//! cache points sit, recovery from rejected replayed reasoning, and lean mode after Bedrock
//! refuses an optional feature (its real error shapes).

use backend::{InferenceSettings, OptionalFeature, Reply};
use backend_bedrock::BedrockModel;
use engine::{Engine, EngineOptions, NoFacts, NullSink, TurnEnd, TurnInput};
use fake_bedrock::{FakeBedrock, RecordedRequest, Scenario};
use serde_json::{Value, json};
use std::sync::Arc;
use store::ConversationStore;
use store_sqlite::SqliteStore;
use tests::{Calls, sample_tools};
use tools::ActionId;
use transcript::{Conversation, StopReason};

const CLAUDE: &str = "us.anthropic.claude-sonnet-4-20250514-v1:0";

struct Rig {
    bedrock: FakeBedrock,
    engine: Engine,
    turns: std::cell::Cell<u32>,
}

async fn rig(scenarios: Vec<Scenario>, settings: InferenceSettings) -> Rig {
    let bedrock = FakeBedrock::start(scenarios).await.unwrap();
    let client = aws_sdk_bedrockruntime::Client::from_conf(
        aws_sdk_bedrockruntime::Config::builder()
            .behavior_version_latest()
            .region(aws_sdk_bedrockruntime::config::Region::new("us-east-1"))
            .endpoint_url(bedrock.endpoint())
            .credentials_provider(aws_sdk_bedrockruntime::config::Credentials::for_tests())
            .retry_config(aws_sdk_bedrockruntime::config::retry::RetryConfig::disabled())
            .build(),
    );
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .create_conversation(&Conversation::new("c1", "u1", "whatsapp", "planner"))
        .await
        .unwrap();
    let engine = Engine::new(
        Arc::new(BedrockModel::new(client, CLAUDE.into())),
        Arc::new(sample_tools(Calls::default())),
        store,
        EngineOptions {
            model_id: CLAUDE.into(),
            settings,
            ..EngineOptions::default()
        },
    )
    .with_context(Arc::new(NoFacts))
    .with_clock(Arc::new(|| 1_796_030_100_000));
    Rig {
        bedrock,
        engine,
        turns: Default::default(),
    }
}

impl Rig {
    async fn turn(&self, text: &str) -> engine::TurnOutcome {
        self.turns.set(self.turns.get() + 1);
        let input = TurnInput {
            sent_at_ms: None,
            typed_yes: engine::TypedYes::Confirms,
            conversation_id: "c1".into(),
            text: text.into(),
            action_id: ActionId(format!("a{}", self.turns.get())),
            attachments: Vec::new(),
            attachment_notes: Vec::new(),
            button_id: None,
        };
        self.engine.run_turn(input, &NullSink).await.unwrap()
    }

    fn bodies(&self) -> Vec<Value> {
        self.bedrock
            .requests()
            .into_iter()
            .map(|r: RecordedRequest| r.body)
            .collect()
    }
}

fn cache_point() -> Value {
    json!({"cachePoint": {"type": "default"}})
}

fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

fn without_cache_points(message: &Value) -> Value {
    let mut m = message.clone();
    m["content"]
        .as_array_mut()
        .unwrap()
        .retain(|b| b.get("cachePoint").is_none());
    m
}

fn count_blocks(body: &Value, key: &str) -> usize {
    messages(body)
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter(|b| b.get(key).is_some())
        .count()
}

#[tokio::test]
async fn consecutive_engine_requests_share_their_prefix_with_cache_points_in_place() {
    let r = rig(
        vec![
            Scenario::reply(&Reply::tool_call("t1", "list_events", json!({}))),
            Scenario::reply(&Reply::text("You have two events.")),
            Scenario::reply(&Reply::text("Spring Open is first.")),
        ],
        InferenceSettings::default(),
    )
    .await;
    assert_eq!(r.turn("what's on?").await.end, TurnEnd::Answered);
    assert_eq!(r.turn("which is first?").await.end, TurnEnd::Answered);
    let bodies = r.bodies();
    assert_eq!(bodies.len(), 3);
    for body in &bodies {
        // After the system prompt, after the tool list, at the end of the last message.
        assert_eq!(
            body["system"].as_array().unwrap().last(),
            Some(&cache_point())
        );
        let tools = body["toolConfig"]["tools"].as_array().unwrap();
        assert_eq!(tools.last(), Some(&cache_point()));
        let last = messages(body).last().unwrap();
        assert_eq!(
            last["content"].as_array().unwrap().last(),
            Some(&cache_point())
        );
        assert_eq!(count_blocks(body, "cachePoint"), 1);
    }
    for pair in bodies.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert_eq!(
            serde_json::to_vec(&before["system"]).unwrap(),
            serde_json::to_vec(&after["system"]).unwrap()
        );
        assert_eq!(
            serde_json::to_vec(&before["toolConfig"]).unwrap(),
            serde_json::to_vec(&after["toolConfig"]).unwrap()
        );
        let (b, a) = (messages(before), messages(after));
        assert!(a.len() > b.len());
        for i in 0..b.len() - 1 {
            assert_eq!(
                serde_json::to_vec(&b[i]).unwrap(),
                serde_json::to_vec(&a[i]).unwrap(),
                "message {i}"
            );
        }
        // The message cache point moves to the newest message; the content stays identical.
        let i = b.len() - 1;
        assert_eq!(without_cache_points(&b[i]), a[i]);
    }
}

#[tokio::test]
async fn rejected_replayed_reasoning_is_stripped_and_retried() {
    let r = rig(
        vec![
            Scenario::reply(
                &Reply::new()
                    .reason("They want the list.", "c2lnbmF0dXJlLW9sZA==")
                    .say("Two events.")
                    .stop(StopReason::EndTurn),
            ),
            Scenario::validation_error(
                "The model returned the following errors: messages.1.content.0: Invalid `signature` in `thinking` block",
            ),
            Scenario::reply(&Reply::text("Still two.")),
        ],
        InferenceSettings::default(),
    )
    .await;
    r.turn("what's on?").await;
    let outcome = r.turn("again?").await;
    assert_eq!(outcome.end, TurnEnd::Answered);
    assert_eq!(outcome.reply, "Still two.");
    let bodies = r.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(count_blocks(&bodies[1], "reasoningContent"), 1);
    assert_eq!(count_blocks(&bodies[2], "reasoningContent"), 0);
    // The text of the earlier answer is still replayed.
    let earlier = &messages(&bodies[2])[1]["content"][0]["text"];
    assert_eq!(earlier, "Two events.");
}

#[tokio::test]
async fn bedrock_refusing_cache_points_switches_to_lean_mode_for_good() {
    let r = rig(
        vec![
            Scenario::access_denied(
                "You invoked an unsupported model or your request did not allow prompt caching. See the documentation for more information.",
            ),
            Scenario::reply(&Reply::text("Hello.")),
            Scenario::reply(&Reply::text("Hello again.")),
        ],
        InferenceSettings::default(),
    )
    .await;
    assert_eq!(r.turn("hi").await.reply, "Hello.");
    assert_eq!(r.turn("hi again").await.reply, "Hello again.");
    let bodies = r.bodies();
    assert_eq!(bodies.len(), 3);
    let points = |b: &Value| b.to_string().matches("cachePoint").count();
    assert_eq!(points(&bodies[0]), 3);
    assert_eq!(points(&bodies[1]), 0);
    assert_eq!(points(&bodies[2]), 0, "lean mode lasts beyond the turn");
    assert!(r.engine.lean().dropped(OptionalFeature::PromptCache));
}

#[tokio::test]
async fn bedrock_refusing_reasoning_settings_drops_them() {
    let r = rig(
        vec![
            Scenario::validation_error(
                "Malformed input request: #: extraneous key [thinking] is not permitted, please reformat your input and try again.",
            ),
            Scenario::reply(&Reply::text("Hello.")),
        ],
        InferenceSettings {
            reasoning_budget: Some(2_048),
            ..InferenceSettings::default()
        },
    )
    .await;
    assert_eq!(r.turn("hi").await.reply, "Hello.");
    let bodies = r.bodies();
    assert_eq!(
        bodies[0]["additionalModelRequestFields"]["thinking"]["budget_tokens"],
        2048
    );
    assert!(bodies[1].get("additionalModelRequestFields").is_none());
    assert!(r.engine.lean().dropped(OptionalFeature::Reasoning));
    assert!(!r.engine.lean().dropped(OptionalFeature::PromptCache));
}
