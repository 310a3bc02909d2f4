//! Media tokens stay with the platform (issue 16, point 6): every hop of a download — the URL a
//! lookup returns and every redirect — is checked against the platform's hosts before it is
//! contacted; no request carries a `Referer`; credentials go only to the platform. Two real HTTP
//! servers on loopback: the platform (its address is the configured API base) and a foreign
//! host that records everything it receives.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use axum::routing::any;
use channels::InboundMedia;
use channels::media::platforms::{Slack, Telegram, Twilio, WhatsApp};
use channels::media::{FetchLimits, MediaError, MediaFetcher, PlatformMedia};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const WA_TOKEN: &str = "EAAGwa-secret-token";
const TG_TOKEN: &str = "123456:TG-secret-token";
const SLACK_TOKEN: &str = "xoxb-slack-secret-token";
const TWILIO_SID: &str = "AC3f1e2d4c5b6a79880a1b2c3d4e5f6a7b";
const TWILIO_TOKEN: &str = "twilio-secret-token";

/// What one request brought: its path and query, `Authorization` and `Referer`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Heard {
    target: String,
    authorization: Option<String>,
    referer: Option<String>,
}

#[derive(Clone)]
enum Answer {
    Json(serde_json::Value),
    Bytes(&'static [u8]),
    Redirect(u16, String),
}

/// A loopback HTTP server that answers by path and remembers every request.
#[derive(Clone, Default)]
struct Host {
    base: String,
    answers: Arc<Mutex<HashMap<String, Answer>>>,
    heard: Arc<Mutex<Vec<Heard>>>,
}

async fn answer(State(host): State<Host>, uri: Uri, headers: HeaderMap) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let target = uri
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    host.heard.lock().unwrap().push(Heard {
        target: target.clone(),
        authorization: header("authorization"),
        referer: header("referer"),
    });
    let found = host.answers.lock().unwrap().get(&target).cloned();
    let response = Response::builder();
    match found {
        Some(Answer::Json(v)) => response
            .header("content-type", "application/json")
            .body(v.to_string().into()),
        Some(Answer::Bytes(b)) => response.header("content-type", "image/png").body(b.into()),
        Some(Answer::Redirect(status, to)) => response
            .status(status)
            .header("location", to)
            .body("".into()),
        None => response.status(404).body("".into()),
    }
    .unwrap()
}

impl Host {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = Host {
            base: format!("http://{}", listener.local_addr().unwrap()),
            ..Host::default()
        };
        let app = Router::new().fallback(any(answer)).with_state(host.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        host
    }

    fn on(&self, target: &str, a: Answer) {
        self.answers.lock().unwrap().insert(target.to_owned(), a);
    }

    fn heard(&self) -> Vec<Heard> {
        self.heard.lock().unwrap().clone()
    }

    /// A fetcher whose every platform's API base is this host.
    fn platform_fetcher(&self) -> MediaFetcher {
        MediaFetcher::new(
            PlatformMedia {
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
            },
            FetchLimits {
                max_bytes: 64 * 1024,
                timeout: Duration::from_secs(5),
            },
        )
    }
}

fn media(reference: &str) -> InboundMedia {
    InboundMedia {
        reference: reference.into(),
        mime_type: "image/png".into(),
        size_bytes: None,
    }
}

/// WhatsApp's lookup of media `id` on `platform`, returning `url`.
fn lookup(platform: &Host, id: &str, url: &str) {
    platform.on(
        &format!("/v21.0/{id}"),
        Answer::Json(serde_json::json!({
            "messaging_product": "whatsapp", "url": url, "mime_type": "image/png",
            "file_size": 3, "id": id
        })),
    );
}

fn assert_refused(e: MediaError, what: &str) {
    assert!(matches!(e, MediaError::UntrustedUrl), "{what}: {e:?}");
    // What the model is told (and the user hears through it): calm, no host, no token.
    assert_eq!(e.reason(), "it could not be downloaded", "{what}");
}

#[tokio::test]
async fn a_whatsapp_media_url_on_a_foreign_host_is_never_contacted() {
    let platform = Host::start().await;
    let foreign = Host::start().await;
    foreign.on("/steal", Answer::Bytes(b"png"));
    lookup(&platform, "111", &format!("{}/steal", foreign.base));

    let e = platform
        .platform_fetcher()
        .fetch("whatsapp", &media("111"))
        .await
        .unwrap_err();

    assert_refused(e, "WhatsApp download on a foreign host");
    assert_eq!(foreign.heard(), [], "the foreign host heard nothing");
    assert_eq!(
        platform.heard()[0].authorization.as_deref(),
        Some(format!("Bearer {WA_TOKEN}").as_str()),
        "the lookup itself is the platform's and carries the token"
    );
}

#[tokio::test]
async fn a_redirect_to_a_foreign_host_is_not_followed_on_any_platform() {
    let platform = Host::start().await;
    let foreign = Host::start().await;
    foreign.on("/cdn", Answer::Bytes(b"png"));
    let away = Answer::Redirect(302, format!("{}/cdn", foreign.base));
    // WhatsApp: the returned URL is the platform's, and it redirects away.
    lookup(&platform, "222", &format!("{}/wa-cdn/222", platform.base));
    platform.on("/wa-cdn/222", away.clone());
    // Telegram: getFile, then the file URL (with the token in its path) redirects away.
    platform.on(
        &format!("/bot{TG_TOKEN}/getFile?file_id=F1"),
        Answer::Json(serde_json::json!({"ok": true, "result": {"file_path": "photos/f.png"}})),
    );
    platform.on(&format!("/file/bot{TG_TOKEN}/photos/f.png"), away.clone());
    // Slack and Twilio: the webhook's URL is the platform's, and it redirects away.
    platform.on("/files-pri/T1-F1/f.png", away.clone());
    platform.on("/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1", away);

    let fetcher = platform.platform_fetcher();
    for (channel, reference) in [
        ("whatsapp", "222".to_owned()),
        ("telegram", "F1".to_owned()),
        ("slack", format!("{}/files-pri/T1-F1/f.png", platform.base)),
        (
            "twilio",
            format!(
                "{}/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1",
                platform.base
            ),
        ),
    ] {
        let e = fetcher
            .fetch(channel, &media(&reference))
            .await
            .unwrap_err();
        assert_refused(e, channel);
    }
    assert_eq!(foreign.heard(), [], "no token, no Referer, no request left");
}

#[tokio::test]
async fn a_telegram_redirect_on_the_platform_is_followed_without_a_referer() {
    let platform = Host::start().await;
    platform.on(
        &format!("/bot{TG_TOKEN}/getFile?file_id=F2"),
        Answer::Json(serde_json::json!({"ok": true, "result": {"file_path": "photos/g.png"}})),
    );
    platform.on(
        &format!("/file/bot{TG_TOKEN}/photos/g.png"),
        Answer::Redirect(307, "/moved/g.png".into()),
    );
    platform.on("/moved/g.png", Answer::Bytes(b"png"));

    let fetched = platform
        .platform_fetcher()
        .fetch("telegram", &media("F2"))
        .await
        .unwrap();

    assert_eq!(fetched.bytes, b"png");
    let heard = platform.heard();
    assert_eq!(heard.len(), 3, "{heard:?}");
    assert_eq!(heard[2].target, "/moved/g.png");
    for h in &heard {
        assert_eq!(
            h.referer, None,
            "no Referer (it would carry the bot token): {h:?}"
        );
    }
}

#[tokio::test]
async fn a_redirect_on_the_platform_keeps_its_credentials_and_sends_no_referer() {
    let platform = Host::start().await;
    let start = "/2010-04-01/Accounts/AC1/Messages/MM2/Media/ME2";
    platform.on(start, Answer::Redirect(301, "/media/ME2".into()));
    platform.on("/media/ME2", Answer::Bytes(b"png"));

    let fetched = platform
        .platform_fetcher()
        .fetch("twilio", &media(&format!("{}{start}", platform.base)))
        .await
        .unwrap();

    assert_eq!(fetched.bytes, b"png");
    let heard = platform.heard();
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(
        heard.iter().all(|h| h
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Basic "))
            && h.referer.is_none()),
        "{heard:?}"
    );
}

#[tokio::test]
async fn a_redirect_loop_ends_calmly() {
    let platform = Host::start().await;
    platform.on(
        "/files-pri/loop",
        Answer::Redirect(302, "/files-pri/loop".into()),
    );

    let e = platform
        .platform_fetcher()
        .fetch(
            "slack",
            &media(&format!("{}/files-pri/loop", platform.base)),
        )
        .await
        .unwrap_err();

    assert!(matches!(e, MediaError::Upstream { .. }), "{e:?}");
    assert_eq!(e.reason(), "it could not be downloaded");
    // The first request and at most five redirects.
    assert_eq!(platform.heard().len(), 6);
}
