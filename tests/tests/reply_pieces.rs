//! A reply too long for one message goes out in pieces, and a platform may fail between them
//! (Telegram answers 429 to messages sent too fast in one chat). The user must get each piece
//! once: the job sends on from the piece that failed, within the attempt while the wait is
//! short, and from its retry when the attempt ends first (a long rate limit, the deadline).
//! The real Telegram sender against a local Bot API; the job path on SQLite, and on DynamoDB
//! (moto) for a retry in another process.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use backend::{Reply, ScriptedModel};
use channel_jobs::{ChannelJobs, JobOptions, JobOutcome};
use channels::Sender;
use channels::telegram::TelegramSender;
use engine::{Engine, EngineOptions};
use queue::TurnJob;
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Store;
use store_sqlite::SqliteStore;
use tools::Registry;

const TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";
const CHAT: &str = "111222333";

/// How the Bot API answers one `sendMessage`.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// 429 with `retry_after` in seconds.
    RateLimited(u64),
    /// Takes the message, but answers only after this long.
    Slow(Duration),
}

/// A Bot API that keeps the text of every message it took, answering `sendMessage` calls from a
/// script (200 when it runs out).
#[derive(Clone, Default)]
struct BotApi {
    took: Arc<Mutex<Vec<String>>>,
    script: Arc<Mutex<VecDeque<Option<Answer>>>>,
}

impl BotApi {
    fn took(&self) -> Vec<String> {
        self.took.lock().unwrap().clone()
    }
}

async fn bot_api(State(api): State<BotApi>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap();
    let Some(text) = body["text"].as_str() else {
        return axum::Json(json!({"ok": true, "result": true})).into_response();
    };
    let answer = api.script.lock().unwrap().pop_front().flatten();
    if let Some(Answer::RateLimited(secs)) = answer {
        let refused = json!({"ok": false, "error_code": 429,
            "description": format!("Too Many Requests: retry after {secs}"),
            "parameters": {"retry_after": secs}});
        return (StatusCode::TOO_MANY_REQUESTS, axum::Json(refused)).into_response();
    }
    api.took.lock().unwrap().push(text.to_owned());
    if let Some(Answer::Slow(wait)) = answer {
        tokio::time::sleep(wait).await;
    }
    axum::Json(json!({"ok": true, "result": {"message_id": 1}})).into_response()
}

async fn bot() -> (BotApi, TelegramSender) {
    let api = BotApi::default();
    let app = Router::new()
        .route("/{*path}", post(bot_api))
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let sender = TelegramSender::new(reqwest::Client::new(), base, TOKEN).unwrap();
    (api, sender)
}

/// Three paragraphs of about 3,000 characters: three Telegram messages.
fn long_reply() -> String {
    ["alpha", "bravo", "charlie"]
        .map(|w| format!("{w} ").repeat(500).trim_end().to_owned())
        .join("\n\n")
}

async fn setup(script: Vec<Option<Answer>>) -> (ChannelJobs, Arc<SqliteStore>, BotApi) {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let (jobs, api) = setup_on(store.clone(), script).await;
    (jobs, store, api)
}

async fn setup_on(store: Arc<dyn Store>, script: Vec<Option<Answer>>) -> (ChannelJobs, BotApi) {
    let engine = Engine::new(
        Arc::new(ScriptedModel::new(vec![Reply::text(&long_reply())])),
        Arc::new(Registry::default()),
        store.clone(),
        EngineOptions {
            model_id: "m".into(),
            ..EngineOptions::default()
        },
    );
    let (api, sender) = bot().await;
    api.script.lock().unwrap().extend(script);
    let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
    senders.insert("telegram".into(), Arc::new(sender));
    store
        .bind_identity("telegram", CHAT, &"ana".into(), 0)
        .await
        .unwrap();
    let jobs = ChannelJobs {
        engine: Arc::new(engine),
        store,
        senders,
        options: JobOptions {
            metrics: metrics::Metrics::off(),
            ..JobOptions::default()
        },
    };
    (jobs, api)
}

/// The same job path in another process: the same store, model and platform, its own memory
/// (as a Lambda retry in another environment, or a restarted server).
fn in_another_process(jobs: &ChannelJobs) -> ChannelJobs {
    ChannelJobs {
        engine: jobs.engine.clone(),
        store: jobs.store.clone(),
        senders: jobs.senders.clone(),
        options: JobOptions {
            sent: Default::default(),
            ..jobs.options.clone()
        },
    }
}

fn job() -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "telegram".into(),
        message_id: format!("{CHAT}:17"),
        conversation_key: CHAT.into(),
        external_user_id: CHAT.into(),
        text: "Tell me everything".into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: 0,
    }
}

/// The pieces the user got, each paragraph's first word; and what the transcript says they saw.
async fn seen(store: &dyn Store, api: &BotApi) -> (Vec<String>, Vec<String>) {
    let got = api
        .took()
        .iter()
        .map(|t| t.split(' ').next().unwrap().to_owned())
        .collect();
    let visible = store
        .visible(&format!("telegram:{CHAT}@ana").as_str().into())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.text)
        .collect();
    (got, visible)
}

#[tokio::test]
async fn a_rate_limit_between_pieces_is_waited_out_and_each_piece_goes_once() {
    let (jobs, store, api) = setup(vec![None, Some(Answer::RateLimited(1))]).await;
    let started = std::time::Instant::now();
    assert_eq!(
        jobs.run(&job(), Duration::from_secs(60)).await,
        JobOutcome::Done
    );
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited as asked"
    );
    let (got, visible) = seen(store.as_ref(), &api).await;
    assert_eq!(got, ["alpha", "bravo", "charlie"]);
    assert_eq!(visible, ["Tell me everything", long_reply().as_str()]);
}

#[tokio::test]
async fn a_long_rate_limit_ends_the_attempt_and_its_retry_sends_only_the_rest() {
    // Two minutes is longer than an attempt waits: it fails, and the queue's retry (here at
    // once) sends on from the second piece.
    let (jobs, store, api) = setup(vec![None, Some(Answer::RateLimited(120))]).await;
    let first = jobs.run(&job(), Duration::from_secs(60)).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    assert_eq!(seen(store.as_ref(), &api).await.0, ["alpha"]);
    assert_eq!(
        jobs.run(&job(), Duration::from_secs(60)).await,
        JobOutcome::Done
    );
    let (got, visible) = seen(store.as_ref(), &api).await;
    assert_eq!(got, ["alpha", "bravo", "charlie"]);
    assert_eq!(visible, ["Tell me everything", long_reply().as_str()]);
    let again = jobs.run(&job(), Duration::from_secs(60)).await;
    assert!(matches!(again, JobOutcome::Skipped(_)), "{again:?}");
    assert_eq!(api.took().len(), 3, "nothing more");
}

#[tokio::test]
async fn an_attempt_cut_off_by_its_deadline_mid_reply_is_sent_on_by_its_retry() {
    // The platform takes the second piece but answers too late: the deadline drops the attempt
    // with that piece in flight. The retry sends on from it (the one piece whose fate the
    // attempt could not know goes twice), never from the first.
    let (jobs, store, api) = setup(vec![None, Some(Answer::Slow(Duration::from_secs(5)))]).await;
    let first = jobs.run(&job(), Duration::from_secs(2)).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    assert_eq!(seen(store.as_ref(), &api).await.0, ["alpha", "bravo"]);
    assert_eq!(
        jobs.run(&job(), Duration::from_secs(60)).await,
        JobOutcome::Done
    );
    let (got, visible) = seen(store.as_ref(), &api).await;
    assert_eq!(got, ["alpha", "bravo", "bravo", "charlie"]);
    assert_eq!(visible, ["Tell me everything", long_reply().as_str()]);
}

/// The attempt fails on a long rate limit after the first piece; its retry runs in another
/// process (its own memory; the same store and platform), as a Lambda retry may land in another
/// environment, or a server restart: it finds what was sent kept with the job's claim.
async fn a_retry_in_another_process_sends_only_the_rest(store: Arc<dyn Store>) {
    let (jobs, api) = setup_on(store.clone(), vec![None, Some(Answer::RateLimited(120))]).await;
    let first = jobs.run(&job(), Duration::from_secs(60)).await;
    assert!(matches!(first, JobOutcome::Failed(_)), "{first:?}");
    assert_eq!(seen(store.as_ref(), &api).await.0, ["alpha"]);
    let elsewhere = in_another_process(&jobs);
    assert_eq!(
        elsewhere.run(&job(), Duration::from_secs(60)).await,
        JobOutcome::Done
    );
    let (got, visible) = seen(store.as_ref(), &api).await;
    assert_eq!(got, ["alpha", "bravo", "charlie"]);
    assert_eq!(visible, ["Tell me everything", long_reply().as_str()]);
    assert_eq!(
        store.reply_sent(&job().dedupe_key()).await.unwrap(),
        None,
        "not kept once the job is done"
    );
}

#[tokio::test]
async fn a_retry_in_another_process_sends_only_the_rest_on_sqlite() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    a_retry_in_another_process_sends_only_the_rest(store).await;
}

#[tokio::test]
async fn a_retry_in_another_process_sends_only_the_rest_on_dynamodb() {
    let store = tests::moto::dynamo_store("pieces").await;
    a_retry_in_another_process_sends_only_the_rest(store).await;
}

/// One process remembers less than what another attempt kept with the claim since: its retry
/// goes from the further of the two. Attempt 1 (process A) sends the first piece, attempt 2
/// (process B) the second, each ending on a long rate limit; attempt 3 runs in A again.
#[tokio::test]
async fn a_retry_goes_on_from_the_further_of_its_memory_and_the_claims_record() {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let limited = Some(Answer::RateLimited(120));
    let (a, api) = setup_on(store.clone(), vec![None, limited, None, limited]).await;
    let b = in_another_process(&a);
    for (jobs, got) in [(&a, vec!["alpha"]), (&b, vec!["alpha", "bravo"])] {
        let ran = jobs.run(&job(), Duration::from_secs(60)).await;
        assert!(matches!(ran, JobOutcome::Failed(_)), "{ran:?}");
        assert_eq!(seen(store.as_ref(), &api).await.0, got);
    }
    assert_eq!(
        a.run(&job(), Duration::from_secs(60)).await,
        JobOutcome::Done
    );
    let (got, visible) = seen(store.as_ref(), &api).await;
    assert_eq!(got, ["alpha", "bravo", "charlie"]);
    assert_eq!(visible, ["Tell me everything", long_reply().as_str()]);
}

/// A process that remembers less than the claim's record, and whose attempt fails before it
/// gets to deliver (here: another holder keeps the conversation's lease past the attempt's
/// deadline), leaves the record as it is: a retry in a third process sends only the rest.
#[tokio::test]
async fn an_attempt_that_remembers_less_does_not_set_the_claims_record_back() {
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let limited = Some(Answer::RateLimited(120));
    let (a, api) = setup_on(store.clone(), vec![None, limited, None, limited]).await;
    let elsewhere = || in_another_process(&a);
    let ran = a.run(&job(), Duration::from_secs(60)).await;
    assert!(matches!(ran, JobOutcome::Failed(_)), "{ran:?}");
    let ran = elsewhere().run(&job(), Duration::from_secs(60)).await;
    assert!(matches!(ran, JobOutcome::Failed(_)), "{ran:?}");
    assert_eq!(seen(store.as_ref(), &api).await.0, ["alpha", "bravo"]);

    let conversation = format!("telegram:{CHAT}@ana").as_str().into();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    store
        .acquire_lease(&conversation, "another-turn", now, now + 600_000)
        .await
        .unwrap();
    let ran = a.run(&job(), Duration::from_secs(1)).await;
    assert!(matches!(ran, JobOutcome::Failed(_)), "{ran:?}");
    assert_eq!(seen(store.as_ref(), &api).await.0, ["alpha", "bravo"]);
    store
        .release_lease(&conversation, "another-turn")
        .await
        .unwrap();

    assert_eq!(
        elsewhere().run(&job(), Duration::from_secs(60)).await,
        JobOutcome::Done
    );
    let (got, visible) = seen(store.as_ref(), &api).await;
    assert_eq!(got, ["alpha", "bravo", "charlie"]);
    assert_eq!(visible, ["Tell me everything", long_reply().as_str()]);
}
