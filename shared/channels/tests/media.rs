//! Attachments fetched from local fake platform APIs (real HTTP on a loopback port) and stored
//! by reference: two hops for WhatsApp and Telegram, one for Slack and Twilio; the cap checked
//! on declared sizes before any download and on the bytes while they stream; 404s, timeouts,
//! foreign hosts; no token in any error.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::any;
use channels::InboundMedia;
use channels::media::platforms::{Slack, Telegram, Twilio, WhatsApp};
use channels::media::{
    FetchLimits, InMemory, LocalFiles, MediaError, MediaFetcher, MediaStore, PlatformMedia,
    StoredMedia, media_key,
};
use serde_json::json;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use transcript::MediaRef;

const WA_TOKEN: &str = "EAAGwa-secret-token";
const TG_TOKEN: &str = "123456:TG-secret-token";
const SLACK_TOKEN: &str = "xoxb-slack-secret-token";
const TWILIO_SID: &str = "AC3f1e2d4c5b6a79880a1b2c3d4e5f6a7b";
const TWILIO_TOKEN: &str = "twilio-secret-token";
/// A small cap so oversize is cheap to produce.
const CAP: u64 = 64 * 1024;

#[derive(Clone)]
enum Content {
    Bytes(Vec<u8>),
    /// Chunks of 16 KiB forever (no `Content-Length`): only a cap stops it.
    Endless,
}

#[derive(Clone)]
struct Route {
    status: u16,
    content_type: &'static str,
    content: Content,
    /// The `Authorization` header the route insists on (401 otherwise).
    auth: Option<String>,
    delay: Duration,
}

fn ok(content_type: &'static str, content: Content, auth: Option<String>) -> Route {
    Route {
        status: 200,
        content_type,
        content,
        auth,
        delay: Duration::ZERO,
    }
}

#[derive(Clone, Default)]
struct Fake {
    routes: Arc<Mutex<HashMap<String, Route>>>,
    /// Every request, as path + query.
    seen: Arc<Mutex<Vec<String>>>,
    base: String,
}

async fn serve(State(fake): State<Fake>, uri: Uri, headers: HeaderMap) -> Response {
    let target = uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    fake.seen.lock().unwrap().push(target.clone());
    let route = {
        let routes = fake.routes.lock().unwrap();
        routes
            .get(&target)
            .or_else(|| routes.get(uri.path()))
            .cloned()
    };
    let Some(route) = route else {
        return Response::builder()
            .status(404)
            .body(Body::from("{\"error\":\"no such route\"}"))
            .unwrap();
    };
    tokio::time::sleep(route.delay).await;
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if route.auth.is_some() && given != route.auth {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .body(Body::empty())
            .unwrap();
    }
    let body = match route.content {
        // Streamed, so no Content-Length: the client has to count.
        Content::Bytes(b) => Body::from_stream(futures::stream::iter(
            b.chunks(4096)
                .map(|c| Ok::<_, Infallible>(Bytes::copy_from_slice(c)))
                .collect::<Vec<_>>(),
        )),
        Content::Endless => Body::from_stream(futures::stream::repeat_with(|| {
            Ok::<_, Infallible>(Bytes::from(vec![7u8; 16 * 1024]))
        })),
    };
    Response::builder()
        .status(route.status)
        .header("content-type", route.content_type)
        .body(body)
        .unwrap()
}

impl Fake {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake = Fake {
            base: format!("http://{}", listener.local_addr().unwrap()),
            ..Fake::default()
        };
        let app = Router::new().fallback(any(serve)).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        fake
    }

    fn route(&self, path: &str, route: Route) {
        self.routes.lock().unwrap().insert(path.to_owned(), route);
    }

    fn json(&self, path: &str, status: u16, body: serde_json::Value) {
        self.route(
            path,
            Route {
                status,
                ..ok(
                    "application/json",
                    Content::Bytes(body.to_string().into_bytes()),
                    None,
                )
            },
        );
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    fn fetcher(&self, timeout: Duration) -> MediaFetcher {
        let platforms = PlatformMedia {
            whatsapp: Some(WhatsApp {
                api_base: self.base.clone(),
                api_version: "v21.0".into(),
                access_token: WA_TOKEN.into(),
            }),
            telegram: Some(Telegram {
                api_base: self.base.clone(),
                bot_token: TG_TOKEN.into(),
            }),
            slack: Some(Slack {
                api_base: format!("{}/api", self.base),
                bot_token: SLACK_TOKEN.into(),
            }),
            twilio: Some(Twilio {
                api_base: self.base.clone(),
                account_sid: TWILIO_SID.into(),
                auth_token: TWILIO_TOKEN.into(),
            }),
        };
        MediaFetcher::new(
            platforms,
            FetchLimits {
                max_bytes: CAP,
                timeout,
            },
        )
    }
}

fn media(reference: &str, mime: &str, size: Option<u64>) -> InboundMedia {
    InboundMedia {
        reference: reference.into(),
        mime_type: mime.into(),
        size_bytes: size,
    }
}

fn picture(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

fn bearer(token: &str) -> Option<String> {
    Some(format!("Bearer {token}"))
}

fn twilio_basic() -> Option<String> {
    use base64::Engine;
    let pair = format!("{TWILIO_SID}:{TWILIO_TOKEN}");
    Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(pair)
    ))
}

/// WhatsApp's media lookup answer for `id`, pointing at a download on the fake.
fn whatsapp_lookup(fake: &Fake, id: &str, file_size: serde_json::Value) {
    fake.json(
        &format!("/v21.0/{id}"),
        200,
        json!({"messaging_product": "whatsapp", "url": format!("{}/wa-cdn/{id}", fake.base),
               "mime_type": "image/jpeg", "sha256": "abc", "file_size": file_size, "id": id}),
    );
}

async fn fetch(fake: &Fake, channel: &str, m: &InboundMedia) -> Result<MediaRef, MediaError> {
    let store = InMemory::default();
    let key = media_key(channel, "chat", "msg", 0);
    let r = fake
        .fetcher(Duration::from_secs(5))
        .fetch_and_store(&store, channel, &key, m)
        .await?;
    assert_eq!(store.keys(), [key], "stored exactly once, under its key");
    Ok(r)
}

#[tokio::test]
async fn whatsapp_media_id_to_url_to_bytes_with_the_token_into_local_files() {
    let fake = Fake::start().await;
    let bytes = picture(20_000);
    whatsapp_lookup(&fake, "1234567890", json!("20000"));
    fake.route(
        "/wa-cdn/1234567890",
        ok(
            "image/jpeg",
            Content::Bytes(bytes.clone()),
            bearer(WA_TOKEN),
        ),
    );
    // The lookup also insists on the token.
    fake.routes
        .lock()
        .unwrap()
        .get_mut("/v21.0/1234567890")
        .unwrap()
        .auth = bearer(WA_TOKEN);
    let root = tempfile::Builder::new()
        .prefix("bridle-media-wa-")
        .tempdir()
        .unwrap();
    let store = LocalFiles::new(root.path());
    let key = media_key("whatsapp", "16315551181", "wamid.HBgLMTY=", 0);
    let r = fake
        .fetcher(Duration::from_secs(5))
        .fetch_and_store(
            &store,
            "whatsapp",
            &key,
            &media("1234567890", "image/jpeg", None),
        )
        .await
        .unwrap();
    assert_eq!(
        r,
        MediaRef {
            key: key.clone(),
            mime_type: "image/jpeg".into(),
            size_bytes: 20_000
        }
    );
    assert_eq!(
        store.get(&key).await.unwrap(),
        StoredMedia {
            mime_type: "image/jpeg".into(),
            bytes
        }
    );
    assert_eq!(fake.seen(), ["/v21.0/1234567890", "/wa-cdn/1234567890"]);
}

#[tokio::test]
async fn telegram_get_file_then_the_file_url() {
    let fake = Fake::start().await;
    let bytes = picture(9_000);
    fake.json(
        &format!("/bot{TG_TOKEN}/getFile?file_id=AgACAgIAAxkB-x_y"),
        200,
        json!({"ok": true, "result": {"file_id": "AgACAgIAAxkB-x_y", "file_unique_id": "u1",
               "file_size": 9000, "file_path": "photos/file_7.jpg"}}),
    );
    fake.route(
        &format!("/file/bot{TG_TOKEN}/photos/file_7.jpg"),
        ok("image/jpeg", Content::Bytes(bytes.clone()), None),
    );
    let r = fetch(
        &fake,
        "telegram",
        &media("AgACAgIAAxkB-x_y", "image/jpeg", Some(9_000)),
    )
    .await
    .unwrap();
    assert_eq!((r.mime_type.as_str(), r.size_bytes), ("image/jpeg", 9_000));
    assert_eq!(fake.seen().len(), 2);
}

#[tokio::test]
async fn slack_url_private_with_the_bot_token() {
    let fake = Fake::start().await;
    fake.route(
        "/files-pri/T1-F1/report.pdf",
        ok(
            "application/pdf",
            Content::Bytes(b"%PDF-1.7 tiny".to_vec()),
            bearer(SLACK_TOKEN),
        ),
    );
    let url = format!("{}/files-pri/T1-F1/report.pdf", fake.base);
    let r = fetch(&fake, "slack", &media(&url, "application/pdf", Some(13)))
        .await
        .unwrap();
    assert_eq!(
        (r.mime_type.as_str(), r.size_bytes),
        ("application/pdf", 13)
    );
}

#[tokio::test]
async fn twilio_media_url_with_basic_auth_and_the_type_from_the_download() {
    let fake = Fake::start().await;
    let path = format!("/2010-04-01/Accounts/{TWILIO_SID}/Messages/MM1/Media/ME1");
    fake.route(
        &path,
        ok("image/png", Content::Bytes(picture(5_000)), twilio_basic()),
    );
    let url = format!("{}{path}", fake.base);
    // The webhook did not say the type: the download's Content-Type is used.
    let r = fetch(
        &fake,
        "twilio",
        &media(&url, "application/octet-stream", None),
    )
    .await
    .unwrap();
    assert_eq!((r.mime_type.as_str(), r.size_bytes), ("image/png", 5_000));
}

#[tokio::test]
async fn a_declared_size_over_the_cap_is_refused_before_any_download() {
    let fake = Fake::start().await;
    // WhatsApp: the lookup says too big; the CDN is never asked.
    whatsapp_lookup(&fake, "777", json!(CAP + 1));
    fake.route(
        "/wa-cdn/777",
        ok("image/jpeg", Content::Bytes(picture(10)), None),
    );
    let e = fetch(&fake, "whatsapp", &media("777", "image/jpeg", None))
        .await
        .unwrap_err();
    assert!(
        matches!(e, MediaError::TooLarge { limit: CAP, .. }),
        "{e:?}"
    );
    // Telegram: getFile says too big; the file URL is never asked.
    fake.json(
        &format!("/bot{TG_TOKEN}/getFile?file_id=BIG"),
        200,
        json!({"ok": true, "result": {"file_id": "BIG", "file_size": CAP + 1, "file_path": "documents/big.pdf"}}),
    );
    let e = fetch(&fake, "telegram", &media("BIG", "application/pdf", None))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::TooLarge { .. }), "{e:?}");
    // Slack: the event's file object says too big; nothing is requested at all.
    let url = format!("{}/files-pri/T1-F2/huge.mov", fake.base);
    let e = fetch(
        &fake,
        "slack",
        &media(&url, "video/quicktime", Some(CAP + 1)),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, MediaError::TooLarge { .. }), "{e:?}");
    let seen = fake.seen();
    assert_eq!(
        seen,
        [
            "/v21.0/777".to_owned(),
            format!("/bot{TG_TOKEN}/getFile?file_id=BIG")
        ],
        "no download was requested"
    );
}

#[tokio::test]
async fn a_lying_size_is_caught_while_streaming() {
    let fake = Fake::start().await;
    // WhatsApp says 100 bytes; the CDN streams without end.
    whatsapp_lookup(&fake, "555", json!(100));
    fake.route("/wa-cdn/555", ok("image/jpeg", Content::Endless, None));
    let e = fetch(&fake, "whatsapp", &media("555", "image/jpeg", None))
        .await
        .unwrap_err();
    match e {
        MediaError::TooLarge { limit, seen } => {
            assert_eq!(limit, CAP);
            assert!(seen.contains("streaming"), "{seen}");
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // Twilio declares nothing; one byte over the cap is refused.
    let path = "/2010-04-01/Accounts/AC/Messages/MM2/Media/ME2";
    fake.route(
        path,
        ok(
            "image/jpeg",
            Content::Bytes(picture(CAP as usize + 1)),
            None,
        ),
    );
    let url = format!("{}{path}", fake.base);
    let e = fetch(&fake, "twilio", &media(&url, "image/jpeg", None))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::TooLarge { .. }), "{e:?}");
    // Exactly the cap is fine.
    fake.route(
        path,
        ok("image/jpeg", Content::Bytes(picture(CAP as usize)), None),
    );
    assert_eq!(
        fetch(&fake, "twilio", &media(&url, "image/jpeg", None))
            .await
            .unwrap()
            .size_bytes,
        CAP
    );
}

#[tokio::test]
async fn gone_media_is_not_found() {
    let fake = Fake::start().await;
    // The lookup worked but the short-lived URL has expired.
    whatsapp_lookup(&fake, "404404", json!(10));
    let e = fetch(&fake, "whatsapp", &media("404404", "image/jpeg", None))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::NotFound), "{e:?}");
    assert_eq!(e.reason(), "it is no longer available");
    // Graph's answer to an unknown media id: 400 with code 100.
    fake.json(
        "/v21.0/999",
        400,
        json!({"error": {"message": "Unsupported get request.", "type": "GraphMethodException", "code": 100}}),
    );
    let e = fetch(&fake, "whatsapp", &media("999", "image/jpeg", None))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::NotFound), "{e:?}");
    // Slack: a deleted file.
    let url = format!("{}/files-pri/T1-F9/gone.png", fake.base);
    let e = fetch(&fake, "slack", &media(&url, "image/png", Some(10)))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::NotFound), "{e:?}");
    // Other failures are the platform's, and say so.
    fake.route(
        "/files-pri/T1-F9/busy.png",
        Route {
            status: 503,
            ..ok("text/plain", Content::Bytes(b"busy".to_vec()), None)
        },
    );
    let url = format!("{}/files-pri/T1-F9/busy.png", fake.base);
    let e = fetch(&fake, "slack", &media(&url, "image/png", Some(10)))
        .await
        .unwrap_err();
    assert!(
        matches!(e, MediaError::Upstream { status: 503, .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_slow_platform_times_out() {
    let fake = Fake::start().await;
    fake.route(
        "/files-pri/T1-F3/slow.png",
        Route {
            delay: Duration::from_secs(3),
            ..ok("image/png", Content::Bytes(picture(10)), None)
        },
    );
    let url = format!("{}/files-pri/T1-F3/slow.png", fake.base);
    let e = fake
        .fetcher(Duration::from_millis(200))
        .fetch("slack", &media(&url, "image/png", None))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::Timeout), "{e:?}");
}

#[tokio::test]
async fn credentials_never_go_to_another_host() {
    let fake = Fake::start().await;
    let elsewhere = Fake::start().await;
    elsewhere.route("/x.png", ok("image/png", Content::Bytes(picture(10)), None));
    for channel in ["slack", "twilio"] {
        let e = fetch(
            &fake,
            channel,
            &media(&format!("{}/x.png", elsewhere.base), "image/png", None),
        )
        .await
        .unwrap_err();
        assert!(matches!(e, MediaError::UntrustedUrl), "{channel}: {e:?}");
    }
    assert!(elsewhere.seen().is_empty(), "never contacted");
}

#[tokio::test]
async fn no_error_carries_a_token() {
    // Nothing listens here: the connection is refused, and reqwest's error would name the URL
    // (Telegram's carries the bot token in its path).
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let fake = Fake {
        base: format!("http://{closed}"),
        ..Fake::default()
    };
    let fetcher = fake.fetcher(Duration::from_secs(2));
    for (channel, reference) in [
        ("telegram", "AgAC".to_owned()),
        ("whatsapp", "42".to_owned()),
        ("slack", format!("http://{closed}/files-pri/x")),
        ("twilio", format!("http://{closed}/Media/ME1")),
    ] {
        let e = fetcher
            .fetch(channel, &media(&reference, "image/png", None))
            .await
            .unwrap_err();
        let text = format!("{e} {e:?} {}", e.reason());
        for secret in [TG_TOKEN, "TG-secret", WA_TOKEN, SLACK_TOKEN, TWILIO_TOKEN] {
            assert!(!text.contains(secret), "{channel}: {text}");
        }
        assert!(matches!(e, MediaError::Transport(_)), "{channel}: {e:?}");
    }
}

#[tokio::test]
async fn a_channel_without_credentials_is_not_configured() {
    let fetcher = MediaFetcher::new(PlatformMedia::default(), FetchLimits::default());
    let e = fetcher
        .fetch("whatsapp", &media("1", "image/jpeg", None))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::NotConfigured { .. }), "{e:?}");
    let e = fetcher
        .fetch("generic", &media("1", "image/jpeg", None))
        .await
        .unwrap_err();
    assert!(matches!(e, MediaError::NotConfigured { .. }), "{e:?}");
}
