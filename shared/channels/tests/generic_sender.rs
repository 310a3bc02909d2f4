//! The generic sender against a real local HTTP server that checks its signature.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use channels::generic::{GenericChannel, GenericSender};
use channels::{Button, Channel, Delivered, Outgoing, RawRequest, SendError, Sender};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Platform {
    got: Arc<Mutex<Vec<serde_json::Value>>>,
    answer: Arc<Mutex<u16>>,
    /// Answers for the next calls, before `answer`.
    script: Arc<Mutex<std::collections::VecDeque<u16>>>,
}

async fn receive(State(p): State<Platform>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_owned()))
        .collect();
    let req = RawRequest {
        method: "POST",
        path: "/callback",
        query: None,
        headers: &headers,
        body: &body,
        origin: None,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    if GenericChannel::new("cb-secret").verify(&req, now).is_err() {
        return StatusCode::UNAUTHORIZED;
    }
    p.got
        .lock()
        .unwrap()
        .push(serde_json::from_slice(&body).unwrap());
    let scripted = p.script.lock().unwrap().pop_front();
    StatusCode::from_u16(scripted.unwrap_or(*p.answer.lock().unwrap())).unwrap()
}

async fn platform() -> (Platform, String) {
    let p = Platform::default();
    *p.answer.lock().unwrap() = 200;
    let app = Router::new()
        .route("/callback", post(receive))
        .with_state(p.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/callback", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (p, url)
}

fn reply() -> Outgoing {
    Outgoing {
        conversation_key: "c-1".into(),
        external_user_id: "u-1".into(),
        in_reply_to: "m-1".into(),
        text: "Hello!".into(),
        ..Outgoing::default()
    }
}

#[tokio::test]
async fn replies_are_signed_and_delivered() {
    let (p, url) = platform().await;
    let sender = GenericSender::new(reqwest::Client::new(), url, "cb-secret");
    let delivered = sender.send(&reply()).await.unwrap();
    assert_eq!(delivered.pieces, ["Hello!"]);
    let got = p.got.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            serde_json::json!({"conversation": "c-1", "user": "u-1", "in_reply_to": "m-1",
                            "text": "Hello!", "buttons": []})
        ]
    );
}

#[tokio::test]
async fn long_replies_go_out_in_order_with_buttons_on_the_last_piece() {
    let (p, url) = platform().await;
    let sender = GenericSender::new(reqwest::Client::new(), url, "cb-secret");
    let para = "word ".repeat(798);
    let text = format!("{}\n\nShall I go ahead?", para.trim());
    let out = Outgoing {
        text,
        buttons: vec![Button {
            id: "yes".into(),
            title: "Yes".into(),
        }],
        ..reply()
    };
    let delivered = sender.send(&out).await.unwrap();
    assert_eq!(delivered.pieces.len(), 2);
    let got = p.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["buttons"], serde_json::json!([]));
    assert_eq!(got[1]["text"], "Shall I go ahead?");
    assert_eq!(
        got[1]["buttons"],
        serde_json::json!([{"id": "yes", "title": "Yes"}])
    );
}

#[tokio::test]
async fn refusals_say_whether_to_retry() {
    let (p, url) = platform().await;
    let sender = GenericSender::new(reqwest::Client::new(), url.clone(), "cb-secret");
    *p.answer.lock().unwrap() = 429;
    let err = sender.send(&reply()).await.unwrap_err();
    assert!(matches!(err, SendError::RateLimited { .. }) && err.is_retryable());
    *p.answer.lock().unwrap() = 503;
    let err = sender.send(&reply()).await.unwrap_err();
    assert!(matches!(err, SendError::Retryable { status: 503 }) && err.is_retryable());
    *p.answer.lock().unwrap() = 403;
    let err = sender.send(&reply()).await.unwrap_err();
    assert!(matches!(err, SendError::Rejected { status: 403, .. }) && !err.is_retryable());
    // Our key refused: the operator's to fix, so retried (and kept), never dropped.
    let wrong_key = GenericSender::new(reqwest::Client::new(), url, "not-the-secret");
    let err = wrong_key.send(&reply()).await.unwrap_err();
    assert!(
        matches!(err, SendError::Unauthorized { .. }) && err.is_retryable(),
        "{err:?}"
    );
}

/// A reply cut off part way (the first piece out, a 503 on the second) is sent on from the
/// piece that failed when `send_from` is given what went out.
#[tokio::test]
async fn a_reply_cut_off_part_way_is_sent_on_from_the_piece_that_failed() {
    let (p, url) = platform().await;
    let sender = GenericSender::new(reqwest::Client::new(), url, "cb-secret");
    let para = "word ".repeat(798);
    let text = format!("{}\n\nShall I go ahead?", para.trim());
    p.script.lock().unwrap().extend([200, 503]);
    let mut sent = Delivered::default();
    let err = sender
        .send_from(&reply_with(&text), &mut sent)
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(sent.pieces, [para.trim()]);
    sender
        .send_from(&reply_with(&text), &mut sent)
        .await
        .unwrap();
    assert_eq!(sent.pieces, [para.trim(), "Shall I go ahead?"]);
    let texts: Vec<String> = p
        .got
        .lock()
        .unwrap()
        .iter()
        .map(|g| g["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        texts,
        [para.trim(), "Shall I go ahead?", "Shall I go ahead?"],
        "the failed piece again, nothing before it"
    );
}

fn reply_with(text: &str) -> Outgoing {
    Outgoing {
        text: text.into(),
        ..reply()
    }
}
