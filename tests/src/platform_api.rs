//! A fake platform API (WhatsApp Graph, Telegram Bot API, Slack Web API, Twilio REST) on a
//! loopback port: records every call in order and answers like the platform, or with a
//! scripted refusal for calls whose path or body contains a given marker.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One call the platform received.
#[derive(Debug, Clone)]
pub struct ApiCall {
    pub method: String,
    pub path: String,
    /// The raw body (JSON or a form).
    pub body: String,
}

#[derive(Debug, Default)]
struct Inner {
    calls: Vec<ApiCall>,
    /// Calls whose path or body contains the marker get this status and body.
    refuse: Vec<(String, u16, Value)>,
    /// Raw answers by exact path (media lookups and downloads): status, content type, body.
    served: Vec<(String, u16, String, Vec<u8>)>,
}

/// The running fake.
#[derive(Debug, Clone, Default)]
pub struct PlatformApi {
    inner: Arc<Mutex<Inner>>,
    pub base: String,
}

/// What every platform accepts as success (each reads only its own fields).
fn accepted() -> Value {
    json!({
        "ok": true,
        "result": {"message_id": 9000},
        "ts": "1700000000.000100",
        "channel": "D0PNCRP9N",
        "sid": "SM00000000000000000000000000000000",
        "status": "queued",
        "messaging_product": "whatsapp",
        "messages": [{"id": "wamid.out"}]
    })
}

async fn receive(
    State(api): State<PlatformApi>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let call = ApiCall {
        method: method.to_string(),
        path: uri.path().to_owned(),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let mut inner = api.inner.lock().unwrap();
    let refusal = inner
        .refuse
        .iter()
        .find(|(marker, _, _)| call.path.contains(marker) || call.body.contains(marker))
        .cloned();
    let served = inner
        .served
        .iter()
        .find(|(path, ..)| *path == call.path)
        .cloned();
    inner.calls.push(call);
    if let Some((_, status, content_type, bytes)) = served {
        let status = StatusCode::from_u16(status).unwrap();
        return (status, [("content-type", content_type)], bytes).into_response();
    }
    match refusal {
        Some((_, status, body)) => {
            (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
        }
        None => (StatusCode::OK, axum::Json(accepted())).into_response(),
    }
}

impl PlatformApi {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let api = PlatformApi {
            base: format!("http://{}", listener.local_addr().unwrap()),
            ..PlatformApi::default()
        };
        let app = Router::new().fallback(any(receive)).with_state(api.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        api
    }

    /// Answer calls containing `marker` (in the path or body) with this status and body.
    pub fn refuse(&self, marker: &str, status: u16, body: Value) {
        self.inner
            .lock()
            .unwrap()
            .refuse
            .push((marker.to_owned(), status, body));
    }

    /// Answer calls to exactly `path` with this status, content type and body (a media lookup
    /// or a download).
    pub fn serve(&self, path: &str, status: u16, content_type: &str, body: Vec<u8>) {
        self.inner.lock().unwrap().served.push((
            path.to_owned(),
            status,
            content_type.to_owned(),
            body,
        ));
    }

    pub fn calls(&self) -> Vec<ApiCall> {
        self.inner.lock().unwrap().calls.clone()
    }

    /// Wait (at most 10 s) until at least `n` calls arrived; then the calls.
    pub async fn wait_for(&self, n: usize) -> Vec<ApiCall> {
        for _ in 0..500 {
            let calls = self.calls();
            if calls.len() >= n {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("expected {n} platform calls, got {:#?}", self.calls());
    }
}

/// A WhatsApp text message from `from`, as Meta delivers it to the webhook: the
/// `x-hub-signature-256` value (signed with `app_secret`) and the raw body.
pub fn whatsapp_text(
    app_secret: &str,
    from: &str,
    message_id: &str,
    text: &str,
) -> (String, String) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let body = json!({"object": "whatsapp_business_account", "entry": [{"id": "102290129340398",
        "changes": [{"field": "messages", "value": {"messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550783881", "phone_number_id": "106540352242922"},
        "contacts": [{"profile": {"name": "Sender"}, "wa_id": from}],
        "messages": [{"from": from, "id": message_id, "timestamp": now.to_string(),
                      "type": "text", "text": {"body": text}}]}}]}]})
    .to_string();
    (
        channels::whatsapp::sign(app_secret.as_bytes(), body.as_bytes()),
        body,
    )
}
