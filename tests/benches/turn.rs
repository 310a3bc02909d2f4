//! A 12-cycle turn through the whole harness (engine, tool runner, in-memory SQLite) against
//! draining the same scripted event stream with no harness at all.
//!
//! `cargo bench -p tests --bench turn`; the ratio harness / baseline is the harness overhead.

use backend::{ChatModel, ChatRequest, Reply, ScriptedModel};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use engine::{Engine, EngineOptions, NullSink, TurnEnd, TurnInput};
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use store::ConversationStore;
use store_sqlite::SqliteStore;
use tools::ActionId;
use transcript::{Conversation, StopReason};

const SENTENCE: &str = "I am checking the events that match what you asked for and will report back shortly with the details that matter most to you.";

/// Eleven cycles of "a sentence + a tool call", then a final answer: twelve model calls.
fn script() -> Vec<Reply> {
    let mut replies: Vec<Reply> = (0..11)
        .map(|i| {
            Reply::new()
                .say(SENTENCE)
                .call(&format!("t{i}"), "list_events", json!({}))
                .stop(StopReason::ToolUse)
        })
        .collect();
    replies.push(Reply::text(&format!("{SENTENCE} {SENTENCE} {SENTENCE}")));
    replies
}

fn empty_request() -> ChatRequest {
    ChatRequest {
        model: "bench".into(),
        system: String::new(),
        messages: vec![],
        tools: vec![],
        settings: Default::default(),
    }
}

async fn drain_without_harness(model: &ScriptedModel) -> usize {
    let mut events = 0;
    for _ in 0..12 {
        let mut stream = model.stream(empty_request()).await.unwrap();
        while let Some(ev) = stream.next().await {
            std::hint::black_box(ev.unwrap());
            events += 1;
        }
    }
    events
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let tools = Arc::new(tests::sample_tools(tests::Calls::default()));
    let mut group = c.benchmark_group("twelve_cycle_turn");

    group.bench_function("baseline_drain_scripted_stream", |b| {
        b.iter_batched(
            || ScriptedModel::new(script()),
            |model| {
                rt.block_on(drain_without_harness(&model));
                model
            },
            BatchSize::SmallInput,
        )
    });

    group.bench_function("harness_engine_tools_sqlite_memory", |b| {
        b.iter_batched(
            || {
                let store = Arc::new(SqliteStore::open_in_memory().unwrap());
                let conv = Conversation::new("c1", "u1", "web", "planner");
                rt.block_on(store.create_conversation(&conv)).unwrap();
                Engine::new(
                    Arc::new(ScriptedModel::new(script())),
                    tools.clone(),
                    store,
                    EngineOptions {
                        model_id: "bench".into(),
                        system_prompt: "You are a benchmark.".into(),
                        ..Default::default()
                    },
                )
            },
            |engine| {
                let input = TurnInput {
                    conversation_id: "c1".into(),
                    text: "what is on this month?".into(),
                    action_id: ActionId("a1".into()),
                    attachments: Vec::new(),
                    attachment_notes: Vec::new(),
                };
                let outcome = rt.block_on(engine.run_turn(input, &NullSink)).unwrap();
                assert_eq!(outcome.end, TurnEnd::Answered);
                assert_eq!(outcome.model_calls, 12);
                // Returned, so dropping the store is not timed.
                engine
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
