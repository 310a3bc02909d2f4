//! A 12-cycle turn through the whole harness (engine, tool runner, in-memory SQLite) against
//! draining the same scripted event stream with no harness at all, and against only storing the
//! rows such a turn writes (the part of the harness that invariant 3 makes unavoidable: every
//! message is written the moment it exists).
//!
//! `cargo bench -p tests --bench turn`. harness / baseline is the whole overhead;
//! harness / (baseline + floor) is what the loop adds beyond the model's stream and the writes.
//!
//! Two more, for the work no harness can leave out (README's Measure section): the harness
//! started as the worker starts it (the turn's start read in one call, then the turn), against
//! a floor that also makes that read and the tools' own work (what each handler does, not the
//! runner around it).
//!
//! And one for the goal itself: the least harness that does this turn's required work
//! (`minimal_loop`: keep what streamed, build each request, validate and run each call through
//! the registry with its timeout, write every row as it comes into being), written straight
//! with none of Bridle's rails. Its distance from the floor is what any harness pays; the
//! harness's distance from it is Bridle's own.
//!
//! `BRIDLE_TURN_PROFILE=harness|run_turn|least TURNS=n` runs n turns of one kind back to back instead
//! of benchmarking, for `perf record` (see `profile`).

use backend::{ChatModel, ChatRequest, Reply, ScriptedModel};
use criterion::{BatchSize, Criterion, criterion_group};
use engine::{Engine, EngineOptions, NullSink, TurnEnd, TurnInput};
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use store::{ConversationStore, MessageStore, ToolResults, VisibleEntry, VisibleStore};
use store_sqlite::SqliteStore;
use tools::ActionId;
use transcript::{Conversation, ConversationId, Message, Part, StopReason, UserId};

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
        tools: Default::default(),
        settings: Default::default(),
    }
}

/// An engine on `store` whose model plays one turn's script; [`another_turn`] gives it the
/// next turn's.
fn engine_on(store: Arc<SqliteStore>, tools: Arc<tools::Registry>) -> (Engine, Arc<ScriptedModel>) {
    // It keeps every request an engine's life brings (the profile mode's 101 turns at most), as
    // the least harness's model, new each turn, keeps its turn's: the requests are dropped with
    // the engine, not one by one in a timed turn once the model's list is full.
    let model = Arc::new(ScriptedModel::new(script()).keeping(12 * 101));
    let engine = engine_with(model.clone(), store, tools);
    (engine, model)
}

/// Script the next turn of an engine from [`engine_on`].
fn another_turn(model: &ScriptedModel) {
    for reply in script() {
        model.push(reply);
    }
}

fn engine_with(
    model: Arc<ScriptedModel>,
    store: Arc<SqliteStore>,
    tools: Arc<tools::Registry>,
) -> Engine {
    Engine::new(
        model,
        tools,
        store,
        EngineOptions {
            model_id: "bench".into(),
            system_prompt: "You are a benchmark.".into(),
            ..Default::default()
        },
    )
}

async fn new_conversation(store: &SqliteStore, id: &str) -> ConversationId {
    let conv = Conversation::new(id, "u1", "web", "planner");
    store.create_conversation(&conv).await.unwrap();
    conv.id
}

fn input(id: &ConversationId) -> TurnInput {
    TurnInput {
        sent_at_ms: None,
        typed_yes: engine::TypedYes::Confirms,
        conversation_id: id.clone(),
        text: "what is on this month?".into(),
        action_id: ActionId("a1".into()),
        attachments: Vec::new(),
        attachment_notes: Vec::new(),
        button_id: None,
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

/// The turn's start as the worker reads it under the conversation's lease: one call.
async fn start_read(store: &SqliteStore, id: &ConversationId) -> engine::TurnRead {
    let read = store
        .turn_writes()
        .expect("SQLite reads a turn's start at once")
        .conversation_and_account(id, &UserId("u1".into()))
        .await
        .unwrap();
    engine::TurnRead {
        conversation: read.conversation.expect("the conversation was created"),
        account: Some(read.account),
        next_visible: read.next_visible,
        messages: read.messages,
        facts: None,
    }
}

/// What `list_events` itself does for a call (`tests::sample_tools`): record it and answer.
fn list_events_work(calls: &tests::Calls) -> serde_json::Value {
    calls.push("list_events", &json!({}));
    json!([{"id": "e1", "title": "Spring Open"}, {"id": "e2", "title": "Summer Cup"}])
}

/// The floor's writes: the rows a turn stores, one by one as they come into being; with
/// `tools`, each result after its tool's own work.
async fn store_rows(
    store: &SqliteStore,
    conv: &mut Conversation,
    rows: &[Message],
    visible: &[VisibleEntry],
    tools: Option<&tests::Calls>,
) {
    conv.turn += 1;
    store.update_conversation(conv).await.unwrap();
    store.append_visible(&visible[0]).await.unwrap();
    for row in rows {
        // Each tool call's result is recorded as the call finishes, then the answer's tool
        // message (DESIGN invariant 10).
        for part in row.parts.iter() {
            if let Part::ToolResult { tool_use_id, .. } = part {
                if let Some(calls) = tools {
                    std::hint::black_box(list_events_work(calls));
                }
                store
                    .put_tool_result(&row.conversation_id, row.position - 1, tool_use_id, part)
                    .await
                    .unwrap();
            }
        }
        store.append_message(row).await.unwrap();
    }
}

/// What every turn of the minimal loop shares: the tools offered (their specs built once, as
/// any harness keeps its tool block), the runner, and the user's row as the harness wrote it
/// (its context block is not the loop's work).
struct Minimal {
    tools: Arc<tools::Registry>,
    specs: Arc<[backend::ToolSpec]>,
    offered: Vec<String>,
    user_parts: Vec<Part>,
}

impl Minimal {
    /// The tools offered to a `planner` conversation, as the model sees them.
    fn new(tools: &Arc<tools::Registry>, user_parts: Vec<Part>) -> Self {
        let specs: Vec<backend::ToolSpec> = tools
            .catalog_for("planner")
            .into_iter()
            .map(|d| backend::ToolSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                input_schema: d.input_schema.clone(),
            })
            .collect();
        Self {
            tools: tools.clone(),
            offered: specs.iter().map(|s| s.name.clone()).collect(),
            specs: specs.into(),
            user_parts,
        }
    }
}

/// The least a harness can do for this turn and still keep the transcript and run tools
/// safely, written straight: the start read; the conversation moved on, the user's visible
/// entry and row; then for each model call the request from the history (parts shared, not
/// copied), the stream drained keeping its text and calls, the assistant row with its call
/// record, and each call through the registry (look-up, validation against its schema, the
/// grant, a timeout, the result shaped) with its result recorded as it finishes, then the tool
/// row. Nothing else: no guard or budget, no events to a client, no spans or logs, no
/// confirmation gate, no receipts, no cycle ceiling's bookkeeping, no resume.
async fn minimal_loop(
    store: &SqliteStore,
    model: &ScriptedModel,
    m: &Minimal,
    id: &ConversationId,
) -> usize {
    use transcript::{CallRecord, Role};
    let start = start_read(store, id).await;
    let mut conv = start.conversation;
    let mut position = start.messages.as_ref().map_or(0, |ms| ms.len() as u64);
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    let row = |position: u64, role: Role, parts: Vec<Part>, call: Option<CallRecord>| Message {
        conversation_id: id.clone(),
        segment: conv.segment,
        position,
        role,
        parts,
        call,
        action_id: Some("a1".into()),
        created_at_ms: now(),
    };
    conv.turn += 1;
    store.update_conversation(&conv).await.unwrap();
    let entry = VisibleEntry {
        conversation_id: id.clone(),
        position: start.next_visible.unwrap_or(0),
        role: store::VisibleRole::User,
        text: "what is on this month?".into(),
        buttons: Vec::new(),
        reaction: None,
        turn: conv.turn,
        created_at_ms: now(),
    };
    store.append_visible(&entry).await.unwrap();
    let user = row(position, Role::User, m.user_parts.clone(), None);
    store.append_message(&user).await.unwrap();
    position += 1;
    let mut history = vec![backend::ChatMessage {
        role: Role::User,
        parts: user.parts.into(),
    }];
    let ctx = tools::Ctx {
        user_id: UserId("u1".into()),
        actor: tools::Actor::Agent,
        action_id: ActionId("a1".into()),
        conversation_id: id.clone(),
        call_key: None,
        grant: transcript::Grant::default(),
    };
    let mut calls_made = 0;
    loop {
        let request = ChatRequest {
            model: "bench".into(),
            system: "You are a benchmark.".into(),
            messages: history.clone(),
            tools: m.specs.clone(),
            settings: Default::default(),
        };
        let started = std::time::Instant::now();
        let mut stream = model.stream(request).await.unwrap();
        let (mut text, mut calls, mut end) = (String::new(), Vec::new(), None);
        while let Some(event) = stream.next().await {
            match event.unwrap() {
                backend::ModelEvent::Text { text: piece } => text.push_str(&piece),
                backend::ModelEvent::ToolUse { id, name, input } => {
                    calls.push(tools::ToolCall { id, name, input })
                }
                backend::ModelEvent::Done { stop_reason, usage } => {
                    end = Some((stop_reason, usage))
                }
                _ => {}
            }
        }
        calls_made += 1;
        let (stop_reason, usage) = end.expect("the stream ends with Done");
        let mut parts = Vec::with_capacity(1 + calls.len());
        if !text.is_empty() {
            parts.push(Part::Text { text });
        }
        parts.extend(calls.iter().map(|c| Part::ToolUse {
            id: c.id.clone(),
            name: c.name.clone(),
            input: c.input.clone(),
        }));
        let record = CallRecord {
            backend: "scripted".into(),
            model: "bench".into(),
            stop_reason: Some(stop_reason),
            error: None,
            usage,
            latency_ms: started.elapsed().as_millis() as u64,
            tools_offered: m.offered.clone(),
        };
        let answer = row(position, Role::Assistant, parts, Some(record));
        store.append_message(&answer).await.unwrap();
        let asked_at = position;
        position += 1;
        history.push(backend::ChatMessage {
            role: Role::Assistant,
            parts: answer.parts.into(),
        });
        if calls.is_empty() {
            return calls_made;
        }
        let mut results = Vec::with_capacity(calls.len());
        for call in &calls {
            let outcome = m.tools.run(&ctx, "planner", call).await;
            store
                .put_tool_result(id, asked_at, &call.id, &outcome.part)
                .await
                .unwrap();
            results.push(outcome.part);
        }
        let tool_row = row(position, Role::Tool, results, None);
        store.append_message(&tool_row).await.unwrap();
        position += 1;
        history.push(backend::ChatMessage {
            role: Role::Tool,
            parts: tool_row.parts.into(),
        });
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let calls = tests::Calls::default();
    let tools = Arc::new(tests::sample_tools(calls.clone()));
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

    // Each iteration gets its own small database that has already served one turn, as a
    // running server's has: its statements are prepared, and the turn is measured, not the
    // schema's creation nor a database that grows with the iteration count. So has the engine
    // the harness runs on (a server's or a worker's lives as long as its process): its tool
    // list is built, as the least harness's is.
    let warm = || {
        // The tools' record of calls is the tests' and grows with every call: emptied here,
        // untimed, so the iterations do not pay for a list as long as the run.
        calls.clear();
        let store = Arc::new(SqliteStore::open_in_memory().unwrap());
        let (engine, model) = engine_on(store.clone(), tools.clone());
        let (rows, visible) = rt.block_on(async {
            let id = new_conversation(&store, "warm-up").await;
            engine.run_turn(input(&id), &NullSink).await.unwrap();
            (
                store.messages(&id, 0).await.unwrap(),
                store.visible(&id).await.unwrap(),
            )
        });
        another_turn(&model);
        (store, rows, visible, engine)
    };
    let warm_store = || {
        let (store, rows, visible, _) = warm();
        (store, rows, visible)
    };
    group.bench_function("harness_engine_tools_sqlite_memory", |b| {
        b.iter_batched(
            || {
                let (store, _, _, engine) = warm();
                let id = rt.block_on(new_conversation(&store, "c1"));
                (engine, id)
            },
            |(engine, id)| {
                let outcome = rt.block_on(engine.run_turn(input(&id), &NullSink)).unwrap();
                assert_eq!(outcome.end, TurnEnd::Answered);
                assert_eq!(outcome.model_calls, 12);
                // Returned, so dropping the model's recorded requests is not timed.
                engine
            },
            BatchSize::SmallInput,
        )
    });
    // The floor any harness that keeps invariants 3 and 10 pays: the rows such a turn stores
    // (24 messages, their 12 tool-result records, the user's visible entry, the conversation's
    // update; the reply's visible entry is the job path's, which records what was delivered),
    // written one by one as they come into being, to the same kind of store, with no model,
    // tools or loop.
    let floor_input = || {
        let (store, rows, visible) = warm_store();
        assert_eq!((rows.len(), visible.len()), (24, 1));
        let id = rt.block_on(new_conversation(&store, "c1"));
        let conv = rt.block_on(store.conversation(&id)).unwrap().unwrap();
        let rows: Vec<Message> = rows
            .into_iter()
            .map(|m| Message {
                conversation_id: id.clone(),
                ..m
            })
            .collect();
        let visible: Vec<VisibleEntry> = visible
            .into_iter()
            .map(|v| VisibleEntry {
                conversation_id: id.clone(),
                ..v
            })
            .collect();
        (store, conv, rows, visible)
    };
    group.bench_function("floor_store_the_same_rows", |b| {
        b.iter_batched(
            floor_input,
            |(store, mut conv, rows, visible)| {
                rt.block_on(store_rows(&store, &mut conv, &rows, &visible, None));
                (store, rows)
            },
            BatchSize::SmallInput,
        )
    });
    // The harness as the worker runs it: the start read in one call, then the turn from it.
    group.bench_function("harness_started_as_the_worker_starts_it", |b| {
        b.iter_batched(
            || {
                let (store, _, _, engine) = warm();
                let id = rt.block_on(new_conversation(&store, "c1"));
                (store, engine, id)
            },
            |(store, engine, id)| {
                let outcome = rt.block_on(async {
                    let read = start_read(&store, &id).await;
                    engine.run_turn_in(read, input(&id), &NullSink).await
                });
                let outcome = outcome.unwrap();
                assert_eq!(outcome.end, TurnEnd::Answered);
                assert_eq!(outcome.model_calls, 12);
                engine
            },
            BatchSize::SmallInput,
        )
    });
    // The floor with the rest of the work no harness can skip: the same start read, and each
    // tool's own work before its result is stored.
    group.bench_function("floor_with_the_start_read_and_the_tools_work", |b| {
        b.iter_batched(
            floor_input,
            |(store, mut conv, rows, visible)| {
                rt.block_on(async {
                    std::hint::black_box(start_read(&store, &conv.id).await);
                    store_rows(&store, &mut conv, &rows, &visible, Some(&calls)).await;
                });
                (store, rows)
            },
            BatchSize::SmallInput,
        )
    });
    // The least any harness does for this turn (`minimal_loop`), on the same kind of store:
    // what is left between it and the floor is the work no harness can skip, and what is left
    // between the harness and it is Bridle's own.
    let minimal = {
        let (store, rows, _) = warm_store();
        let minimal = Minimal::new(&tools, rows[0].parts.clone());
        // Not timed: the loop stores what the harness stores, row for row (its call records'
        // latencies and every row's time aside).
        let id = rt.block_on(new_conversation(&store, "check"));
        let model = ScriptedModel::new(script());
        assert_eq!(rt.block_on(minimal_loop(&store, &model, &minimal, &id)), 12);
        let mine = rt.block_on(store.messages(&id, 0)).unwrap();
        assert_eq!(mine.len(), rows.len());
        for (a, b) in mine.iter().zip(&rows) {
            assert_eq!(
                (a.position, a.role, &a.parts),
                (b.position, b.role, &b.parts)
            );
            let (ca, cb) = (a.call.as_ref(), b.call.as_ref());
            assert_eq!(
                ca.map(|c| (&c.tools_offered, c.usage)),
                cb.map(|c| (&c.tools_offered, c.usage))
            );
        }
        Arc::new(minimal)
    };
    group.bench_function("minimal_loop_the_same_work", |b| {
        b.iter_batched(
            || {
                let (store, _, _) = warm_store();
                let id = rt.block_on(new_conversation(&store, "c1"));
                (store, ScriptedModel::new(script()), id)
            },
            |(store, model, id)| {
                let calls = rt.block_on(minimal_loop(&store, &model, &minimal, &id));
                assert_eq!(calls, 12);
                (store, model)
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// `BRIDLE_TURN_PROFILE=harness|run_turn|least [TURNS=n]`: run n turns of one kind (the harness
/// as the worker starts it, or through `run_turn`, or the least harness) back to back, with
/// nothing else in the process (criterion's setup builds a schema and runs a whole
/// turn per iteration, which is most of any profile of the bench), for `perf record`; prints
/// the time a turn.
fn profile(which: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let turns: usize = std::env::var("TURNS").map_or(4000, |n| n.parse().unwrap());
    let calls = tests::Calls::default();
    let tools = Arc::new(tests::sample_tools(calls.clone()));
    // A fresh store every 100 turns, warmed by one turn, so the database stays the size the
    // bench's is; the harness's engine the one that served that turn, as in the bench.
    let warm = |store: &Arc<SqliteStore>| {
        let (engine, model) = engine_on(store.clone(), tools.clone());
        rt.block_on(async {
            let id = new_conversation(store, "warm-up").await;
            engine.run_turn(input(&id), &NullSink).await.unwrap();
        });
        (engine, model)
    };
    let mut store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (mut engine, mut model) = warm(&store);
    let user_parts = rt.block_on(store.messages(&"warm-up".into(), 0)).unwrap()[0]
        .parts
        .clone();
    let least = Minimal::new(&tools, user_parts);
    let started = std::time::Instant::now();
    for i in 0..turns {
        if i % 100 == 0 {
            calls.clear();
            store = Arc::new(SqliteStore::open_in_memory().unwrap());
            (engine, model) = warm(&store);
        }
        rt.block_on(async {
            let id = new_conversation(&store, &format!("p{i}")).await;
            let calls = match which {
                "harness" => {
                    another_turn(&model);
                    let read = start_read(&store, &id).await;
                    let outcome = engine.run_turn_in(read, input(&id), &NullSink).await;
                    outcome.unwrap().model_calls as usize
                }
                "run_turn" => {
                    another_turn(&model);
                    let outcome = engine.run_turn(input(&id), &NullSink).await;
                    outcome.unwrap().model_calls as usize
                }
                "least" => {
                    let model = ScriptedModel::new(script());
                    minimal_loop(&store, &model, &least, &id).await
                }
                other => panic!("BRIDLE_TURN_PROFILE is harness, run_turn or least, not {other}"),
            };
            assert_eq!(calls, 12);
        });
    }
    let each = started.elapsed() / turns as u32;
    println!(
        "{which}: {turns} turns, {each:?} a turn (with the conversation's creation, and a fresh store warmed by one turn every 100)"
    );
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(which) = std::env::var("BRIDLE_TURN_PROFILE") {
        profile(&which);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
