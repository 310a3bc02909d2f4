//! The local server's HTTP API, through a plain HTTP client: streaming, history, bad input,
//! dedupe, ordering, parallelism, disconnects and restarts.

use backend::{Reply, ScriptedModel};
use bridle::{AppOptions, Db, build_app};
use queue::{Delivery, Enqueued, JobQueue, QueueError, TurnJob};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tests::EchoModel;
use tests::server::{TestServer, parse_sse, tokens};
use transcript::StopReason;

fn names(events: &[(String, Value)]) -> Vec<&str> {
    let mut out: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    out.dedup();
    out
}

async fn scripted(replies: Vec<Reply>) -> TestServer {
    TestServer::start(Arc::new(ScriptedModel::new(replies)), AppOptions::default()).await
}

#[tokio::test]
async fn a_message_streams_tokens_tool_activity_and_effects_then_shows_in_history() {
    let server = scripted(vec![
        Reply::new()
            .say("Saving that.")
            .call("t1", "add_note", json!({"text": "buy milk"}))
            .stop(StopReason::ToolUse),
        Reply::text("Saved: buy milk."),
    ])
    .await;
    let id = server.new_conversation().await;
    assert!(server.history(&id).await.is_empty());
    let events = server.say(&id, "remember to buy milk").await;
    assert_eq!(
        names(&events),
        [
            "queued",
            "token",
            "tool_use",
            "tool_result",
            "effects",
            "token",
            "done"
        ]
    );
    let tool_result = events.iter().find(|(n, _)| n == "tool_result").unwrap();
    assert_eq!(tool_result.1["name"], "add_note");
    assert_eq!(tool_result.1["is_error"], false);
    let effects = events.iter().find(|(n, _)| n == "effects").unwrap();
    assert_eq!(effects.1["effects"], json!({"refresh": ["notes"]}));
    assert_eq!(events.last().unwrap().1["end"], "answered");
    let reply = tokens(&events);
    assert_eq!(reply, "Saving that.\n\nSaved: buy milk.");
    assert_eq!(
        server.history(&id).await,
        [
            ("user".to_owned(), "remember to buy milk".to_owned()),
            ("assistant".to_owned(), reply)
        ]
    );
    let notes: Value = server
        .client
        .get(server.url("/api/notes"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(notes["notes"][0]["text"], "buy milk");
    let list: Value = server
        .client
        .get(server.url("/api/conversations"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list[0]["id"], json!(id));
    assert_eq!(list[0]["preview"], "remember to buy milk");
    server.stop().await;
}

#[tokio::test]
async fn without_a_model_the_assistant_says_how_to_plug_one_in() {
    let model = bridle::backends::model_for(&bridle::config::BackendChoice::None)
        .await
        .unwrap()
        .0;
    let server = TestServer::start(model, AppOptions::default()).await;
    let id = server.new_conversation().await;
    let events = server.say(&id, "hello?").await;
    let reply = tokens(&events);
    assert!(
        reply.starts_with("My brain isn't plugged in yet"),
        "{reply}"
    );
    assert!(reply.contains("OPENAI_BASE_URL") && reply.contains("BEDROCK_MODEL_ID"));
    assert!(!events.iter().any(|(n, _)| n == "error"));
    server.stop().await;
}

/// Post a raw body; return the status and the JSON error body.
async fn post_raw(server: &TestServer, path: &str, body: Vec<u8>, json: bool) -> (u16, Value) {
    let mut req = server.client.post(server.url(path)).body(body);
    if json {
        req = req.header("content-type", "application/json");
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn bad_input_gets_a_clear_json_error_and_starts_no_turn() {
    let model = Arc::new(ScriptedModel::new([]));
    let server = TestServer::start(
        model.clone(),
        AppOptions {
            max_message_chars: 100,
            ..AppOptions::default()
        },
    )
    .await;
    let id = server.new_conversation().await;
    let path = format!("/api/conversations/{id}/messages");

    let (status, body) = post_raw(&server, &path, br#"{"text": "   "}"#.to_vec(), true).await;
    assert_eq!(
        (status, body["error"].as_str().unwrap()),
        (400, "The message text is empty.")
    );

    let long = json!({"text": "x".repeat(101)}).to_string().into_bytes();
    let (status, body) = post_raw(&server, &path, long, true).await;
    assert_eq!(status, 413);
    assert_eq!(body["limit"], 100);
    assert!(body["error"].as_str().unwrap().contains("the limit is 100"));

    let huge = json!({"text": "x".repeat(70_000)}).to_string().into_bytes();
    let (status, body) = post_raw(&server, &path, huge, true).await;
    assert_eq!(status, 413);
    assert_eq!(body["limit"], 65_536);

    let (status, body) = post_raw(&server, &path, b"{\"text\": ".to_vec(), true).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("The body is not valid JSON")
    );

    let (status, body) = post_raw(&server, &path, br#"{"txt": "hi"}"#.to_vec(), true).await;
    assert_eq!(status, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("Expected a body like")
    );

    let (status, _) = post_raw(&server, &path, br#"{"text": "hi"}"#.to_vec(), false).await;
    assert_eq!(status, 415);

    let bad_id = json!({"text": "hi", "client_message_id": "no spaces please"});
    let (status, _) = post_raw(&server, &path, bad_id.to_string().into_bytes(), true).await;
    assert_eq!(status, 400);

    let (status, body) = post_raw(
        &server,
        "/api/conversations/does-not-exist/messages",
        br#"{"text": "hi"}"#.to_vec(),
        true,
    )
    .await;
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("does-not-exist"));
    let res = server
        .client
        .get(server.url("/api/conversations/nope/messages"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);

    assert!(
        model.requests().is_empty(),
        "no bad request reached the model"
    );
    assert!(server.history(&id).await.is_empty());
    server.stop().await;
}

#[tokio::test]
async fn the_same_client_message_id_is_answered_once() {
    let model = Arc::new(ScriptedModel::new([
        Reply::text("Once."),
        Reply::text("Twice?"),
    ]));
    let server = TestServer::start(model.clone(), AppOptions::default()).await;
    let id = server.new_conversation().await;
    let path = format!("/api/conversations/{id}/messages");
    let body = json!({"text": "hi", "client_message_id": "msg-1"})
        .to_string()
        .into_bytes();
    let res = server
        .client
        .post(server.url(&path))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(tokens(&parse_sse(&res.text().await.unwrap())), "Once.");
    let (status, err) = post_raw(&server, &path, body.clone(), true).await;
    assert_eq!(status, 409);
    assert!(err["error"].as_str().unwrap().contains("already received"));
    assert_eq!(model.requests().len(), 1);
    assert_eq!(server.history(&id).await.len(), 2);
    // The same client id in another conversation is another message.
    let other = server.new_conversation().await;
    let res = server
        .client
        .post(server.url(&format!("/api/conversations/{other}/messages")))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(tokens(&parse_sse(&res.text().await.unwrap())), "Twice?");
    server.stop().await;
}

/// The real queue, whose next enqueue never finishes once `stall` is set (it says so on
/// `stalled`): a post waiting on it is cut short when its client hangs up.
struct StallingQueue {
    inner: Arc<dyn JobQueue>,
    stall: AtomicBool,
    stalled: tokio::sync::Notify,
}

#[async_trait::async_trait]
impl JobQueue for StallingQueue {
    async fn enqueue(&self, job: &TurnJob) -> Result<Enqueued, QueueError> {
        if self.stall.swap(false, Ordering::SeqCst) {
            self.stalled.notify_one();
            std::future::pending::<()>().await;
        }
        self.inner.enqueue(job).await
    }
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        self.inner.receive(max, wait).await
    }
    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        self.inner.ack(receipt).await
    }
    async fn release_after(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        self.inner.release_after(receipt, delay).await
    }
    async fn put_back(&self, receipt: &str) -> Result<(), QueueError> {
        self.inner.put_back(receipt).await
    }
}

#[tokio::test]
async fn a_send_cut_short_before_it_was_queued_can_be_sent_again() {
    let model = Arc::new(ScriptedModel::new([Reply::text("Answered once.")]));
    let mut app = build_app(model.clone(), AppOptions::default()).unwrap();
    let queue = Arc::new(StallingQueue {
        inner: app.queue.clone(),
        stall: AtomicBool::new(true),
        stalled: tokio::sync::Notify::new(),
    });
    app.queue = queue.clone();
    let server = TestServer::serve(app).await;
    let id = server.new_conversation().await;
    let url = server.url(&format!("/api/conversations/{id}/messages"));
    let body = json!({"text": "hi", "client_message_id": "m-1"});
    let first = tokio::spawn({
        let (client, url, body) = (server.client.clone(), url.clone(), body.clone());
        async move { client.post(url).json(&body).send().await }
    });
    // The post is waiting on the queue; its client hangs up, and the server drops the post.
    queue.stalled.notified().await;
    first.abort();
    let _ = first.await;
    // The same message sent again is received, queued and answered: the post cut short left
    // nothing behind that takes it for a duplicate.
    let mut again = None;
    for _ in 0..100 {
        let res = server.client.post(&url).json(&body).send().await.unwrap();
        if res.status() != 409 {
            again = Some(res);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let again = again.expect("the message is taken again once its first post is gone");
    assert_eq!(again.status(), 200);
    assert_eq!(
        tokens(&parse_sse(&again.text().await.unwrap())),
        "Answered once."
    );
    assert_eq!(model.requests().len(), 1);
    assert_eq!(server.history(&id).await.len(), 2);
    // And it is a duplicate now that it was queued.
    let res = server.client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 409);
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_disconnects_does_not_abort_the_turn() {
    let mut slow = Reply::new();
    for word in [
        "This ", "answer ", "keeps ", "going ", "after ", "you ", "leave.",
    ] {
        slow = slow.say(word).then_wait(Duration::from_millis(40));
    }
    let server = scripted(vec![slow.stop(StopReason::EndTurn)]).await;
    let id = server.new_conversation().await;
    let mut res = server
        .client
        .post(server.url(&format!("/api/conversations/{id}/messages")))
        .json(&json!({"text": "tell me something"}))
        .send()
        .await
        .unwrap();
    // Read until the first token arrives, then hang up.
    let mut seen = String::new();
    while !seen.contains("event: token") {
        let chunk = res.chunk().await.unwrap().expect("the stream is open");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    drop(res);
    let mut history = Vec::new();
    for _ in 0..100 {
        history = server.history(&id).await;
        if history.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        history.get(1).map(|(_, t)| t.as_str()),
        Some("This answer keeps going after you leave.")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn messages_in_one_conversation_are_answered_in_order_and_conversations_run_in_parallel() {
    let model = EchoModel::new(Duration::from_millis(150));
    let server = Arc::new(TestServer::start(model.clone(), AppOptions::default()).await);
    let a = server.new_conversation().await;
    let b = server.new_conversation().await;
    let mut posts = Vec::new();
    for (conv, texts) in [
        (a.clone(), ["a1", "a2", "a3"]),
        (b.clone(), ["b1", "b2", "b3"]),
    ] {
        for text in texts {
            let server = server.clone();
            let conv = conv.clone();
            posts.push(tokio::spawn(async move {
                let events = server.say(&conv, text).await;
                (text, tokens(&events))
            }));
            // Posted in this order, while earlier turns are still running.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    for p in posts {
        let (text, reply) = p.await.unwrap();
        assert_eq!(
            reply,
            format!("echo: {text}"),
            "each stream carries its own answer"
        );
    }
    for (conv, prefix) in [(&a, "a"), (&b, "b")] {
        let history: Vec<String> = server
            .history(conv)
            .await
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        assert_eq!(
            history,
            [1, 2, 3]
                .iter()
                .flat_map(|i| [format!("{prefix}{i}"), format!("echo: {prefix}{i}")])
                .collect::<Vec<_>>(),
            "answered in order, never interleaved"
        );
    }
    assert_eq!(
        model.max_running_in_one_conversation.load(Ordering::SeqCst),
        1
    );
    assert_eq!(
        model.max_running.load(Ordering::SeqCst),
        2,
        "the two conversations overlap"
    );
    Arc::try_unwrap(server).unwrap().stop().await;
}

#[tokio::test]
async fn a_job_queued_before_a_restart_is_answered_after_it() {
    let dir = tempfile::Builder::new()
        .prefix("bridle-restart-")
        .tempdir()
        .unwrap();
    let db = dir.path().join("bridle.db");
    let options = || AppOptions {
        db: Db::File(db.clone()),
        ..AppOptions::default()
    };
    // First life: a conversation exists and a message is queued, but the process dies before
    // any worker runs it.
    let conversation = {
        let server = TestServer::start(Arc::new(ScriptedModel::new([])), options()).await;
        let id = server.new_conversation().await;
        server.stop().await;
        let app = build_app(Arc::new(ScriptedModel::new([])), options()).unwrap();
        let job = TurnJob {
            addressed_to: None,
            trace_context: Default::default(),
            channel: "web".into(),
            message_id: "m-1".into(),
            conversation_key: id.clone(),
            external_user_id: "local".into(),
            text: "are you still there?".into(),
            button_id: None,
            media: vec![],
            received_at_ms: 0,
        };
        app.queue.enqueue(&job).await.unwrap();
        drop(app);
        id
    };
    // Second life: the worker picks the job up.
    let server = TestServer::start(
        Arc::new(ScriptedModel::new([Reply::text("Yes, still here.")])),
        options(),
    )
    .await;
    let mut history = Vec::new();
    for _ in 0..100 {
        history = server.history(&conversation).await;
        if history.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        history,
        [
            ("user".to_owned(), "are you still there?".to_owned()),
            ("assistant".to_owned(), "Yes, still here.".to_owned())
        ]
    );
    server.stop().await;
}

#[tokio::test]
async fn the_page_and_its_assets_are_served() {
    let server = scripted(vec![]).await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
    ] {
        let res = server.client.get(server.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 200, "{path}");
        assert!(
            res.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind),
            "{path}"
        );
    }
    let res = server.client.get(server.url("/nope")).send().await.unwrap();
    assert_eq!(res.status(), 404);
    server.stop().await;
}

#[tokio::test]
async fn a_long_history_comes_a_page_at_a_time_newest_first_and_bad_pages_get_a_sentence() {
    let server = scripted(vec![]).await;
    let id = server.new_conversation().await;
    server.seed_history(&id, 250).await;
    let page = |query: &'static str| {
        let url = server.url(&format!("/api/conversations/{id}/messages{query}"));
        async move {
            let res = reqwest::get(url).await.unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let positions = |body: &Value| -> Vec<u64> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["position"].as_u64().unwrap())
            .collect()
    };

    let (status, newest) = page("").await;
    assert_eq!(status, 200);
    assert_eq!(positions(&newest), (150..250).collect::<Vec<_>>());
    assert_eq!(newest["earlier"], true);
    assert_eq!(newest["messages"][99]["text"], "entry 249");

    let (_, before) = page("?before=150").await;
    assert_eq!(positions(&before), (50..150).collect::<Vec<_>>());
    assert_eq!(before["earlier"], true);
    let (_, oldest) = page("?before=50&limit=80").await;
    assert_eq!(positions(&oldest), (0..50).collect::<Vec<_>>());
    assert_eq!(oldest["earlier"], false);
    let (_, few) = page("?limit=3").await;
    assert_eq!(positions(&few), [247, 248, 249]);

    for (query, says) in [
        ("?limit=0", "limit must be from 1 to 500."),
        ("?limit=501", "limit must be from 1 to 500."),
    ] {
        let (status, body) = page(query).await;
        assert_eq!((status, body["error"].as_str().unwrap()), (400, says));
    }
    for query in ["?limit=lots", "?before=-1", "?page=2"] {
        let (status, body) = page(query).await;
        assert_eq!(status, 400, "{query}");
        let said = body["error"].as_str().unwrap();
        assert!(said.starts_with("Ask for history as ?before="), "{said}");
    }
}

/// A user whose newest conversations are chats on a messaging app (answered there, not
/// listed here) still gets their web conversations on the first page, not an empty one.
#[tokio::test]
async fn web_conversations_behind_newer_chats_are_on_the_first_page() {
    let server = scripted(vec![]).await;
    let web = [
        server.new_conversation().await,
        server.new_conversation().await,
    ];
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for n in 0..5 {
        let mut chat = transcript::Conversation::new(
            format!("telegram:c{n}@local"),
            "local",
            "telegram",
            "chat",
        );
        chat.created_at_ms = now + 60_000 + n;
        server.app.store.create_conversation(&chat).await.unwrap();
    }
    let res = reqwest::get(server.url("/api/conversations?limit=2"))
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let page: Value = res.json().await.unwrap();
    let mut ids: Vec<&str> = page
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut expected: Vec<&str> = web.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(ids, expected);
}

#[tokio::test]
async fn the_conversation_list_comes_a_page_at_a_time_with_a_link_to_the_next() {
    let server = scripted(vec![]).await;
    let mut made = Vec::new();
    for _ in 0..6 {
        made.push(server.new_conversation().await);
    }
    let get = |path: String| {
        let url = server.url(&path);
        async move { reqwest::get(url).await.unwrap() }
    };
    let next_of = |res: &reqwest::Response| -> Option<String> {
        let link = res.headers().get("link")?.to_str().unwrap().to_owned();
        let url = link.strip_prefix('<')?.split_once(">; rel=\"next\"")?.0;
        Some(url.to_owned())
    };
    let mut seen = Vec::new();
    let mut path = "/api/conversations?limit=2".to_owned();
    let mut pages = 0;
    loop {
        let res = get(path.clone()).await;
        assert_eq!(res.status(), 200);
        let next = next_of(&res);
        let page: Value = res.json().await.unwrap();
        let ids: Vec<String> = page
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        seen.extend(ids);
        pages += 1;
        match next {
            Some(next) => path = next,
            None => break,
        }
    }
    assert_eq!(pages, 3, "2 + 2 + 2, and no link after the last");
    let mut expected = made.clone();
    expected.sort();
    let mut got = seen.clone();
    got.sort();
    assert_eq!(got, expected, "every conversation once: {seen:?}");
    let all: Value = get("/api/conversations".into()).await.json().await.unwrap();
    let newest_first: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(newest_first, seen, "the pages read as the whole list does");

    for query in [
        "?limit=0",
        "?limit=201",
        "?after_ms=5",
        "?after_id=x",
        "?sort=old",
    ] {
        let res = get(format!("/api/conversations{query}")).await;
        assert_eq!(res.status(), 400, "{query}");
        let said: Value = res.json().await.unwrap();
        let said = said["error"].as_str().unwrap();
        assert!(
            said.starts_with("Ask for conversations as ?after_ms="),
            "{said}"
        );
    }
}
