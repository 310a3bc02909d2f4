//! The real local server, started in-process on a free loopback port, and a plain HTTP client
//! that reads its server-sent events.

use crate::oidc_provider::OidcProvider;
use backend::ChatModel;
use bridle::auth::{Oidc, OidcSettings, Signup};
use bridle::server::App;
use bridle::{AppOptions, SignInOptions, build_app};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running `bridle serve`, minus the command line.
pub struct TestServer {
    pub base: String,
    pub app: App,
    pub client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("base", &self.base)
            .finish()
    }
}

/// One server-sent event: its name and JSON data.
pub type Sse = (String, Value);

impl TestServer {
    /// `build_app(model, options)` on `listener` (at `base`), with sign-in at a real provider
    /// (`oidc-provider`, started for it, its client registered for this server's callback):
    /// open sign-up, sessions of an hour. The provider stops when dropped.
    pub async fn signed_in_at_real_provider(
        listener: tokio::net::TcpListener,
        base: &str,
        model: Arc<dyn ChatModel>,
        options: AppOptions,
    ) -> (Self, OidcProvider) {
        let callback = format!("{base}/auth/callback");
        let redirect = callback.clone();
        let provider = tokio::task::spawn_blocking(move || {
            OidcProvider::start("bridle-web", "bridle-web-secret", &[redirect.as_str()])
        })
        .await
        .unwrap();
        let oidc = Oidc::discover(OidcSettings {
            issuer: provider.issuer.clone(),
            client_id: provider.client_id.clone(),
            client_secret: Some(provider.client_secret.clone()),
            redirect_url: callback,
        })
        .await
        .expect("the provider is discovered");
        let options = AppOptions {
            sign_in: Some(SignInOptions {
                oidc: Arc::new(oidc),
                public_url: base.to_owned(),
                signup: Signup::Open,
                session_ttl: std::time::Duration::from_secs(3600),
            }),
            ..options
        };
        let app = build_app(model, options).expect("the app builds");
        (Self::serve_on(listener, app).await, provider)
    }

    pub async fn start(model: Arc<dyn ChatModel>, options: AppOptions) -> Self {
        let app = build_app(model, options).expect("the app builds");
        Self::serve(app).await
    }

    /// Serve an app that was already built (e.g. after enqueuing jobs by hand).
    pub async fn serve(app: App) -> Self {
        let (listener, _) = Self::bind().await;
        Self::serve_on(listener, app).await
    }

    /// A free loopback port and its base URL, for an app that must know its address before it
    /// is built (sign-in's redirect URL).
    pub async fn bind() -> (tokio::net::TcpListener, String) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        (listener, base)
    }

    /// Serve `app` on a listener from [`TestServer::bind`].
    pub async fn serve_on(listener: tokio::net::TcpListener, app: App) -> Self {
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(bridle::server::run(listener, app.clone(), async {
            let _ = stopped.await;
        }));
        Self {
            base,
            app,
            client: reqwest::Client::new(),
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stop accepting, let running turns finish, and wait for the server to exit.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `POST /api/conversations`, returning the new id.
    pub async fn new_conversation(&self) -> String {
        let res = self
            .client
            .post(self.url("/api/conversations"))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);
        let body: Value = res.json().await.unwrap();
        body["id"].as_str().unwrap().to_owned()
    }

    /// Post a message and read the whole event stream (it ends after `done`).
    pub async fn say(&self, conversation: &str, text: &str) -> Vec<Sse> {
        let res = self
            .client
            .post(self.url(&format!("/api/conversations/{conversation}/messages")))
            .json(&serde_json::json!({ "text": text }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "posting a message");
        assert_eq!(
            res.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        parse_sse(&res.text().await.unwrap())
    }

    /// Write `n` entries straight into web conversation `id`'s visible transcript: positions
    /// `0..n`, the user's at even positions and the assistant's at odd ones, each saying
    /// `entry <position>`.
    pub async fn seed_history(&self, id: &str, n: u64) {
        for position in 0..n {
            let role = if position % 2 == 0 {
                store::VisibleRole::User
            } else {
                store::VisibleRole::Assistant
            };
            let entry = store::VisibleEntry {
                conversation_id: id.into(),
                position,
                role,
                text: format!("entry {position}"),
                buttons: Vec::new(),
                reaction: None,
                turn: position / 2 + 1,
                created_at_ms: 0,
            };
            self.app.store.append_visible(&entry).await.unwrap();
        }
    }

    /// The visible history: `(role, text)` per entry.
    pub async fn history(&self, conversation: &str) -> Vec<(String, String)> {
        let res = self
            .client
            .get(self.url(&format!("/api/conversations/{conversation}/messages")))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_owned(),
                    m["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}

/// Parse a complete `text/event-stream` body (comments and keep-alives skipped).
pub fn parse_sse(body: &str) -> Vec<Sse> {
    body.split("\n\n")
        .filter_map(|block| {
            let mut name = "message".to_owned();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event:") {
                    name = n.trim().to_owned();
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            (!data.is_empty()).then(|| (name, serde_json::from_str(&data.join("\n")).unwrap()))
        })
        .collect()
}

/// The concatenated text of the `token` events.
pub fn tokens(events: &[Sse]) -> String {
    events
        .iter()
        .filter(|(n, _)| n == "token")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect()
}

/// The messaging channels `vars` configure (each `(variable, value)`), as `bridle serve` reads
/// them from its environment: what a test server hands out link codes for.
pub fn channels_from(vars: &[(&str, &str)]) -> bridle::channel_setup::ChannelSetup {
    let vars: std::collections::HashMap<&str, &str> = vars.iter().copied().collect();
    bridle::channel_setup::ChannelSetup::from_vars(
        &|k| vars.get(k).map(|v| (*v).to_owned()),
        &reqwest::Client::new(),
    )
    .expect("the channels' settings")
}
