//! The generic sender against a real local HTTP server that checks its signature.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use channels::generic::{GenericChannel, GenericSender};
use channels::{Channel, RawRequest, Reply, SendError, Sender};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Platform {
    got: Arc<Mutex<Vec<serde_json::Value>>>,
    answer: Arc<Mutex<u16>>,
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
    StatusCode::from_u16(*p.answer.lock().unwrap()).unwrap()
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

fn reply() -> Reply {
    Reply {
        conversation_key: "c-1".into(),
        external_user_id: "u-1".into(),
        in_reply_to: "m-1".into(),
        text: "Hello!".into(),
    }
}

#[tokio::test]
async fn replies_are_signed_and_delivered() {
    let (p, url) = platform().await;
    let sender = GenericSender::new(reqwest::Client::new(), url, "cb-secret");
    sender.send(&reply()).await.unwrap();
    let got = p.got.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            serde_json::json!({"conversation": "c-1", "user": "u-1", "in_reply_to": "m-1", "text": "Hello!"})
        ]
    );
}

#[tokio::test]
async fn refusals_say_whether_to_retry() {
    let (p, url) = platform().await;
    let sender = GenericSender::new(reqwest::Client::new(), url.clone(), "cb-secret");
    *p.answer.lock().unwrap() = 429;
    assert!(matches!(
        sender.send(&reply()).await,
        Err(SendError::Retryable { status: 429 })
    ));
    *p.answer.lock().unwrap() = 403;
    assert!(matches!(
        sender.send(&reply()).await,
        Err(SendError::Rejected { status: 403 })
    ));
    let wrong_key = GenericSender::new(reqwest::Client::new(), url, "not-the-secret");
    assert!(matches!(
        wrong_key.send(&reply()).await,
        Err(SendError::Rejected { status: 401 })
    ));
}
