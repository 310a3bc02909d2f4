//! Any model a user brings (issue 19): keep-alives keep a slow server's call alive, `tool_choice`
//! reaches the model and lets it answer after its tools, and a server that cannot be reached gets
//! its own calm sentence while the log says where. Scripted where timing matters (paused time),
//! and through a real local HTTP server speaking the OpenAI-compatible wire.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use axum::routing::post;
use backend::{BackendError, ChatModel, Reply, StopReason, ToolChoice};
use backend_openai::{OpenAiConfig, OpenAiModel};
use engine::{CollectSink, Engine, EngineOptions, TurnEnd, TurnOutcome, lines};
use futures::StreamExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use store::ConversationStore;
use store_sqlite::SqliteStore;
use tests::{Calls, Harness, Logs, sample_tools, web_job, web_jobs};
use transcript::Conversation;

fn options(idle: Duration, call: Duration) -> EngineOptions {
    EngineOptions {
        idle_timeout: idle,
        call_timeout: call,
        ..EngineOptions::default()
    }
}

/// `n` keep-alives `every` apart, then the answer.
fn slow_start(n: usize, every: Duration, answer: &str) -> Reply {
    let mut reply = Reply::new();
    for _ in 0..n {
        reply = reply.then_wait(every).keep_alive();
    }
    reply.say(answer).stop(StopReason::EndTurn)
}

#[tokio::test(start_paused = true)]
async fn keep_alives_restart_the_idle_timer() {
    // 40 s of prompt evaluation with a ping every 5 s; the idle timeout is 20 s.
    let h = Harness::with_options(
        [slow_start(8, Duration::from_secs(5), "Evaluated at last.")],
        options(Duration::from_secs(20), Duration::from_secs(60)),
    )
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::Answered);
    assert_eq!(t.outcome.reply, "Evaluated at last.");
    assert_eq!(t.outcome.model_calls, 1);
}

#[tokio::test(start_paused = true)]
async fn without_keep_alives_the_same_silence_times_out() {
    // The control: the same 40 s, with nothing on the wire.
    let h = Harness::with_options(
        [
            Reply::new()
                .then_wait(Duration::from_secs(40))
                .say("Too late.")
                .stop(StopReason::EndTurn),
            Reply::text("Second try."),
        ],
        options(Duration::from_secs(20), Duration::from_secs(60)),
    )
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.reply, "Second try.", "timed out, then retried");
}

#[tokio::test(start_paused = true)]
async fn a_server_that_kept_the_call_alive_is_not_asked_again_after_the_deadline() {
    // Pings forever: the whole-call deadline ends it; a retry would queue behind the same work.
    let h = Harness::with_options(
        [
            slow_start(100, Duration::from_secs(5), "never"),
            Reply::text("must not be asked"),
        ],
        options(Duration::from_secs(20), Duration::from_secs(60)),
    )
    .await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert_eq!(t.outcome.reply, lines::TIMED_OUT);
    assert_eq!(h.model.requests().len(), 1, "no second request");
}

#[tokio::test(start_paused = true)]
async fn required_asks_for_a_tool_on_the_users_message_and_frees_the_answer_after_it() {
    let mut opts = EngineOptions::default();
    opts.settings.tool_choice = ToolChoice::Required;
    let h = Harness::with_options(
        [
            Reply::tool_call("c1", "list_events", json!({})),
            Reply::text("You have two events."),
        ],
        opts,
    )
    .await;
    let t = h.turn("what's on?").await;
    assert_eq!(t.outcome.reply, "You have two events.");
    let requests = h.model.requests();
    assert_eq!(requests[0].settings.tool_choice, ToolChoice::Required);
    assert_eq!(
        requests[1].settings.tool_choice,
        ToolChoice::Auto,
        "after tool results the model may answer"
    );
    // `none` holds on every call.
    let mut opts = EngineOptions::default();
    opts.settings.tool_choice = ToolChoice::None;
    let h = Harness::with_options([Reply::text("Hello.")], opts).await;
    h.turn("hi").await;
    assert_eq!(h.model.requests()[0].settings.tool_choice, ToolChoice::None);
}

#[tokio::test(start_paused = true)]
async fn a_model_that_refuses_the_tool_choice_is_asked_again_without_it() {
    let mut opts = EngineOptions::default();
    opts.settings.tool_choice = ToolChoice::Required;
    let refused = BackendError::FeatureRejected {
        feature: backend::OptionalFeature::ToolChoice,
        message: "HTTP 400: 'required' is not supported with this model".into(),
    };
    let h = Harness::with_options(
        [
            Reply::error(refused),
            Reply::text("Hello."),
            Reply::text("Hello again."),
        ],
        opts,
    )
    .await;
    assert_eq!(h.turn("hi").await.outcome.reply, "Hello.");
    assert_eq!(h.turn("hi again").await.outcome.reply, "Hello again.");
    let choices: Vec<ToolChoice> = h
        .model
        .requests()
        .iter()
        .map(|r| r.settings.tool_choice)
        .collect();
    assert_eq!(
        choices,
        [ToolChoice::Required, ToolChoice::Auto, ToolChoice::Auto],
        "dropped for the process, not asked for again"
    );
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_server_has_its_own_sentence_and_the_log_says_where() {
    let logs = Logs::default();
    let _g = logs.install();
    let unreachable = || BackendError::Unreachable {
        endpoint: "http://127.0.0.1:8000/v1/chat/completions".into(),
        source: None,
    };
    let h = Harness::new([Reply::error(unreachable()), Reply::error(unreachable())]).await;
    let t = h.turn("hi").await;
    assert_eq!(t.outcome.end, TurnEnd::BackendFailed);
    assert_eq!(t.outcome.reply, lines::UNREACHABLE);
    assert_eq!(
        h.model.requests().len(),
        2,
        "retried once, like any transient failure"
    );
    let log = logs.text();
    assert!(log.contains("127.0.0.1:8000"), "{log}");
    assert!(!t.outcome.reply.contains("127.0.0.1"));
    let rows = h.transcript().await;
    let call = rows.last().unwrap().call.as_ref().unwrap();
    assert_eq!(call.error.as_deref(), Some("unreachable"));
}

// --- the same through a real local OpenAI-compatible server ---------------------------------

/// A turn on `model` through the one job path, on a fresh in-memory store.
async fn turn_on(model: Arc<dyn ChatModel>, options: EngineOptions, text: &str) -> TurnOutcome {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let options = EngineOptions {
        model_id: "local".into(),
        ..options
    };
    let engine = Arc::new(Engine::new(
        model,
        Arc::new(sample_tools(Calls::default())),
        store.clone(),
        options,
    ));
    store
        .create_conversation(&Conversation::new("conv-1", "user-1", "web", "planner"))
        .await
        .unwrap();
    let jobs = web_jobs(engine, store.clone(), Arc::default());
    let ran = jobs
        .run_streamed(
            &web_job("conv-1", "user-1", "act-1", text),
            Duration::from_secs(60),
            &CollectSink::default(),
        )
        .await;
    ran.turn.expect("the turn ran")
}

/// A server like llama-cpp-python's on a CPU: `: ping` comments while the prompt is
/// evaluated, then the answer.
async fn slow_pinging_server(pings: usize, every: Duration) -> String {
    let app = Router::new().route(
        "/v1/chat/completions",
        post(move |_body: Bytes| async move {
            let mut pieces: Vec<(Duration, String)> = (0..pings)
                .map(|i| (every, format!(": ping - {i}\r\n\r\n")))
                .collect();
            pieces.push((
                Duration::ZERO,
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Evaluated.\"}}]}\r\n\r\n\
                 data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n\
                 data: [DONE]\r\n\r\n"
                    .into(),
            ));
            let body = futures::stream::iter(pieces).then(|(wait, piece)| async move {
                tokio::time::sleep(wait).await;
                Ok::<_, std::convert::Infallible>(Bytes::from(piece))
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(body))
                .unwrap()
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/v1")
}

fn openai(base_url: &str) -> Arc<dyn ChatModel> {
    Arc::new(OpenAiModel::new(
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            model: "local".into(),
        },
        reqwest::Client::new(),
    ))
}

#[tokio::test]
async fn ping_comments_from_a_real_server_keep_the_call_alive() {
    // 1.2 s of pings 100 ms apart against a 400 ms idle timeout.
    let url = slow_pinging_server(12, Duration::from_millis(100)).await;
    let outcome = turn_on(
        openai(&url),
        options(Duration::from_millis(400), Duration::from_secs(10)),
        "hi",
    )
    .await;
    assert_eq!(outcome.end, TurnEnd::Answered, "{outcome:?}");
    assert_eq!(outcome.reply, "Evaluated.");
}

#[tokio::test]
async fn a_refused_connection_to_a_real_address_gets_the_unreachable_sentence() {
    let logs = Logs::default();
    let _g = logs.install();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let outcome = turn_on(
        openai(&format!("http://{addr}/v1")),
        EngineOptions::default(),
        "hi",
    )
    .await;
    assert_eq!(outcome.end, TurnEnd::BackendFailed);
    assert_eq!(outcome.reply, lines::UNREACHABLE);
    let log = logs.text();
    assert!(
        log.contains(&format!(
            "cannot reach the model server at http://{addr}/v1/chat/completions"
        )),
        "{log}"
    );
}
