//! Proxies in front of moto for the AWS JSON protocols (DynamoDB): a test points an SDK client
//! at one to see or to cut what the client sends, while moto keeps the state.
//!
//! - [`forward_to_moto`]: one request on to moto, its answer back as moto gave it (the CRC32
//!   header the SDK checks included).
//! - [`Outage`]: forwards everything until told to go down; then every request gets DynamoDB's
//!   `ThrottlingException`, which the SDK retries and then gives up on, the way a client sees
//!   a table that is throttled or unreachable for a while.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::routing::post;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Send one request (its AWS JSON `headers` and `body`) on to moto at `moto`, and return moto's
/// status, headers and body.
///
/// # Panics
///
/// When moto cannot be reached: the test has no emulator to run against.
pub async fn forward_to_moto(
    http: &reqwest::Client,
    moto: &str,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    let mut request = http
        .post(format!("{}/", moto.trim_end_matches('/')))
        .body(body);
    for (name, value) in &headers {
        if name != header::HOST && name != header::CONTENT_LENGTH {
            request = request.header(name, value);
        }
    }
    let response = request.send().await.expect("moto answers");
    let status = response.status();
    let mut back = HeaderMap::new();
    for (name, value) in response.headers() {
        if name != header::CONTENT_LENGTH
            && name != header::TRANSFER_ENCODING
            && name != header::CONNECTION
        {
            back.insert(name.clone(), value.clone());
        }
    }
    let body = response.bytes().await.expect("moto's answer");
    (status, back, body)
}

/// A proxy to moto that can be taken down.
#[derive(Debug, Clone)]
pub struct Outage {
    /// Where to point the SDK client (`endpoint_url`).
    pub endpoint: String,
    down: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
}

#[derive(Clone)]
struct Proxy {
    http: reqwest::Client,
    moto: String,
    down: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
}

impl Outage {
    /// Start one on a loopback port, up, in front of `moto`.
    ///
    /// # Panics
    ///
    /// When no loopback port can be had.
    pub async fn start(moto: &str) -> Self {
        let down = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicUsize::new(0));
        let proxy = Proxy {
            http: reqwest::Client::new(),
            moto: moto.to_owned(),
            down: down.clone(),
            refused: refused.clone(),
        };
        let app = Router::new().route("/", post(answer)).with_state(proxy);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().expect("its address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            endpoint,
            down,
            refused,
        }
    }

    /// Refuse every request from now on (`true`), or forward them again (`false`).
    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// How many requests were refused so far (the SDK's retries included).
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }
}

async fn answer(
    State(p): State<Proxy>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Bytes) {
    if !p.down.load(Ordering::SeqCst) {
        return forward_to_moto(&p.http, &p.moto, headers, body).await;
    }
    p.refused.fetch_add(1, Ordering::SeqCst);
    let mut back = HeaderMap::new();
    back.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.0"),
    );
    let body = r#"{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}"#;
    (
        StatusCode::BAD_REQUEST,
        back,
        Bytes::from_static(body.as_bytes()),
    )
}
