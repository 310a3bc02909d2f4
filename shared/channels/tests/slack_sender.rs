//! The Slack sender against a local fake Web API that records every call.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use channels::slack::SlackSender;
use channels::{Button, Delivered, Outgoing, SendError, Sender};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod support;

const TOKEN: &str = "xoxb-0000-test-token";

/// One recorded Web API call.
#[derive(Debug, Clone)]
struct Call {
    method: String,
    authorization: String,
    content_type: String,
    body: Value,
}

/// A scripted answer: status, `Retry-After`, body.
type Answer = (u16, Option<&'static str>, String);
type Script = Vec<(String, VecDeque<Answer>)>;

#[derive(Clone, Default)]
struct FakeSlack {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Answers to give, in order, per method; `{"ok": true}` when none is left.
    script: Arc<Mutex<Script>>,
}

impl FakeSlack {
    fn answer(&self, method: &str, status: u16, retry_after: Option<&'static str>, body: &str) {
        let mut script = self.script.lock().unwrap();
        let answer = (status, retry_after, body.to_owned());
        match script.iter_mut().find(|(m, _)| m == method) {
            Some((_, q)) => q.push_back(answer),
            None => script.push((method.into(), VecDeque::from([answer]))),
        }
    }

    fn slack_error(&self, method: &str, code: &str) {
        self.answer(
            method,
            200,
            None,
            &json!({"ok": false, "error": code}).to_string(),
        );
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn methods(&self) -> Vec<String> {
        self.calls().into_iter().map(|c| c.method).collect()
    }
}

async fn api(
    State(fake): State<FakeSlack>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    fake.calls.lock().unwrap().push(Call {
        method: method.clone(),
        authorization: header("authorization"),
        content_type: header("content-type"),
        body: serde_json::from_slice(&body).unwrap(),
    });
    let scripted = fake
        .script
        .lock()
        .unwrap()
        .iter_mut()
        .find(|(m, _)| *m == method)
        .and_then(|(_, q)| q.pop_front());
    let (status, retry_after, body) = scripted.unwrap_or((
        200,
        None,
        json!({"ok": true, "channel": "C1", "ts": "1700000999.000100"}).to_string(),
    ));
    let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", secs.parse().unwrap());
    }
    response
}

async fn fake_slack() -> (FakeSlack, SlackSender) {
    let fake = FakeSlack::default();
    let app = Router::new()
        .route("/api/{method}", post(api))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (fake, SlackSender::new(reqwest::Client::new(), base, TOKEN))
}

fn reply(text: &str) -> Outgoing {
    Outgoing {
        conversation_key: "D0PNCRP9N".into(),
        external_user_id: "U0G9QF9C6".into(),
        in_reply_to: "D0PNCRP9N:1355517523.000005".into(),
        text: text.into(),
        ..Outgoing::default()
    }
}

fn yes_no() -> Vec<Button> {
    vec![
        Button {
            id: "confirm:7f3a".into(),
            title: "Yes".into(),
        },
        Button {
            id: "cancel:7f3a".into(),
            title: "No".into(),
        },
    ]
}

#[tokio::test]
async fn a_reply_is_posted_with_the_bot_token_as_mrkdwn() {
    let (fake, sender) = fake_slack().await;
    assert_eq!(sender.max_chars(), 3_000);
    assert!(sender.has_reactions());
    let delivered = sender
        .send(&reply(
            "**Done** & see [the doc](https://example.com/d?a=1&b=2).",
        ))
        .await
        .unwrap();
    assert_eq!(
        delivered.pieces,
        ["**Done** & see [the doc](https://example.com/d?a=1&b=2)."]
    );
    assert!(!delivered.reacted);
    let calls = fake.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].method, "chat.postMessage");
    assert_eq!(calls[0].authorization, format!("Bearer {TOKEN}"));
    assert_eq!(calls[0].content_type, "application/json; charset=utf-8");
    assert_eq!(
        calls[0].body,
        json!({
            "channel": "D0PNCRP9N",
            "text": "*Done* &amp; see the doc.\n<https://example.com/d?a=1&amp;b=2>",
            "unfurl_links": false,
            "parse": "none",
            "link_names": false,
        })
    );
}

#[tokio::test]
async fn a_long_reply_goes_out_in_order_in_its_thread_with_buttons_on_the_last_piece() {
    let (fake, sender) = fake_slack().await;
    let para = |w: &str| format!("{w} ").repeat(748).trim_end().to_owned(); // 2,991 chars
    let text = format!("{}\n\n{}\n\nShall I go ahead?", para("one"), para("two"));
    let out = Outgoing {
        conversation_key: "C0LAN2Q65:1515449438.000011".into(),
        buttons: yes_no(),
        ..reply(&text)
    };
    let delivered = sender.send(&out).await.unwrap();
    assert_eq!(delivered.pieces.len(), 3);
    assert_eq!(delivered.pieces[2], "Shall I go ahead?");
    let calls = fake.calls();
    assert_eq!(fake.methods(), ["chat.postMessage"; 3]);
    for (i, call) in calls.iter().enumerate() {
        assert_eq!(call.body["channel"], "C0LAN2Q65");
        assert_eq!(call.body["thread_ts"], "1515449438.000011");
        assert_eq!(call.body["text"], delivered.pieces[i].as_str());
        assert!(call.body["text"].as_str().unwrap().chars().count() <= 3_000);
    }
    assert!(calls[0].body["text"].as_str().unwrap().starts_with("one "));
    assert!(calls[1].body["text"].as_str().unwrap().starts_with("two "));
    assert!(calls[0].body.get("blocks").is_none() && calls[1].body.get("blocks").is_none());
    assert_eq!(
        calls[2].body["blocks"],
        json!([
            {"type": "section", "text": {"type": "mrkdwn", "text": "Shall I go ahead?", "verbatim": true}},
            {"type": "actions", "elements": [
                {"type": "button", "text": {"type": "plain_text", "text": "Yes"},
                 "action_id": "confirm:7f3a", "value": "confirm:7f3a"},
                {"type": "button", "text": {"type": "plain_text", "text": "No"},
                 "action_id": "cancel:7f3a", "value": "cancel:7f3a"},
            ]},
        ])
    );
}

#[tokio::test]
async fn the_reaction_goes_first_on_the_users_message() {
    let (fake, sender) = fake_slack().await;
    let out = Outgoing {
        reaction: Some("👍".into()),
        ..reply("On it.")
    };
    let delivered = sender.send(&out).await.unwrap();
    assert!(delivered.reacted);
    let calls = fake.calls();
    assert_eq!(fake.methods(), ["reactions.add", "chat.postMessage"]);
    assert_eq!(calls[0].authorization, format!("Bearer {TOKEN}"));
    assert_eq!(
        calls[0].body,
        json!({"channel": "D0PNCRP9N", "timestamp": "1355517523.000005", "name": "thumbsup"})
    );
    // A reaction alone (no text) is fine too.
    let only = Outgoing {
        reaction: Some("✅".into()),
        ..reply("")
    };
    let delivered = sender.send(&only).await.unwrap();
    assert!(delivered.reacted && delivered.pieces.is_empty());
    assert_eq!(fake.calls()[2].body["name"], "white_check_mark");
    assert_eq!(fake.calls().len(), 3);
}

#[tokio::test]
async fn unknown_emoji_or_no_reaction_make_no_reaction_call() {
    let (fake, sender) = fake_slack().await;
    for reaction in [None, Some("🦀".to_owned())] {
        let out = Outgoing {
            reaction,
            ..reply("Hi")
        };
        assert!(!sender.send(&out).await.unwrap().reacted);
    }
    assert_eq!(fake.methods(), ["chat.postMessage"; 2]);
}

#[tokio::test]
async fn a_reaction_that_cannot_be_placed_does_not_stop_the_reply() {
    let (fake, sender) = fake_slack().await;
    let out = Outgoing {
        reaction: Some("🎉".into()),
        ..reply("Hi")
    };
    fake.slack_error("reactions.add", "message_not_found");
    let delivered = sender.send(&out).await.unwrap();
    assert!(!delivered.reacted && delivered.pieces == ["Hi"]);
    fake.slack_error("reactions.add", "already_reacted");
    assert!(sender.send(&out).await.unwrap().reacted);
    assert_eq!(
        fake.methods(),
        [
            "reactions.add",
            "chat.postMessage",
            "reactions.add",
            "chat.postMessage"
        ]
    );
    // A rate-limited reaction fails the send before any text goes out.
    fake.answer("reactions.add", 429, Some("12"), "");
    let err = sender.send(&out).await.unwrap_err();
    assert!(
        matches!(err, SendError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(12))
    );
    assert_eq!(fake.methods().len(), 5);
}

fn error_body(code: &str) -> String {
    json!({"ok": false, "error": code}).to_string()
}

#[tokio::test]
async fn refusals_say_whether_to_retry() {
    let (fake, sender) = fake_slack().await;
    type Expect = fn(&SendError) -> bool;
    let cases: [(u16, Option<&'static str>, String, Expect); 10] = [
        (
            429,
            Some("30"),
            String::new(),
            |e| matches!(e, SendError::RateLimited { retry_after: Some(d) } if *d == Duration::from_secs(30)),
        ),
        (200, None, error_body("ratelimited"), |e| {
            matches!(e, SendError::RateLimited { retry_after: None })
        }),
        (500, None, "oops".into(), |e| {
            matches!(e, SendError::Retryable { status: 500 })
        }),
        (503, None, String::new(), |e| {
            matches!(e, SendError::Retryable { status: 503 })
        }),
        (200, None, error_body("fatal_error"), |e| {
            matches!(e, SendError::Retryable { .. })
        }),
        (400, None, "bad".into(), |e| {
            matches!(e, SendError::Rejected { status: 400, .. })
        }),
        (403, None, "no".into(), |e| {
            matches!(e, SendError::Rejected { status: 403, .. })
        }),
        (
            200,
            None,
            error_body("invalid_auth"),
            |e| matches!(e, SendError::Unauthorized { reason } if reason.contains("invalid_auth")),
        ),
        (
            200,
            None,
            error_body("not_in_channel"),
            |e| matches!(e, SendError::Rejected { status: 403, reason } if reason == "not_in_channel"),
        ),
        (
            200,
            None,
            error_body("channel_not_found"),
            |e| matches!(e, SendError::Rejected { status: 404, reason } if reason == "channel_not_found"),
        ),
    ];
    for (status, retry_after, body, expect) in cases {
        fake.answer("chat.postMessage", status, retry_after, &body);
        let err = sender.send(&reply("Hi")).await.unwrap_err();
        assert!(expect(&err), "HTTP {status} {body}: {err:?}");
        assert!(!err.to_string().contains(TOKEN) && !format!("{err:?}").contains(TOKEN));
    }
}

#[tokio::test]
async fn a_failed_piece_stops_the_later_ones() {
    let (fake, sender) = fake_slack().await;
    let text = format!("{}\n\nsecond", "word ".repeat(700).trim_end());
    fake.answer("chat.postMessage", 500, None, "");
    let err = sender.send(&reply(&text)).await.unwrap_err();
    assert!(err.is_retryable());
    assert_eq!(fake.calls().len(), 1);
}

#[tokio::test]
async fn bad_conversation_keys_and_unreachable_apis_fail_cleanly() {
    let (fake, sender) = fake_slack().await;
    let out = Outgoing {
        conversation_key: ":1.2".into(),
        reaction: Some("👍".into()),
        ..reply("Hi")
    };
    assert!(matches!(
        sender.send(&out).await,
        Err(SendError::Rejected { status: 400, .. })
    ));
    assert!(fake.calls().is_empty(), "nothing is sent for a bad key");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = format!("http://{}/api", listener.local_addr().unwrap());
    drop(listener);
    let nowhere = SlackSender::new(reqwest::Client::new(), closed, TOKEN);
    let err = nowhere.send(&reply("Hi")).await.unwrap_err();
    assert!(matches!(err, SendError::Transport(_)) && err.is_retryable());
    assert!(!format!("{nowhere:?}").contains(TOKEN));
}

/// A reply cut off part way (the reaction and the first piece out, a 503 on the second) is sent
/// on from the piece that failed when `send_from` is given what went out.
#[tokio::test]
async fn a_reply_cut_off_part_way_is_sent_on_from_the_piece_that_failed() {
    let (fake, sender) = fake_slack().await;
    let para = |w: &str| format!("{w} ").repeat(748).trim_end().to_owned();
    let text = format!("{}\n\nShall I go ahead?", para("one"));
    let out = Outgoing {
        reaction: Some("👍".into()),
        buttons: yes_no(),
        ..reply(&text)
    };
    let ok = json!({"ok": true, "channel": "D0PNCRP9N", "ts": "1700000999.000100"}).to_string();
    fake.answer("chat.postMessage", 200, None, &ok);
    fake.answer("chat.postMessage", 503, None, "upstream down");
    let mut sent = Delivered::default();
    let err = sender.send_from(&out, &mut sent).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(sent.reacted);
    assert_eq!(sent.pieces, [para("one")]);

    sender.send_from(&out, &mut sent).await.unwrap();
    assert_eq!(sent.pieces, [para("one"), "Shall I go ahead?".into()]);
    assert_eq!(
        fake.methods(),
        [
            "reactions.add",
            "chat.postMessage",
            "chat.postMessage",
            "chat.postMessage"
        ]
    );
    let calls = fake.calls();
    assert_eq!(calls[3].body["text"], "Shall I go ahead?");
    assert!(calls[3].body["blocks"].is_array(), "buttons on the last");
}

/// Slack took the message (2xx) but its answer was cut off on the way back: the reply is taken
/// as sent, not sent again. Cut off after another status, it is a failure to retry.
#[tokio::test]
async fn an_answer_cut_off_after_a_2xx_is_a_message_sent_once() {
    let (base, calls) = support::answer_cut_off(200).await;
    let slack = SlackSender::new(reqwest::Client::new(), format!("{base}/api/"), TOKEN);
    let delivered = slack.send(&reply("Saved.")).await.unwrap();
    assert_eq!(delivered.pieces, ["Saved."]);
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);

    let (base, calls) = support::answer_cut_off(503).await;
    let slack = SlackSender::new(reqwest::Client::new(), format!("{base}/api/"), TOKEN);
    let err = slack.send(&reply("Saved.")).await.unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}
