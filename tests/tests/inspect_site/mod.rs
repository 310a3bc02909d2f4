//! Shared by the turn-inspector tests: a signed-in server (the steerable test issuer) whose
//! scripted model answers alice with a tool call, its result and a reply, and bob with a reply;
//! alice is made an admin.

use backend::{Reply, ScriptedModel};
use bridle::auth::{Oidc, OidcSettings, Signup};
use bridle::{AppOptions, OtherStore, SignInOptions, build_app};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::{AccountRole, Store};
use tests::fake_issuer::{FakeIssuer, Person};
use tests::server::TestServer;
use transcript::Usage;

pub const CLIENT: &str = "bridle-inspect";
/// A model the built-in price table lists, so costs are not zero.
pub const MODEL: &str = "anthropic.claude-3-5-haiku-20241022-v1:0";
/// Alice's message, with markup that must show as text.
pub const ALICE_SAYS: &str = "add Spring Open on 14 March at 10 <img src=x onerror=alert(1)>";

pub struct Site {
    pub server: TestServer,
    pub issuer: FakeIssuer,
    pub store: Arc<dyn Store>,
    pub http: reqwest::Client,
}

/// A signed-in browser: its session cookie and the page's CSRF token.
pub struct Browser {
    pub cookie: String,
    pub csrf: String,
    pub user: String,
}

pub fn alice() -> Person {
    Person::new("sub-alice", "alice@example.com")
}

pub fn bob() -> Person {
    Person::new("sub-bob", "bob@example.com")
}

fn model() -> Arc<ScriptedModel> {
    let usage = |input, output, cache_read| Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_write_tokens: 0,
    };
    Arc::new(ScriptedModel::new([
        Reply::tool_call(
            "tu-1",
            "create_event",
            json!({"title": "Spring Open", "starts_at": "2027-03-14T10:00", "venue": "Town Hall", "capacity": 50}),
        )
        .usage(usage(1200, 40, 3000)),
        Reply::text("Created Spring Open, a draft for now.").usage(usage(1500, 12, 3000)),
        Reply::text("Bob's private answer.").usage(usage(900, 5, 0)),
    ]))
}

pub async fn site(store: Option<Arc<dyn Store>>) -> Site {
    let issuer = FakeIssuer::start(CLIENT).await;
    let (listener, base) = TestServer::bind().await;
    let oidc = Oidc::discover(OidcSettings {
        issuer: issuer.issuer.clone(),
        client_id: CLIENT.into(),
        client_secret: Some("client-secret".into()),
        redirect_url: format!("{base}/auth/callback"),
    })
    .await
    .unwrap();
    let options = AppOptions {
        model_id: MODEL.into(),
        sign_in: Some(SignInOptions {
            oidc: Arc::new(oidc),
            public_url: base.clone(),
            signup: Signup::Open,
            session_ttl: Duration::from_secs(3600),
        }),
        store: store.map(OtherStore),
        ..AppOptions::default()
    };
    let app = build_app(model(), options).unwrap();
    let store = app.store.clone();
    let server = TestServer::serve_on(listener, app).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Site {
        server,
        issuer,
        store,
        http,
    }
}

fn cookie(res: &reqwest::Response, name: &str) -> String {
    res.headers()
        .get_all(SET_COOKIE)
        .iter()
        .find_map(|v| {
            let line = v.to_str().ok()?;
            let value = line.strip_prefix(&format!("{name}="))?.split(';').next()?;
            Some(value.to_owned())
        })
        .unwrap_or_else(|| panic!("no {name} cookie"))
}

fn location(res: &reqwest::Response) -> String {
    res.headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

impl Site {
    pub fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    /// The code flow as a browser follows it.
    pub async fn sign_in(&self, person: Person) -> Browser {
        self.issuer.sign_in_as(person);
        let login = self.http.get(self.url("/auth/login")).send().await.unwrap();
        let state = cookie(&login, "bridle_login");
        let back = self.http.get(location(&login)).send().await.unwrap();
        let done = self
            .http
            .get(location(&back))
            .header(COOKIE, format!("bridle_login={state}"))
            .send()
            .await
            .unwrap();
        assert_eq!(done.status(), StatusCode::SEE_OTHER);
        let mut who = Browser {
            cookie: cookie(&done, "bridle_session"),
            csrf: String::new(),
            user: String::new(),
        };
        let session: Value = self.get(&who, "/api/session").await.json().await.unwrap();
        who.csrf = session["csrf"].as_str().unwrap().to_owned();
        who.user = session["user"]["id"].as_str().unwrap().to_owned();
        who
    }

    pub async fn get(&self, who: &Browser, path: &str) -> reqwest::Response {
        self.http
            .get(self.url(path))
            .header(COOKIE, format!("bridle_session={}", who.cookie))
            .send()
            .await
            .unwrap()
    }

    async fn post(&self, who: &Browser, path: &str, body: Option<Value>) -> reqwest::Response {
        let mut req = self
            .http
            .post(self.url(path))
            .header(COOKIE, format!("bridle_session={}", who.cookie))
            .header("X-CSRF-Token", &who.csrf);
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await.unwrap()
    }

    /// A new web conversation of `who` with one turn saying `text`, run to its end.
    pub async fn converse(&self, who: &Browser, text: &str) -> String {
        let res = self.post(who, "/api/conversations", None).await;
        assert_eq!(res.status(), StatusCode::CREATED);
        let id = res.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let path = format!("/api/conversations/{id}/messages");
        let said = self.post(who, &path, Some(json!({ "text": text }))).await;
        assert_eq!(said.status(), StatusCode::OK);
        let streamed = said.text().await.unwrap();
        assert!(streamed.contains("event: done"), "{streamed}");
        id
    }

    pub async fn make_admin(&self, who: &Browser) {
        let mut account = self
            .store
            .account(&who.user.as_str().into())
            .await
            .unwrap()
            .unwrap();
        account.roles.insert(AccountRole::Admin);
        self.store.put_account(&account).await.unwrap();
    }
}

/// Alice (admin) with a conversation holding a tool call, and bob (no role) with his own;
/// their conversation ids.
pub async fn alice_and_bob(s: &Site) -> (Browser, String, Browser, String) {
    let a = s.sign_in(alice()).await;
    s.make_admin(&a).await;
    let conv_a = s.converse(&a, ALICE_SAYS).await;
    let b = s.sign_in(bob()).await;
    let conv_b = s.converse(&b, "what is my secret?").await;
    (a, conv_a, b, conv_b)
}
