//! The Telegram sender against a local fake Bot API that records every call.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use channels::telegram::TelegramSender;
use channels::{Button, Delivered, Outgoing, SendError, Sender};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod support;

const TOKEN: &str = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw";

/// One recorded call: the path (token included), the headers, the JSON body.
#[derive(Debug, Clone)]
struct Call {
    path: String,
    headers: HeaderMap,
    body: Value,
}

/// A scripted answer: status, JSON body, optional `Retry-After` header.
type Answer = (u16, Value, Option<&'static str>);

#[derive(Clone, Default)]
struct FakeBotApi {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Answers for the next calls, in order; `{"ok": true}` when empty.
    script: Arc<Mutex<VecDeque<Answer>>>,
    delay: Arc<Mutex<Option<Duration>>>,
}

impl FakeBotApi {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }
    fn answer(&self, status: u16, body: Value, retry_after: Option<&'static str>) {
        self.script
            .lock()
            .unwrap()
            .push_back((status, body, retry_after));
    }
}

async fn receive(
    State(api): State<FakeBotApi>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let delay = *api.delay.lock().unwrap();
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    api.calls.lock().unwrap().push(Call {
        path: format!("/{path}"),
        headers,
        body: serde_json::from_slice(&body).unwrap(),
    });
    let (status, body, retry_after) = api.script.lock().unwrap().pop_front().unwrap_or((
        200,
        json!({"ok": true, "result": {"message_id": 1}}),
        None,
    ));
    let mut h = HeaderMap::new();
    if let Some(r) = retry_after {
        h.insert("retry-after", r.parse().unwrap());
    }
    (StatusCode::from_u16(status).unwrap(), h, axum::Json(body))
}

async fn fake_api() -> (FakeBotApi, String) {
    let api = FakeBotApi::default();
    let app = Router::new()
        .route("/{*path}", post(receive))
        .with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (api, base)
}

fn sender(base: &str) -> TelegramSender {
    TelegramSender::new(reqwest::Client::new(), base, TOKEN).unwrap()
}

fn reply(text: &str) -> Outgoing {
    Outgoing {
        conversation_key: "111222333".into(),
        external_user_id: "111222333".into(),
        in_reply_to: "111222333:4021".into(),
        text: text.into(),
        ..Outgoing::default()
    }
}

fn buttons() -> Vec<Button> {
    vec![
        Button {
            id: "confirm:7f3a".into(),
            title: "Yes, book it".into(),
        },
        Button {
            id: "cancel:7f3a".into(),
            title: "No".into(),
        },
    ]
}

#[tokio::test]
async fn a_reply_is_one_send_message_with_the_token_in_the_path() {
    let (api, base) = fake_api().await;
    let delivered = sender(&format!("{base}/"))
        .send(&reply("Done! See **Thursday** at 10:00."))
        .await
        .unwrap();
    assert_eq!(delivered.pieces, ["Done! See **Thursday** at 10:00."]);
    assert!(!delivered.reacted);
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].path, format!("/bot{TOKEN}/sendMessage"));
    assert!(calls[0].headers.get("authorization").is_none());
    assert_eq!(
        calls[0].headers["content-type"].to_str().unwrap(),
        "application/json"
    );
    assert_eq!(
        calls[0].body,
        json!({
            "chat_id": 111222333,
            "text": "Done\\! See *Thursday* at 10:00\\.",
            "parse_mode": "MarkdownV2",
            "link_preview_options": {"is_disabled": true},
        })
    );
}

/// A forum topic's conversation (`chat/topic`) is answered in that topic, and its reaction
/// goes to the message in the chat.
#[tokio::test]
async fn a_forum_topics_reply_goes_to_that_topic() {
    let (api, base) = fake_api().await;
    let out = Outgoing {
        conversation_key: "-1001987654321/42".into(),
        in_reply_to: "-1001987654321:9001".into(),
        reaction: Some("👍".into()),
        ..reply("Done.")
    };
    sender(&base).send(&out).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].body["chat_id"], json!(-1001987654321_i64));
    assert_eq!(calls[0].body["message_id"], json!(9001));
    assert_eq!(
        calls[1].body,
        json!({
            "chat_id": -1001987654321_i64,
            "message_thread_id": 42,
            "text": "Done\\.",
            "parse_mode": "MarkdownV2",
            "link_preview_options": {"is_disabled": true},
        })
    );
}

#[tokio::test]
async fn long_replies_go_out_in_order_with_buttons_on_the_last_piece_only() {
    let (api, base) = fake_api().await;
    let first = "one. ".repeat(700); // 3,500 plain characters, about 4,200 escaped
    let second = "two ".repeat(1_000);
    let text = format!("{}\n\n{}\n\nShall I book it?", first.trim(), second.trim());
    let out = Outgoing {
        buttons: buttons(),
        ..reply(&text)
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    let calls = api.calls();
    assert_eq!(calls.len(), delivered.pieces.len());
    assert!(calls.len() >= 3, "{} calls", calls.len());
    let words = |s: &str| s.split_whitespace().collect::<String>();
    assert_eq!(words(&delivered.pieces.concat()), words(&text));
    let last = calls.len() - 1;
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(call.path, format!("/bot{TOKEN}/sendMessage"));
        let sent = call.body["text"].as_str().unwrap();
        assert!(
            sent.encode_utf16().count() <= 4_096,
            "piece {i} is {} long",
            sent.len()
        );
        assert_eq!(
            call.body.get("reply_markup").is_some(),
            i == last,
            "piece {i}"
        );
    }
    assert!(
        calls[last].body["text"]
            .as_str()
            .unwrap()
            .ends_with("\n\nShall I book it?")
    );
    assert_eq!(
        calls[last].body["reply_markup"],
        json!({"inline_keyboard": [
            [{"text": "Yes, book it", "callback_data": "confirm:7f3a"}],
            [{"text": "No", "callback_data": "cancel:7f3a"}],
        ]})
    );
}

#[tokio::test]
async fn the_reaction_goes_first_on_the_telegram_message() {
    let (api, base) = fake_api().await;
    let out = Outgoing {
        reaction: Some("👍\u{fe0f}".into()),
        ..reply("On it.")
    };
    let s = sender(&base);
    assert!(s.has_reactions());
    assert_eq!(s.max_chars(), 4_096);
    let delivered = s.send(&out).await.unwrap();
    assert!(delivered.reacted);
    let calls = api.calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].path, format!("/bot{TOKEN}/setMessageReaction"));
    assert_eq!(
        calls[0].body,
        json!({"chat_id": 111222333, "message_id": 4021,
               "reaction": [{"type": "emoji", "emoji": "👍"}]})
    );
    assert_eq!(calls[1].path, format!("/bot{TOKEN}/sendMessage"));
}

#[tokio::test]
async fn a_reaction_alone_sends_no_message() {
    let (api, base) = fake_api().await;
    let out = Outgoing {
        reaction: Some("👌".into()),
        ..reply("")
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    assert!(delivered.reacted && delivered.pieces.is_empty());
    assert_eq!(api.calls().len(), 1);
}

#[tokio::test]
async fn no_reaction_call_without_a_telegram_message_id() {
    let (api, base) = fake_api().await;
    // The inbound message id is the update_id: not something a reaction can target.
    let out = Outgoing {
        in_reply_to: "845120331".into(),
        reaction: Some("👍".into()),
        ..reply("Hi.")
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    assert!(!delivered.reacted);
    let calls = api.calls();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].path.ends_with("/sendMessage"));
}

#[tokio::test]
async fn a_refused_reaction_does_not_stop_the_reply() {
    let (api, base) = fake_api().await;
    api.answer(
        400,
        json!({"ok": false, "error_code": 400, "description": "Bad Request: REACTION_INVALID"}),
        None,
    );
    let out = Outgoing {
        reaction: Some("🦀".into()),
        ..reply("Hi.")
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    assert!(!delivered.reacted);
    assert_eq!(delivered.pieces, ["Hi."]);
    assert_eq!(api.calls().len(), 2);
}

#[tokio::test]
async fn a_rate_limited_reaction_fails_before_any_text() {
    let (api, base) = fake_api().await;
    api.answer(
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3",
               "parameters": {"retry_after": 3}}),
        None,
    );
    let out = Outgoing {
        reaction: Some("👍".into()),
        ..reply("Hi.")
    };
    let err = sender(&base).send(&out).await.unwrap_err();
    assert!(
        matches!(err, SendError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(3))
    );
    assert_eq!(api.calls().len(), 1);
}

#[tokio::test]
async fn errors_say_whether_to_retry() {
    let (api, base) = fake_api().await;
    let s = sender(&base);
    api.answer(
        429,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 5",
               "parameters": {"retry_after": 5}}),
        None,
    );
    let err = s.send(&reply("Hi.")).await.unwrap_err();
    assert!(
        matches!(err, SendError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(5))
            && err.is_retryable()
    );
    // Without Telegram's own field, the Retry-After header is used.
    api.answer(429, json!({"ok": false}), Some("9"));
    let err = s.send(&reply("Hi.")).await.unwrap_err();
    assert!(
        matches!(err, SendError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(9))
    );

    api.answer(
        500,
        json!({"ok": false, "error_code": 500, "description": "Internal Server Error"}),
        None,
    );
    let err = s.send(&reply("Hi.")).await.unwrap_err();
    assert!(matches!(err, SendError::Retryable { status: 500 }) && err.is_retryable());

    api.answer(
        400,
        json!({"ok": false, "error_code": 400,
               "description": "Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\\'"}),
        None,
    );
    let err = s.send(&reply("Hi.")).await.unwrap_err();
    let SendError::Rejected {
        status: 400,
        reason,
    } = &err
    else {
        panic!("400 is a rejection: {err:?}")
    };
    assert!(reason.contains("can't parse entities") && !err.is_retryable());

    api.answer(
        403,
        json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"}),
        None,
    );
    let err = s.send(&reply("Hi.")).await.unwrap_err();
    assert!(
        matches!(&err, SendError::Rejected { status: 403, reason } if reason.contains("blocked"))
    );

    api.answer(
        401,
        json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
        None,
    );
    let err = s.send(&reply("Hi.")).await.unwrap_err();
    assert!(
        matches!(&err, SendError::Unauthorized { reason } if reason.contains("TELEGRAM_BOT_TOKEN"))
            && err.is_retryable(),
        "{err:?}"
    );
    for e in [err.to_string(), format!("{err:?}")] {
        assert!(!e.contains(TOKEN), "{e}");
    }
}

#[tokio::test]
async fn a_failed_piece_stops_the_reply() {
    let (api, base) = fake_api().await;
    api.answer(200, json!({"ok": true, "result": {}}), None);
    api.answer(502, json!({"ok": false}), None);
    let text = format!("{}\n\nsecond", "x ".repeat(3_000).trim());
    let err = sender(&base).send(&reply(&text)).await.unwrap_err();
    assert!(matches!(err, SendError::Retryable { status: 502 }));
    assert_eq!(api.calls().len(), 2);
}

/// Every error chain a caller might log, flattened.
fn all_text(err: &SendError) -> String {
    let mut out = format!("{err} | {err:?}");
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        out.push_str(&format!(" | {s} | {s:?}"));
        source = s.source();
    }
    out
}

#[tokio::test]
async fn transport_errors_never_carry_the_token() {
    // Nothing listens on this port once the listener is dropped.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = sender(&base).send(&reply("Hi.")).await.unwrap_err();
    assert!(matches!(err, SendError::Transport(_)) && err.is_retryable());
    let text = all_text(&err);
    assert!(
        !text.contains(TOKEN) && !text.contains("AAHdqTcv"),
        "{text}"
    );
}

#[tokio::test]
async fn every_call_has_a_deadline() {
    let (api, base) = fake_api().await;
    *api.delay.lock().unwrap() = Some(Duration::from_secs(5));
    let s = sender(&base).with_timeout(Duration::from_millis(200));
    let err = s.send(&reply("Hi.")).await.unwrap_err();
    assert!(matches!(err, SendError::Transport(_)) && err.is_retryable());
    assert!(!all_text(&err).contains(TOKEN));
}

#[tokio::test]
async fn a_reply_to_a_button_press_answers_the_callback_query_first() {
    let (api, base) = fake_api().await;
    let press = Outgoing {
        in_reply_to: "111222333:4022:4382bfdwdsb323b2d9".into(),
        ..reply("Booked.")
    };
    sender(&base).send(&press).await.unwrap();
    let calls = api.calls();
    let paths: Vec<&str> = calls.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            format!("/bot{TOKEN}/answerCallbackQuery"),
            format!("/bot{TOKEN}/sendMessage")
        ]
    );
    assert_eq!(
        calls[0].body,
        json!({"callback_query_id": "4382bfdwdsb323b2d9"})
    );
    // A refused answer (the press is too old) does not cost the user the reply.
    api.answer(
        400,
        json!({"ok": false, "error_code": 400,
        "description": "Bad Request: query is too old"}),
        None,
    );
    let delivered = sender(&base).send(&press).await.unwrap();
    assert_eq!(delivered.pieces, ["Booked."]);
}

/// A reply to a press cut off part way (the callback answered, the first piece out, then a 429)
/// is sent on from the piece that failed when `send_from` is given what went out: the callback
/// is not answered again, the first piece not sent twice.
#[tokio::test]
async fn a_reply_cut_off_part_way_is_sent_on_from_the_piece_that_failed() {
    let (api, base) = fake_api().await;
    let text = format!("{}\n\nShall I book it?", "two ".repeat(1_100).trim());
    let out = Outgoing {
        in_reply_to: "111222333:4022:4382bfdwdsb323b2d9".into(),
        buttons: buttons(),
        ..reply(&text)
    };
    let ok = json!({"ok": true, "result": true});
    for _ in 0..2 {
        api.answer(200, ok.clone(), None);
    }
    api.answer(
        429,
        json!({"ok": false, "error_code": 429,
               "description": "Too Many Requests: retry after 1", "parameters": {"retry_after": 1}}),
        Some("1"),
    );
    let mut sent = Delivered::default();
    let err = sender(&base).send_from(&out, &mut sent).await.unwrap_err();
    assert!(matches!(err, SendError::RateLimited { .. }), "{err}");
    assert_eq!(sent.pieces.len(), 1);

    sender(&base).send_from(&out, &mut sent).await.unwrap();
    assert_eq!(sent.pieces.len(), 2);
    assert!(sent.pieces[1].ends_with("two\n\nShall I book it?"));
    let paths: Vec<String> = api
        .calls()
        .iter()
        .map(|c| c.path.rsplit('/').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        paths,
        [
            "answerCallbackQuery",
            "sendMessage",
            "sendMessage",
            "sendMessage"
        ],
        "the failed piece again, nothing before it"
    );
    let calls = api.calls();
    assert_eq!(calls[2].body, calls[3].body, "the same piece, sent again");
    assert!(
        calls[3].body["reply_markup"].is_object(),
        "buttons on the last"
    );
    assert!(calls[1].body.get("reply_markup").is_none());
}

/// Telegram took the message (2xx) but its answer was cut off on the way back: the reply is
/// taken as sent, not sent again. Cut off after a refusal's status, it is a failure to retry.
#[tokio::test]
async fn an_answer_cut_off_after_a_2xx_is_a_message_sent_once() {
    let (base, calls) = support::answer_cut_off(200).await;
    let delivered = sender(&base).send(&reply("Saved.")).await.unwrap();
    assert_eq!(delivered.pieces, ["Saved."]);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);

    let (base, calls) = support::answer_cut_off(502).await;
    let err = sender(&base).send(&reply("Saved.")).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}
