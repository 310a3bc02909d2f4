//! Sign-in with OpenID Connect on the real local server, against a small issuer that the test
//! steers (`tests::fake_issuer`): the ID-token rules (expired, wrong audience, wrong issuer, bad
//! signature, `alg: none`, wrong nonce, an unknown key id then the provider's key rotation), the
//! session cookie (tampered, expired, signed out), CSRF, sign-up open and closed, two
//! signed-in users who cannot see or change each other's data, and an AI client's risky call
//! approved on the page by its signed-in owner — on SQLite and on DynamoDB (moto). The browser flow against a certified provider is `sign_in_browser.rs`.

use base64::Engine as _;
use bridle::auth::{Oidc, OidcError, OidcSettings, Signup};
use bridle::guards::GuardOptions;
use bridle::{AppOptions, OtherStore, SignInOptions, build_app};
use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;
use store::{Account, AccountRole, AccountStatus, Email, Store};
use tests::EchoModel;
use tests::fake_issuer::{FakeIssuer, Person, Tamper};
use tests::server::TestServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CLIENT: &str = "bridle-test";
const SESSION_TTL: Duration = Duration::from_secs(3600);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn oidc(issuer: &FakeIssuer, base: &str) -> Oidc {
    Oidc::discover(OidcSettings {
        issuer: issuer.issuer.clone(),
        client_id: CLIENT.into(),
        client_secret: Some("client-secret".into()),
        redirect_url: format!("{base}/auth/callback"),
    })
    .await
    .unwrap()
}

struct Site {
    server: TestServer,
    issuer: FakeIssuer,
    clock: Arc<AtomicI64>,
    store: Arc<dyn Store>,
    http: reqwest::Client,
    /// The session cookie's and the login cookie's names on this site.
    session: String,
    login: String,
}

async fn site(signup: Signup, store: Option<Arc<dyn Store>>) -> Site {
    site_with(signup, store, |options| options).await
}

async fn site_with(
    signup: Signup,
    store: Option<Arc<dyn Store>>,
    more: impl FnOnce(AppOptions) -> AppOptions,
) -> Site {
    let issuer = FakeIssuer::start(CLIENT).await;
    let (listener, base) = TestServer::bind().await;
    let clock = Arc::new(AtomicI64::new(now_ms()));
    let c = clock.clone();
    let options = AppOptions {
        sign_in: Some(SignInOptions {
            oidc: Arc::new(oidc(&issuer, &base).await),
            public_url: base.clone(),
            signup,
            session_ttl: SESSION_TTL,
        }),
        guards: GuardOptions {
            clock: Arc::new(move || c.load(Ordering::SeqCst)),
            ..GuardOptions::default()
        },
        store: store.map(OtherStore),
        ..AppOptions::default()
    };
    let options = more(options);
    let secure = options
        .sign_in
        .as_ref()
        .is_some_and(|o| o.public_url.starts_with("https://"));
    let prefix = if secure { "__Host-" } else { "" };
    let app = build_app(EchoModel::new(Duration::ZERO), options).unwrap();
    let store = app.store.clone();
    let server = TestServer::serve_on(listener, app).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    Site {
        server,
        issuer,
        clock,
        store,
        http,
        session: format!("{prefix}bridle_session"),
        login: format!("{prefix}bridle_login"),
    }
}

async fn dynamo() -> Arc<dyn Store> {
    tests::moto::dynamo_store("sign-in").await
}

/// The value of cookie `name` set by `res`, and the whole `Set-Cookie` line.
fn set_cookie(res: &reqwest::Response, name: &str) -> Option<(String, String)> {
    res.headers().get_all(SET_COOKIE).iter().find_map(|v| {
        let line = v.to_str().ok()?.to_owned();
        let value = line.strip_prefix(&format!("{name}="))?.split(';').next()?;
        Some((value.to_owned(), line))
    })
}

fn location(res: &reqwest::Response) -> String {
    res.headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// A signed-in browser: its session cookie and the page's CSRF token.
#[derive(Debug, Clone)]
struct Browser {
    cookie: String,
    csrf: String,
}

impl Site {
    /// Set the clock a second into the current minute (so a test's requests stay in one
    /// minute's counts) and answer the minute's start.
    fn a_second_into_a_minute(&self) -> i64 {
        let minute = now_ms() - now_ms().rem_euclid(60_000);
        self.clock.store(minute + 1_000, Ordering::SeqCst);
        minute
    }

    fn url(&self, path: &str) -> String {
        self.server.url(path)
    }

    /// The whole code flow as a browser follows it; `Err` is the callback's refusal.
    async fn sign_in(&self, person: Person) -> Result<Browser, reqwest::Response> {
        self.sign_in_from(&self.http, person).await
    }

    /// [`Site::sign_in`] from the browser `http` (say, on another address).
    async fn sign_in_from(
        &self,
        http: &reqwest::Client,
        person: Person,
    ) -> Result<Browser, reqwest::Response> {
        self.issuer.sign_in_as(person);
        let login = http.get(self.url("/auth/login")).send().await.unwrap();
        assert_eq!(login.status(), StatusCode::SEE_OTHER);
        let (state, line) = set_cookie(&login, &self.login).expect("the login cookie");
        assert!(
            line.contains("HttpOnly") && line.contains("SameSite=Lax"),
            "{line}"
        );
        let at_provider = location(&login);
        assert!(
            at_provider.starts_with(&self.issuer.issuer),
            "{at_provider}"
        );
        assert!(
            at_provider.contains("code_challenge_method=S256"),
            "{at_provider}"
        );
        let back = http.get(&at_provider).send().await.unwrap();
        let callback = location(&back);
        assert!(
            callback.starts_with(&self.url("/auth/callback")),
            "{callback}"
        );
        let done = http
            .get(&callback)
            .header(COOKIE, format!("{}={state}", self.login))
            .send()
            .await
            .unwrap();
        if done.status() != StatusCode::SEE_OTHER {
            return Err(done);
        }
        let (cookie, line) = set_cookie(&done, &self.session).expect("the session cookie");
        assert!(
            line.contains("HttpOnly") && line.contains("SameSite=Lax") && line.contains("Path=/"),
            "{line}"
        );
        let session: Value = self
            .get(
                &Browser {
                    cookie: cookie.clone(),
                    csrf: String::new(),
                },
                "/api/session",
            )
            .await
            .json()
            .await
            .unwrap();
        Ok(Browser {
            cookie,
            csrf: session["csrf"].as_str().unwrap().to_owned(),
        })
    }

    /// A sign-in on the provider's own session (nobody types a password): the callback's
    /// answer.
    async fn on_the_providers_session(&self) -> reqwest::Response {
        let login = self.http.get(self.url("/auth/login")).send().await.unwrap();
        let (state, _) = set_cookie(&login, &self.login).expect("the login cookie");
        let back = self.http.get(location(&login)).send().await.unwrap();
        assert_eq!(
            back.status(),
            StatusCode::SEE_OTHER,
            "signed in at the provider"
        );
        self.http
            .get(location(&back))
            .header(COOKIE, format!("{}={state}", self.login))
            .send()
            .await
            .unwrap()
    }

    /// The chats linked to `who`, as the page reads them.
    async fn links(&self, who: &Browser) -> Value {
        let listed: Value = self.get(who, "/api/links").await.json().await.unwrap();
        listed["links"].clone()
    }

    /// What the MCP door answers a client holding `token` (listing the tools).
    async fn mcp_door(&self, token: &str) -> StatusCode {
        self.http
            .post(self.url("/mcp"))
            .bearer_auth(token)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .send()
            .await
            .unwrap()
            .status()
    }

    async fn get(&self, who: &Browser, path: &str) -> reqwest::Response {
        self.http
            .get(self.url(path))
            .header(COOKIE, format!("{}={}", self.session, who.cookie))
            .send()
            .await
            .unwrap()
    }

    async fn post(&self, who: &Browser, path: &str, body: Option<Value>) -> reqwest::Response {
        let mut req = self
            .http
            .post(self.url(path))
            .header(COOKIE, format!("{}={}", self.session, who.cookie))
            .header("X-CSRF-Token", &who.csrf);
        if let Some(body) = body {
            req = req.json(&body);
        }
        req.send().await.unwrap()
    }

    /// The texts of the history at `path`, as `who` reads it.
    async fn history_texts(&self, who: &Browser, path: &str) -> Vec<String> {
        let history: Value = self.get(who, path).await.json().await.unwrap();
        history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["text"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn new_conversation(&self, who: &Browser) -> String {
        let res = self.post(who, "/api/conversations", None).await;
        assert_eq!(res.status(), StatusCode::CREATED);
        res.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

fn alice() -> Person {
    Person::new("sub-alice", "alice@example.com")
}

fn bob() -> Person {
    Person::new("sub-bob", "bob@example.com")
}

// --- ID-token rules ---------------------------------------------------------------------

#[tokio::test]
async fn id_tokens_are_checked_for_signature_issuer_audience_expiry_and_nonce() {
    let issuer = FakeIssuer::start(CLIENT).await;
    let oidc = oidc(&issuer, "http://127.0.0.1:9").await;
    let good = issuer.id_token(&alice(), "n-1");
    let who = oidc.verify_text(&good, "n-1").await.unwrap();
    assert_eq!(who.subject, "sub-alice");
    assert_eq!(who.email.as_deref(), Some("alice@example.com"));
    assert!(who.email_verified);

    let refused = |tamper: Tamper| {
        let issuer = issuer.clone();
        let oidc = &oidc;
        async move {
            issuer.tamper(tamper);
            let token = issuer.id_token(&alice(), "n-1");
            issuer.tamper(Tamper::None);
            oidc.verify_text(&token, "n-1").await.unwrap_err()
        }
    };
    for (tamper, expect) in [
        (Tamper::Expired, "Expired"),
        (Tamper::WrongAudience, "audience"),
        (Tamper::WrongIssuer, "issuer"),
        (Tamper::ForeignKey, "Signature"),
        (Tamper::Unsigned, ""),
    ] {
        let err = refused(tamper).await;
        assert!(
            matches!(err, OidcError::Token(_) | OidcError::Malformed(_)),
            "{tamper:?}: {err:?}"
        );
        assert!(err.to_string().contains(expect), "{tamper:?}: {err}");
    }
    let err = oidc.verify_text(&good, "another-nonce").await.unwrap_err();
    assert!(err.to_string().contains("nonce"), "{err}");
}

#[tokio::test]
async fn an_unknown_key_id_fetches_the_keys_again_once_so_rotation_needs_no_restart() {
    let issuer = FakeIssuer::start(CLIENT).await;
    let oidc = oidc(&issuer, "http://127.0.0.1:9").await;
    let fetched = issuer.jwks_fetches();
    issuer.rotate(2, "k2");
    let rotated = issuer.id_token(&alice(), "n-2");
    let who = oidc.verify_text(&rotated, "n-2").await.unwrap();
    assert_eq!(who.subject, "sub-alice");
    assert_eq!(issuer.jwks_fetches(), fetched + 1, "one refetch");
    // Another unknown key id right after: no second refetch within the minimum interval, and
    // the token is refused.
    issuer.rotate(3, "k3");
    let again = issuer.id_token(&alice(), "n-3");
    let err = oidc.verify_text(&again, "n-3").await.unwrap_err();
    assert!(err.to_string().contains("Signature"), "{err}");
    assert_eq!(issuer.jwks_fetches(), fetched + 1, "no refetch storm");
}

// --- Sessions and CSRF --------------------------------------------------------------------

#[tokio::test]
async fn without_a_session_the_api_says_401_and_the_page_sends_you_to_sign_in() {
    let s = site(Signup::Open, None).await;
    let res = s
        .http
        .get(s.url("/api/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    assert!(res.json::<Value>().await.unwrap()["error"].is_string());
    for path in ["/api/usage", "/api/notes", "/admin/budget", "/api/session"] {
        let res = s.http.get(s.url(path)).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{path}");
    }
    let res = s.http.get(s.url("/")).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), "/auth/login");
    // The webhooks, the health check and the page's assets need no session.
    assert_eq!(
        s.http.get(s.url("/healthz")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        s.http.get(s.url("/app.js")).send().await.unwrap().status(),
        200
    );
}

#[tokio::test]
async fn a_session_works_until_it_is_tampered_with_expires_or_is_signed_out() {
    let s = site(Signup::Open, None).await;
    let a = s.sign_in(alice()).await.unwrap();
    let me: Value = s.get(&a, "/api/session").await.json().await.unwrap();
    assert_eq!(me["user"]["email"], "alice@example.com");
    assert_eq!(me["sign_in"], true);
    assert_eq!(s.get(&a, "/api/conversations").await.status(), 200);

    let mut tampered = a.clone();
    tampered
        .cookie
        .replace_range(0..1, if a.cookie.starts_with('A') { "B" } else { "A" });
    assert_eq!(s.get(&tampered, "/api/conversations").await.status(), 401);

    // Signing out needs the CSRF token too, and ends the session for good.
    let mut no_csrf = a.clone();
    no_csrf.csrf.clear();
    assert_eq!(s.post(&no_csrf, "/auth/logout", None).await.status(), 403);
    let out = s.post(&a, "/auth/logout", None).await;
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    let (cleared, line) = set_cookie(&out, "bridle_session").unwrap();
    assert!(cleared.is_empty() && line.contains("Max-Age=0"), "{line}");
    assert_eq!(s.get(&a, "/api/conversations").await.status(), 401);

    // A new session lapses after its lifetime.
    let b = s.sign_in(alice()).await.unwrap();
    assert_eq!(s.get(&b, "/api/conversations").await.status(), 200);
    s.clock
        .fetch_add(SESSION_TTL.as_millis() as i64, Ordering::SeqCst);
    assert_eq!(s.get(&b, "/api/conversations").await.status(), 401);
}

/// Alice's laptop and phone are signed in, and the phone also holds a session at the identity
/// provider from when she last typed her password there. She signs out everywhere from the
/// laptop: both sessions end (Bob's does not), and the phone's provider session signs nobody
/// in: Bridle asks the provider to authenticate her again, which it cannot without her
/// password, and refuses a provider that answers with the old authentication all the same.
/// Her password on a new device signs her in.
async fn signing_out_everywhere_ends_every_session_and_the_providers_old_sign_in(
    store: Option<Arc<dyn Store>>,
) {
    let s = site(Signup::Open, store).await;
    let laptop = s.sign_in(alice()).await.unwrap();
    let phone = s.sign_in(alice()).await.unwrap();
    let bob = s.sign_in(bob()).await.unwrap();
    s.issuer
        .keep_session(alice(), chrono::Utc::now() - chrono::Duration::seconds(60));
    // A token for an AI client made from the phone, and one of Bob's.
    let mut tokens = Vec::new();
    for who in [&phone, &bob] {
        let made = s
            .post(
                who,
                "/api/mcp-tokens",
                Some(json!({"name": "Claude", "scope": "risky"})),
            )
            .await;
        assert_eq!(made.status(), StatusCode::CREATED);
        let made: Value = made.json().await.unwrap();
        tokens.push(made["token"].as_str().unwrap().to_owned());
    }
    assert_eq!(s.mcp_door(&tokens[0]).await, 200);
    let me: Value = s.get(&laptop, "/api/session").await.json().await.unwrap();
    let alice_id = transcript::UserId(me["user"]["id"].as_str().unwrap().to_owned());

    let mut no_csrf = laptop.clone();
    no_csrf.csrf.clear();
    let refused = s.post(&no_csrf, "/auth/logout-everywhere", None).await;
    assert_eq!(refused.status(), 403);
    assert_eq!(s.get(&phone, "/api/conversations").await.status(), 200);

    let out = s.post(&laptop, "/auth/logout-everywhere", None).await;
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    let (cleared, line) = set_cookie(&out, &s.session).unwrap();
    assert!(cleared.is_empty() && line.contains("Max-Age=0"), "{line}");
    for (who, browser) in [("laptop", &laptop), ("phone", &phone)] {
        let res = s.get(browser, "/api/conversations").await;
        assert_eq!(res.status(), 401, "{who}");
    }
    assert_eq!(s.get(&bob, "/api/conversations").await.status(), 200);
    // Her token is revoked (a stolen session could have made it to keep a way in); Bob's not.
    assert_eq!(s.mcp_door(&tokens[0]).await, 401);
    assert_eq!(s.mcp_door(&tokens[1]).await, 200);
    // One the revocation missed (made the moment it ran, or not yet listed) opens nothing.
    let (_, missed) = bridle::admin_cli::tokens::issue_token(
        s.server.app.tokens.as_ref(),
        &alice_id,
        "made as she signed out",
        store::TokenScope::Risky,
        None,
        s.clock.load(Ordering::SeqCst),
    )
    .await
    .unwrap();
    assert_eq!(s.mcp_door(&missed).await, 401);
    // So does one a request already running made a moment after (another instance's clock).
    let (_, in_flight) = bridle::admin_cli::tokens::issue_token(
        s.server.app.tokens.as_ref(),
        &alice_id,
        "made as she signed out, a second later",
        store::TokenScope::Risky,
        None,
        s.clock.load(Ordering::SeqCst) + 1_000,
    )
    .await
    .unwrap();
    assert_eq!(s.mcp_door(&in_flight).await, 401);
    // Anything signed in from here on is later than the sign-out.
    s.clock.fetch_add(
        bridle::auth::routes::SIGN_OUT_AHEAD_MS + 1_000,
        Ordering::SeqCst,
    );

    // The phone's provider session: the callback sends it back to the provider, asking for a
    // new authentication, with a new sign-in of its own and no session.
    let again = s.on_the_providers_session().await;
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(&again, &s.session).is_none());
    let (state, _) = set_cookie(&again, &s.login).expect("a new sign-in");
    let at_provider = location(&again);
    assert!(
        at_provider.starts_with(&s.issuer.issuer)
            && at_provider.contains("prompt=login")
            && at_provider.contains("max_age=0"),
        "{at_provider}"
    );
    let at = s.http.get(&at_provider).send().await.unwrap();
    assert_eq!(at.status(), 403, "the provider wants her password");
    assert_eq!(s.issuer.prompts(), ["", "", "", "", "login"]);

    // A provider that signs her in on its old session even so is refused.
    s.issuer.ignore_prompt();
    let back = s.http.get(&at_provider).send().await.unwrap();
    let done = s
        .http
        .get(location(&back))
        .header(COOKIE, format!("{}={state}", s.login))
        .send()
        .await
        .unwrap();
    assert!(set_cookie(&done, &s.session).is_none());
    refused_with(done, StatusCode::FORBIDDEN, "You signed out everywhere").await;

    // Her password signs her in anywhere.
    let new = s.sign_in(alice()).await.unwrap();
    assert_eq!(s.get(&new, "/api/conversations").await.status(), 200);
    assert_eq!(s.get(&phone, "/api/conversations").await.status(), 401);
}

/// A sign-in the provider authenticated just after a sign-out everywhere, inside the two
/// seconds the sign-out's cut runs ahead of it, starts a session that works (past the cut);
/// one authenticated a second and a half before it is sent back to the provider.
#[tokio::test]
async fn a_sign_in_authenticated_just_after_signing_out_everywhere_works() {
    let s = site(Signup::Open, None).await;
    let laptop = s.sign_in(alice()).await.unwrap();
    let moment = s.clock.load(Ordering::SeqCst);
    let out = s.post(&laptop, "/auth/logout-everywhere", None).await;
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap();

    s.issuer.keep_session(alice(), at(moment - 1_500));
    let back = s.on_the_providers_session().await;
    assert_eq!(back.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(&back, &s.session).is_none());
    assert!(
        location(&back).contains("prompt=login"),
        "{}",
        location(&back)
    );

    s.issuer.keep_session(alice(), at(moment + 1_000));
    let signed_in = s.on_the_providers_session().await;
    let (cookie, _) = set_cookie(&signed_in, &s.session).expect("a session");
    let phone = Browser {
        cookie,
        csrf: String::new(),
    };
    assert_eq!(s.get(&phone, "/api/conversations").await.status(), 200);
}

/// A chat's message `text`, from Telegram chat `chat`, as the webhook queues it.
fn telegram_job(chat: &str, text: &str) -> queue::TurnJob {
    queue::TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "telegram".into(),
        message_id: format!("{chat}-{text}"),
        conversation_key: chat.into(),
        external_user_id: chat.into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
        received_at_ms: now_ms(),
    }
}

/// What a stolen session made and kept back opens nothing once its owner signs out
/// everywhere: a link code it made before links no chat (one made after signing in again
/// does), and an access token it was making as she signed out (its body held back until
/// then, past the gate) is not kept.
async fn signing_out_everywhere_voids_what_a_stolen_session_made(store: Option<Arc<dyn Store>>) {
    let channels = tests::server::channels_from(&[
        (
            "TELEGRAM_SECRET_TOKEN",
            "tg-secret-0123456789abcdef-0123456",
        ),
        ("TELEGRAM_BOT_TOKEN", "123456:ABC-def"),
    ]);
    let s = site_with(Signup::Open, store, |o| AppOptions { channels, ..o }).await;
    let laptop = s.sign_in(alice()).await.unwrap();
    let thief = s.sign_in(alice()).await.unwrap();
    let me: Value = s.get(&laptop, "/api/session").await.json().await.unwrap();
    let alice_id = transcript::UserId(me["user"]["id"].as_str().unwrap().to_owned());
    let code_of = |made: Value| {
        channels::link_code::canonical(made["code"].as_str().unwrap()).expect("a code")
    };
    let made = s.post(&thief, "/api/link-code", None).await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let kept = code_of(made.json().await.unwrap());
    // A chat of the thief's own account, sent another code of hers, was offered a move code
    // to move to her account; the thief kept that too.
    let mallory = transcript::UserId::from("mallory");
    s.store
        .bind_identity("telegram", "7003", &mallory, now_ms())
        .await
        .unwrap();
    let move_code = channel_jobs::identity::MoveCode::make(
        s.store.as_ref(),
        &telegram_job("7003", "asked"),
        &alice_id,
        false,
        s.clock.load(Ordering::SeqCst) - 1_000,
    )
    .await
    .unwrap();

    // The thief asks for an access token and holds the body back: the gate lets it through.
    let body = json!({"name": "Claude", "scope": "risky"}).to_string();
    let mut held = tokio::net::TcpStream::connect(s.server.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /api/mcp-tokens HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {}={}\r\n\
         X-CSRF-Token: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        s.session,
        thief.cookie,
        thief.csrf,
        body.len()
    );
    held.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let out = s.post(&laptop, "/auth/logout-everywhere", None).await;
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    held.write_all(body.as_bytes()).await.unwrap();
    let mut answer = String::new();
    held.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    assert!(answer.contains("signed out everywhere"), "{answer}");
    let tokens = s.server.app.tokens.tokens_of(&alice_id).await.unwrap();
    assert_eq!(tokens.len(), 1, "{tokens:?}");
    assert!(!tokens[0].is_live(now_ms()), "revoked: {tokens:?}");

    // The code the thief kept links no chat of theirs.
    let jobs = channel_jobs::identity::resolve;
    let resolved = jobs(s.store.as_ref(), &telegram_job("7001", &kept), now_ms())
        .await
        .unwrap();
    assert!(
        matches!(
            resolved,
            channel_jobs::identity::Resolved::StaleCode { bound: None }
        ),
        "{resolved:?}"
    );
    assert_eq!(s.store.identity("telegram", "7001").await.unwrap(), None);
    // Nor does the move code move the thief's chat to her.
    let moving = telegram_job("7003", &format!("MOVE {move_code}"));
    let resolved = jobs(s.store.as_ref(), &moving, now_ms()).await.unwrap();
    assert!(
        matches!(resolved, channel_jobs::identity::Resolved::StaleCode { .. }),
        "{resolved:?}"
    );
    assert_eq!(
        s.store.identity("telegram", "7003").await.unwrap(),
        Some(mallory)
    );

    // Signed in again, her own new code links her chat.
    s.clock.fetch_add(
        bridle::auth::routes::SIGN_OUT_AHEAD_MS + 1_000,
        Ordering::SeqCst,
    );
    let again = s.sign_in(alice()).await.unwrap();
    let made = s.post(&again, "/api/link-code", None).await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let fresh = code_of(made.json().await.unwrap());
    let resolved = jobs(s.store.as_ref(), &telegram_job("7002", &fresh), now_ms())
        .await
        .unwrap();
    assert_eq!(
        resolved,
        channel_jobs::identity::Resolved::Linked(alice_id.clone())
    );
    assert_eq!(
        s.store.identity("telegram", "7002").await.unwrap(),
        Some(alice_id)
    );
}

#[tokio::test]
async fn sqlite_signing_out_everywhere_voids_what_a_stolen_session_made() {
    signing_out_everywhere_voids_what_a_stolen_session_made(None).await;
}

#[tokio::test]
async fn dynamodb_signing_out_everywhere_voids_what_a_stolen_session_made() {
    signing_out_everywhere_voids_what_a_stolen_session_made(Some(dynamo().await)).await;
}

/// Alice sees the chats linked to her account and unlinks one from the web (a lost phone's
/// WhatsApp): its messages come from a stranger again. Bob neither sees it nor can unlink it,
/// and unlinking needs the page's CSRF token.
async fn a_person_unlinks_a_chat_of_theirs_from_the_web(store: Option<Arc<dyn Store>>) {
    let s = site(Signup::Open, store).await;
    let alice = s.sign_in(alice()).await.unwrap();
    let bob = s.sign_in(bob()).await.unwrap();
    let me: Value = s.get(&alice, "/api/session").await.json().await.unwrap();
    let alice_id = transcript::UserId(me["user"]["id"].as_str().unwrap().to_owned());
    let at = s.clock.load(Ordering::SeqCst) - 60_000;
    s.store
        .bind_identity("whatsapp", "491701234567", &alice_id, at)
        .await
        .unwrap();
    let listed = s.links(&alice).await;
    assert_eq!(
        listed,
        json!([{"channel": "whatsapp", "external_id": "491701234567", "linked_at_ms": at}])
    );
    assert_eq!(s.links(&bob).await, json!([]));
    let unlink = json!({"channel": "whatsapp", "external_id": "491701234567"});

    let res = s
        .post(&bob, "/api/links/unlink", Some(unlink.clone()))
        .await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let mut no_csrf = alice.clone();
    no_csrf.csrf.clear();
    let res = s
        .post(&no_csrf, "/api/links/unlink", Some(unlink.clone()))
        .await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let bound = s.store.identity("whatsapp", "491701234567").await.unwrap();
    assert_eq!(bound, Some(alice_id.clone()));
    // Her sign-in's own binding at the provider is no chat: not listed, not unlinked.
    let sign_in = json!({"channel": "oidc", "external_id": "sub-alice"});
    let res = s.post(&alice, "/api/links/unlink", Some(sign_in)).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        s.store.identity("oidc", "sub-alice").await.unwrap(),
        Some(alice_id.clone())
    );

    let res = s
        .post(&alice, "/api/links/unlink", Some(unlink.clone()))
        .await;
    assert_eq!(res.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        s.store.identity("whatsapp", "491701234567").await.unwrap(),
        None
    );
    assert_eq!(s.links(&alice).await, json!([]));
    let res = s.post(&alice, "/api/links/unlink", Some(unlink)).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND, "already unlinked");
}

/// Ids longer than any chat's are no chat of anyone's: not found, and the store is not asked
/// (DynamoDB refuses a key over 2,048 bytes outright, which would read as an outage: a 500 and
/// an error log on demand).
#[tokio::test]
async fn an_unlink_of_an_id_longer_than_any_chats_asks_no_store() {
    let crash = tests::crash_store::Crash::never();
    let sqlite = Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap());
    let store = Arc::new(tests::crash_store::CrashStore::combining(
        sqlite,
        crash.clone(),
    ));
    let s = site(Signup::Open, Some(store)).await;
    let alice = s.sign_in(alice()).await.unwrap();
    for (channel, external_id) in [
        ("whatsapp".to_owned(), "4".repeat(3_000)),
        ("w".repeat(3_000), "491701234567".to_owned()),
    ] {
        let long = json!({"channel": channel, "external_id": external_id});
        let res = s.post(&alice, "/api/links/unlink", Some(long)).await;
        assert_eq!(res.status(), StatusCode::NOT_FOUND);
    }
    assert!(
        !crash.log().contains(&"unbind_identity_of"),
        "{:?}",
        crash.log()
    );
    let known = json!({"channel": "whatsapp", "external_id": "491701234567"});
    let res = s.post(&alice, "/api/links/unlink", Some(known)).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert!(
        crash.log().contains(&"unbind_identity_of"),
        "{:?}",
        crash.log()
    );
}

#[tokio::test]
async fn sqlite_a_person_unlinks_a_chat_of_theirs_from_the_web() {
    a_person_unlinks_a_chat_of_theirs_from_the_web(None).await;
}

#[tokio::test]
async fn dynamodb_a_person_unlinks_a_chat_of_theirs_from_the_web() {
    a_person_unlinks_a_chat_of_theirs_from_the_web(Some(dynamo().await)).await;
}

/// A provider whose tokens do not say when it authenticated the person cannot show that a
/// sign-in after a sign-out everywhere is new: asked once with `max_age`, it still does not
/// say, and is refused; and the login cookie's flag that says it was asked (the browser's to
/// edit) does not let a plain sign-in skip the question.
#[tokio::test]
async fn after_signing_out_everywhere_a_sign_in_that_does_not_say_when_is_refused() {
    let s = site(Signup::Open, None).await;
    let laptop = s.sign_in(alice()).await.unwrap();
    s.issuer
        .keep_session(alice(), chrono::Utc::now() - chrono::Duration::seconds(60));
    s.issuer.omit_auth_time();
    let out = s.post(&laptop, "/auth/logout-everywhere", None).await;
    assert_eq!(out.status(), StatusCode::NO_CONTENT);
    s.clock.fetch_add(
        bridle::auth::routes::SIGN_OUT_AHEAD_MS + 1_000,
        Ordering::SeqCst,
    );

    // Asked once, with `max_age`.
    let again = s.on_the_providers_session().await;
    assert_eq!(again.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(&again, &s.session).is_none());
    assert!(
        location(&again).contains("max_age=0"),
        "{}",
        location(&again)
    );

    // A plain sign-in whose cookie was edited to say it was asked already.
    let login = s.http.get(s.url("/auth/login")).send().await.unwrap();
    let (cookie, _) = set_cookie(&login, &s.login).unwrap();
    let mut pending: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&cookie)
            .unwrap(),
    )
    .unwrap();
    pending["again"] = json!(true);
    let edited = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&pending).unwrap());
    let back = s.http.get(location(&login)).send().await.unwrap();
    let done = s
        .http
        .get(location(&back))
        .header(COOKIE, format!("{}={edited}", s.login))
        .send()
        .await
        .unwrap();
    refused_with(done, StatusCode::FORBIDDEN, "You signed out everywhere").await;
}

#[tokio::test]
async fn sqlite_signing_out_everywhere_ends_every_session_and_the_providers_old_sign_in() {
    signing_out_everywhere_ends_every_session_and_the_providers_old_sign_in(None).await;
}

#[tokio::test]
async fn dynamodb_signing_out_everywhere_ends_every_session_and_the_providers_old_sign_in() {
    signing_out_everywhere_ends_every_session_and_the_providers_old_sign_in(Some(dynamo().await))
        .await;
}

#[tokio::test]
async fn every_change_needs_the_sessions_csrf_token() {
    let s = site(Signup::Open, None).await;
    let a = s.sign_in(alice()).await.unwrap();
    let other = s.sign_in(bob()).await.unwrap();
    for csrf in ["", "wrong-token", other.csrf.as_str()] {
        let forged = Browser {
            cookie: a.cookie.clone(),
            csrf: csrf.to_owned(),
        };
        for path in [
            "/api/conversations",
            "/api/link-code",
            "/api/assistant-grant",
        ] {
            let res = s.post(&forged, path, None).await;
            assert_eq!(res.status(), StatusCode::FORBIDDEN, "{path} with {csrf:?}");
        }
    }
    let plain = s
        .http
        .post(s.url("/api/conversations"))
        .header(COOKIE, format!("bridle_session={}", a.cookie))
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), StatusCode::FORBIDDEN, "no header at all");
    assert_eq!(s.post(&a, "/api/conversations", None).await.status(), 201);
}

/// Served over HTTPS, the cookies are `__Host-` cookies (`Secure`, `Path=/`, no `Domain`),
/// which a browser takes only from this very host: a page on a sibling host (another function
/// URL under `on.aws`, another subdomain of the operator's) can set a plain-named cookie for
/// the parent domain, and it reaches this host, but it is not one of ours: a session or a
/// sign-in planted that way is ignored. A cookie sent twice is no cookie (which one is ours
/// cannot be told). And no page of the site may be framed by another.
#[tokio::test]
async fn cookies_from_another_host_sign_nobody_in_and_no_page_is_framed() {
    let s = site_with(Signup::Open, None, |mut options| {
        if let Some(sign_in) = options.sign_in.as_mut() {
            sign_in.public_url = "https://bridle.example".into();
        }
        options
    })
    .await;
    assert_eq!(s.session, "__Host-bridle_session");
    // The attacker's own sign-in, stopped before the callback: a login cookie and a callback.
    s.issuer.sign_in_as(bob());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    let login = s.http.get(s.url("/auth/login")).send().await.unwrap();
    let (_, line) = set_cookie(&login, "__Host-bridle_login").unwrap();
    assert!(
        line.contains("; Path=/;") && line.contains("; Secure") && !line.contains("Domain"),
        "{line}"
    );
    // Planted under the plain name (as for the parent domain): the victim's browser sends it
    // to the callback, and it signs nobody in.
    let planted = s
        .http
        .get(&callback)
        .header(COOKIE, format!("bridle_login={state}"))
        .send()
        .await
        .unwrap();
    refused_with(
        planted,
        StatusCode::BAD_REQUEST,
        "started in another browser",
    )
    .await;

    let mallory = s.sign_in(bob()).await.unwrap();
    let alice = s.sign_in(alice()).await.unwrap();
    let me = |cookie: String| {
        s.http
            .get(s.url("/api/session"))
            .header(COOKIE, cookie)
            .send()
    };
    let res = me(format!("__Host-bridle_session={}", alice.cookie))
        .await
        .unwrap();
    assert_eq!(
        res.json::<Value>().await.unwrap()["user"]["email"],
        "alice@example.com"
    );
    // Mallory's session planted under the plain name, beside Alice's own: Alice stays Alice.
    let res = me(format!(
        "bridle_session={}; __Host-bridle_session={}",
        mallory.cookie, alice.cookie
    ))
    .await
    .unwrap();
    assert_eq!(
        res.json::<Value>().await.unwrap()["user"]["email"],
        "alice@example.com"
    );
    // Alone, it is no session at all.
    let res = s
        .http
        .get(s.url("/api/conversations"))
        .header(COOKIE, format!("bridle_session={}", mallory.cookie))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    // The session cookie twice (Mallory's first, as a longer path would send it): neither.
    let res = s
        .http
        .get(s.url("/api/conversations"))
        .header(
            COOKIE,
            format!(
                "__Host-bridle_session={}; __Host-bridle_session={}",
                mallory.cookie, alice.cookie
            ),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::UNAUTHORIZED);

    for path in ["/", "/connect", "/api/session", "/auth/signed-out"] {
        let res = s.get(&alice, path).await;
        let header = |name| {
            res.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(header("x-frame-options"), "DENY", "{path}");
        assert!(
            header("content-security-policy").contains("frame-ancestors 'none'"),
            "{path}"
        );
        // The CSRF token `/api/session` answers, like every answer, is kept by no cache.
        assert_eq!(header("cache-control"), "no-store", "{path}");
        // Scripts only from our own files; no answer read as another type, loaded into
        // another site's page, or named in a Referer.
        let csp = header("content-security-policy");
        assert!(
            csp.contains("script-src 'self'") && csp.contains("object-src 'none'"),
            "{path}: {csp}"
        );
        assert_eq!(header("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(
            header("cross-origin-resource-policy"),
            "same-origin",
            "{path}"
        );
        assert_eq!(header("referrer-policy"), "no-referrer", "{path}");
    }
}

/// Two first sign-ins of one person at the same moment (two tabs, a double click): the one
/// whose account binds the provider's subject first wins, and the other is signed in to that
/// same account, not to an account of its own the first then loses.
#[tokio::test]
async fn a_first_sign_in_that_loses_a_race_uses_the_account_that_won() {
    let flaky = Arc::new(tests::FlakyStore::new(Arc::new(
        store_sqlite::SqliteStore::open_in_memory().unwrap(),
    )));
    let won = Account {
        email: Some(Email::parse("first-tab@example.com").unwrap()),
        ..Account::new("first-tab", "Alice")
    };
    store::Accounts::create_account(flaky.as_ref(), &won)
        .await
        .unwrap();
    let s = site(Signup::Open, Some(flaky.clone() as Arc<dyn Store>)).await;
    // Just before this sign-in binds its new account, the other one binds the subject.
    flaky.bound_elsewhere_first(Some("first-tab".into()));
    let a = s.sign_in(alice()).await.unwrap();
    let me: Value = s.get(&a, "/api/session").await.json().await.unwrap();
    assert_eq!(me["user"]["email"], "first-tab@example.com");
    assert_eq!(
        s.store.identity("oidc", "sub-alice").await.unwrap(),
        Some("first-tab".into())
    );
    // And the next sign-in goes straight to it.
    let again = s.sign_in(alice()).await.unwrap();
    let me: Value = s.get(&again, "/api/session").await.json().await.unwrap();
    assert_eq!(me["user"]["email"], "first-tab@example.com");
}

/// `GET /auth/login` up to the provider's redirect back: the login cookie and the callback.
async fn start_sign_in(s: &Site, path: &str) -> (String, String) {
    let login = s.http.get(s.url(path)).send().await.unwrap();
    let (state, _) = set_cookie(&login, &s.login).unwrap();
    let back = s.http.get(location(&login)).send().await.unwrap();
    (state, location(&back))
}

async fn callback_with(s: &Site, callback: &str, login_cookie: &str) -> reqwest::Response {
    s.http
        .get(callback)
        .header(COOKIE, format!("{}={login_cookie}", s.login))
        .send()
        .await
        .unwrap()
}

async fn refused_with(res: reqwest::Response, status: StatusCode, sentence: &str) {
    assert_eq!(res.status(), status);
    assert!(set_cookie(&res, "bridle_session").is_none());
    let page = res.text().await.unwrap();
    assert!(page.contains(sentence), "{page}");
}

#[tokio::test]
async fn a_callback_from_another_browser_or_a_replay_gets_no_session() {
    let s = site(Signup::Open, None).await;
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    // The attacker's browser has no (or another) login cookie.
    let res = s.http.get(&callback).send().await.unwrap();
    refused_with(res, StatusCode::BAD_REQUEST, "started in another browser").await;
    let (other, _) = start_sign_in(&s, "/auth/login").await;
    let res = callback_with(&s, &callback, &other).await;
    refused_with(res, StatusCode::BAD_REQUEST, "started in another browser").await;
    assert_eq!(
        callback_with(&s, &callback, &state).await.status(),
        StatusCode::SEE_OTHER
    );
    // The provider will not exchange the code again.
    let replay = callback_with(&s, &callback, &state).await;
    refused_with(replay, StatusCode::UNAUTHORIZED, "could not be verified").await;
}

#[tokio::test]
async fn a_replay_signs_nobody_in_even_where_the_provider_takes_a_code_twice() {
    let s = site(Signup::Open, None).await;
    s.issuer.reuse_codes();
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    assert_eq!(
        callback_with(&s, &callback, &state).await.status(),
        StatusCode::SEE_OTHER
    );
    let replay = callback_with(&s, &callback, &state).await;
    refused_with(replay, StatusCode::BAD_REQUEST, "already been used").await;
}

/// Starting sign-ins is free for whoever floods `GET /auth/login`: the sign-in in progress is
/// the browser's cookie, and only a sign-in the provider verified is written (once); a callback
/// that reaches the provider writes its count per address first.
async fn starting_sign_ins_writes_nothing_and_a_sign_in_writes_its_state_once(
    inner: Arc<dyn Store>,
) {
    let crash = tests::crash_store::Crash::never();
    let counted: Arc<dyn Store> =
        Arc::new(tests::crash_store::CrashStore::new(inner, crash.clone()));
    let s = site(Signup::Open, Some(counted)).await;
    // The server's own periodic sweep of expired records aside.
    let writes = || {
        let mut log = crash.log();
        log.retain(|w| *w != "sweep_expired");
        log
    };
    for _ in 0..200 {
        let login = s.http.get(s.url("/auth/login")).send().await.unwrap();
        assert_eq!(login.status(), StatusCode::SEE_OTHER);
    }
    assert_eq!(writes(), Vec::<&str>::new(), "starting sign-ins wrote");
    // A made-up callback with a cookie of its own: refused by the provider; all it wrote is its
    // place in its address's sign-ins a minute (one count, bounded per address).
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    let made_up = callback.replace("code=", "code=made-up-");
    let res = callback_with(&s, &made_up, &state).await;
    refused_with(res, StatusCode::UNAUTHORIZED, "could not be verified").await;
    assert_eq!(
        writes(),
        ["reserve"],
        "a refused callback wrote more than its count"
    );
    s.sign_in(alice()).await.unwrap();
    let log = writes();
    assert_eq!(
        log.iter().filter(|w| **w == "first_use_of_login").count(),
        1,
        "{log:?}"
    );
    assert!(log.contains(&"put_session"), "{log:?}");
}

#[tokio::test]
async fn sqlite_starting_sign_ins_writes_nothing_and_a_sign_in_writes_its_state_once() {
    let store: Arc<dyn Store> = Arc::new(store_sqlite::SqliteStore::open_in_memory().unwrap());
    starting_sign_ins_writes_nothing_and_a_sign_in_writes_its_state_once(store).await;
}

#[tokio::test]
async fn dynamodb_starting_sign_ins_writes_nothing_and_a_sign_in_writes_its_state_once() {
    starting_sign_ins_writes_nothing_and_a_sign_in_writes_its_state_once(dynamo().await).await;
}

#[tokio::test]
async fn an_edited_or_stale_login_cookie_gets_no_session_and_no_other_sites_address() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let s = site(Signup::Open, None).await;
    s.issuer.sign_in_as(alice());
    // Out of shape.
    let (_, callback) = start_sign_in(&s, "/auth/login").await;
    let res = callback_with(&s, &callback, "bm90IGpzb24").await;
    refused_with(res, StatusCode::BAD_REQUEST, "started in another browser").await;
    // Edited to send the browser elsewhere afterwards: the path is checked again.
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login?return_to=/c/1").await;
    let mut held: Value = serde_json::from_slice(&b64.decode(&state).unwrap()).unwrap();
    assert_eq!(held["return_to"], "/c/1");
    held["return_to"] = json!("//evil.example/");
    let edited = b64.encode(held.to_string());
    let res = callback_with(&s, &callback, &edited).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), "/");
    // A tab a browser drops from the address would make `/\t/evil.example` another site's.
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login?return_to=/%09/evil.example").await;
    let held: Value = serde_json::from_slice(&b64.decode(&state).unwrap()).unwrap();
    assert_eq!(held["return_to"], "/");
    let res = callback_with(&s, &callback, &state).await;
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&res), "/");
    // Older than its ten minutes.
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    s.clock.fetch_add(10 * 60 * 1000, Ordering::SeqCst);
    let res = callback_with(&s, &callback, &state).await;
    refused_with(res, StatusCode::BAD_REQUEST, "took too long").await;
}

#[tokio::test]
async fn a_tampered_token_from_the_provider_signs_nobody_in() {
    let s = site(Signup::Open, None).await;
    for tamper in [
        Tamper::Expired,
        Tamper::WrongAudience,
        Tamper::ForeignKey,
        Tamper::Unsigned,
    ] {
        s.issuer.tamper(tamper);
        let res = s.sign_in(alice()).await.unwrap_err();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED, "{tamper:?}");
        assert!(set_cookie(&res, "bridle_session").is_none());
    }
}

// --- Sign-up, closed accounts, roles ------------------------------------------------------

#[tokio::test]
async fn closed_sign_up_admits_only_accounts_the_operator_made_by_verified_email() {
    let s = site(Signup::Closed, None).await;
    let res = s.sign_in(alice()).await.unwrap_err();
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    assert!(res.text().await.unwrap().contains("bridle users add"));
    s.store
        .create_account(&Account {
            email: Some(Email::parse("alice@example.com").unwrap()),
            ..Account::new("u-alice", "Alice")
        })
        .await
        .unwrap();
    // The provider does not vouch for the address: no account by it.
    let unverified = Person {
        email_verified: false,
        ..alice()
    };
    assert_eq!(
        s.sign_in(unverified).await.unwrap_err().status(),
        StatusCode::FORBIDDEN
    );
    let a = s.sign_in(alice()).await.unwrap();
    let me: Value = s.get(&a, "/api/session").await.json().await.unwrap();
    assert_eq!(me["user"]["id"], "u-alice");
    // Bound now: the subject signs in even if the provider stops sending the address.
    let no_email = Person {
        email: None,
        ..alice()
    };
    assert!(s.sign_in(no_email).await.is_ok());
}

#[tokio::test]
async fn a_closed_account_loses_its_session_and_cannot_sign_in() {
    let s = site(Signup::Open, None).await;
    let a = s.sign_in(alice()).await.unwrap();
    let me: Value = s.get(&a, "/api/session").await.json().await.unwrap();
    let id = me["user"]["id"].as_str().unwrap().to_owned();
    s.store
        .set_account_status(&id.as_str().into(), AccountStatus::Closed)
        .await
        .unwrap();
    assert_eq!(s.get(&a, "/api/conversations").await.status(), 401);
    assert_eq!(
        s.sign_in(alice()).await.unwrap_err().status(),
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn the_budget_page_is_for_admin_and_finance() {
    let s = site(Signup::Open, None).await;
    let a = s.sign_in(alice()).await.unwrap();
    assert_eq!(
        s.get(&a, "/admin/budget").await.status(),
        StatusCode::FORBIDDEN
    );
    let me: Value = s.get(&a, "/api/session").await.json().await.unwrap();
    let id: transcript::UserId = me["user"]["id"].as_str().unwrap().into();
    let mut account = s.store.account(&id).await.unwrap().unwrap();
    account.roles.insert(AccountRole::Finance);
    s.store.put_account(&account).await.unwrap();
    let page = s.get(&a, "/admin/budget").await;
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.text().await.unwrap().contains("<svg"));
}

// --- Two users ----------------------------------------------------------------------------

async fn two_users_cannot_reach_each_others_data(s: Site) {
    let a = s.sign_in(alice()).await.unwrap();
    let b = s.sign_in(bob()).await.unwrap();
    let conv = s.new_conversation(&a).await;
    let said = s
        .post(
            &a,
            &format!("/api/conversations/{conv}/messages"),
            Some(json!({"text": "alice's secret plan"})),
        )
        .await;
    assert_eq!(said.status(), 200);
    let streamed = said.text().await.unwrap();
    assert!(streamed.contains("event: done"), "{streamed}");

    // Bob: alice's conversation reads as absent, and he cannot write into it.
    let path = format!("/api/conversations/{conv}/messages");
    let res = s.get(&b, &path).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    assert!(!res.text().await.unwrap().contains("secret"));
    let res = s.post(&b, &path, Some(json!({"text": "let me in"}))).await;
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let listed: Value = s.get(&b, "/api/conversations").await.json().await.unwrap();
    assert_eq!(listed, json!([]), "bob sees none of alice's conversations");
    let listed: Value = s.get(&a, "/api/conversations").await.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let notes: Value = s.get(&b, "/api/notes").await.json().await.unwrap();
    assert_eq!(notes["notes"], json!([]));
    let usage = s.get(&b, "/api/usage").await;
    assert_eq!(usage.status(), 200);

    // Alice's history is intact and bob's attempt left nothing in it.
    let texts = s.history_texts(&a, &path).await;
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert_eq!(texts[0], "alice's secret plan");

    // The assistant's grant is each person's own: bob narrows his; alice's is untouched.
    let set = s
        .post(&b, "/api/assistant-grant", Some(json!({"grant": "read"})))
        .await;
    assert_eq!(set.status(), 200);
    let mine: Value = s
        .get(&b, "/api/assistant-grant")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(mine["grant"], "read", "{mine}");
    assert_eq!(mine["choices"].as_array().unwrap().len(), 3, "{mine}");
    let hers: Value = s
        .get(&a, "/api/assistant-grant")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(hers["grant"], "risky", "{hers}");
    let bad = s
        .post(&b, "/api/assistant-grant", Some(json!({"grant": "admin"})))
        .await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    let said: Value = bad.json().await.unwrap();
    assert_eq!(
        said["error"],
        "Choose what the assistant may do: read, write or risky."
    );
    let me_a: Value = s.get(&a, "/api/session").await.json().await.unwrap();
    let alice_id: transcript::UserId = me_a["user"]["id"].as_str().unwrap().into();
    let alice_account = s.store.account(&alice_id).await.unwrap().unwrap();
    assert_eq!(alice_account.assistant_grant, transcript::Grant::Risky);

    // A link code is its creator's: it redeems for bob, not alice.
    let me_b: Value = s.get(&b, "/api/session").await.json().await.unwrap();
    let code = s.post(&b, "/api/link-code", None).await;
    // No messaging channel is configured on this server: a clear 409, for anyone.
    assert_eq!(code.status(), StatusCode::CONFLICT);
    let bob_id: transcript::UserId = me_b["user"]["id"].as_str().unwrap().into();
    s.store
        .create_link_code("K7PQ2345", &bob_id, now_ms(), now_ms() + 60_000)
        .await
        .unwrap();
    assert_eq!(
        s.store
            .consume_link_code("K7PQ2345", "whatsapp#+1555", now_ms())
            .await
            .unwrap(),
        Some(bob_id.clone())
    );
    let bob_account = s.store.account(&bob_id).await.unwrap().unwrap();
    assert_eq!(bob_account.assistant_grant, transcript::Grant::Read);
}

#[tokio::test]
async fn sqlite_two_signed_in_users_cannot_reach_each_others_data() {
    two_users_cannot_reach_each_others_data(site(Signup::Open, None).await).await;
}

#[tokio::test]
async fn dynamodb_two_signed_in_users_cannot_reach_each_others_data() {
    two_users_cannot_reach_each_others_data(site(Signup::Open, Some(dynamo().await)).await).await;
}

// --- Changes per minute -----------------------------------------------------------------

/// A user's changes through the web app are counted per minute across all their sessions;
/// past the rate a change gets 429 with `Retry-After` and a sentence, and nothing is done (no
/// message stored or answered, no conversation made). Reading and signing out still work,
/// another user has their own count, and the next minute starts again.
async fn a_users_changes_are_limited_per_minute_across_sessions(store: Option<Arc<dyn Store>>) {
    let s = site_with(Signup::Open, store, |o| AppOptions {
        web_write_rate: budget::RequestRate { per_minute: 3 },
        ..o
    })
    .await;
    let minute = s.a_second_into_a_minute();
    let (a1, a2) = (
        s.sign_in(alice()).await.unwrap(),
        s.sign_in(alice()).await.unwrap(),
    );
    let b = s.sign_in(bob()).await.unwrap();
    let conv = s.new_conversation(&a1).await;
    let path = format!("/api/conversations/{conv}/messages");
    for (who, text) in [(&a1, "one"), (&a2, "two")] {
        let said = s.post(who, &path, Some(json!({ "text": text }))).await;
        assert_eq!(said.status(), 200);
        assert!(said.text().await.unwrap().contains("event: done"));
    }

    // The fourth change of the minute, from either session: refused, and says when to retry.
    let refused = s.post(&a2, &path, Some(json!({"text": "three"}))).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "59");
    let said: Value = refused.json().await.unwrap();
    assert_eq!(
        said["error"],
        "That is more than 3 changes in a minute (messages, presses, new conversations). \
         Nothing was sent or changed; try again in 59 seconds."
    );
    let refused = s.post(&a1, "/api/conversations", None).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

    // Nothing was done: the history holds the two messages and their answers, and alice has
    // one conversation. Reading still works past the rate.
    let texts = s.history_texts(&a1, &path).await;
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert_eq!((texts[0].as_str(), texts[2].as_str()), ("one", "two"));
    let listed: Value = s.get(&a1, "/api/conversations").await.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");

    // Bob has his own count.
    assert_eq!(s.post(&b, "/api/conversations", None).await.status(), 201);

    // Signing out is never refused.
    let out = s.post(&a2, "/auth/logout", None).await;
    assert_eq!(out.status(), StatusCode::NO_CONTENT);

    // The next minute starts again.
    s.clock.store(minute + 60_000, Ordering::SeqCst);
    let said = s.post(&a1, &path, Some(json!({"text": "three"}))).await;
    assert_eq!(said.status(), 200);
    assert!(said.text().await.unwrap().contains("event: done"));
}

/// Reads are counted apart from changes, per minute across a user's sessions: past the rate a
/// read gets 429 with `Retry-After` and a sentence, while changes (counted on their own) and
/// another user's reads go on, and the next minute starts again.
async fn a_users_reads_are_limited_per_minute_across_sessions(store: Option<Arc<dyn Store>>) {
    let s = site_with(Signup::Open, store, |o| AppOptions {
        web_read_rate: budget::RequestRate { per_minute: 6 },
        ..o
    })
    .await;
    let minute = s.a_second_into_a_minute();
    let (a1, a2) = (
        s.sign_in(alice()).await.unwrap(),
        s.sign_in(alice()).await.unwrap(),
    );
    let b = s.sign_in(bob()).await.unwrap();
    // Each sign-in read its session (`GET /api/session`): alice has 4 reads left this minute.
    let mut statuses = Vec::new();
    for who in [&a1, &a2, &a1, &a2, &a1, &a2] {
        statuses.push(s.get(who, "/api/conversations").await.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429, 429]);
    let refused = s.get(&a1, "/").await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers()["retry-after"], "59");
    let said: Value = refused.json().await.unwrap();
    assert_eq!(
        said["error"],
        "That is more than 6 requests to read in a minute. Try again in 59 seconds."
    );
    // The pages' static assets are the same for everyone and not counted.
    for asset in ["/app.js", "/timetable.js", "/connect.js"] {
        assert_eq!(s.get(&a1, asset).await.status(), 200, "{asset}");
    }
    // Changes have their own count; bob his own reads.
    assert_eq!(s.post(&a1, "/api/conversations", None).await.status(), 201);
    assert_eq!(s.get(&b, "/api/conversations").await.status(), 200);
    // The next minute starts again.
    s.clock.store(minute + 60_000, Ordering::SeqCst);
    let listed: Value = s.get(&a2, "/api/conversations").await.json().await.unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
}

#[tokio::test]
async fn sqlite_a_users_reads_are_limited_per_minute_across_sessions() {
    a_users_reads_are_limited_per_minute_across_sessions(None).await;
}

#[tokio::test]
async fn dynamodb_a_users_reads_are_limited_per_minute_across_sessions() {
    a_users_reads_are_limited_per_minute_across_sessions(Some(dynamo().await)).await;
}

#[tokio::test]
async fn sqlite_a_users_changes_are_limited_per_minute_across_sessions() {
    a_users_changes_are_limited_per_minute_across_sessions(None).await;
}

#[tokio::test]
async fn dynamodb_a_users_changes_are_limited_per_minute_across_sessions() {
    a_users_changes_are_limited_per_minute_across_sessions(Some(dynamo().await)).await;
}

/// A callback whose state matches its cookie makes Bridle call the provider, and the cookie is
/// the sender's own: so such callbacks are counted per client address before the provider is
/// called. Past the rate a made-up callback gets 429 with `Retry-After` and a page, and the
/// provider hears nothing; callbacks refused before that point are not counted; another
/// address signs in as usual, and the next minute starts again.
async fn sign_ins_from_one_address_are_limited_before_the_provider_is_called(
    store: Option<Arc<dyn Store>>,
) {
    let s = site_with(Signup::Open, store, |o| AppOptions {
        sign_in_rate: budget::RequestRate { per_minute: 3 },
        ..o
    })
    .await;
    let minute = s.a_second_into_a_minute();
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    let made_up = |i: usize| callback.replace("code=", &format!("code=made-up-{i}-"));
    // Refused before the provider would be called: not counted.
    for _ in 0..5 {
        let res = s.http.get(made_up(0)).send().await.unwrap();
        refused_with(res, StatusCode::BAD_REQUEST, "started in another browser").await;
    }
    assert_eq!(s.issuer.token_requests(), 0);
    for i in 1..=3 {
        let res = callback_with(&s, &made_up(i), &state).await;
        refused_with(res, StatusCode::UNAUTHORIZED, "could not be verified").await;
    }
    assert_eq!(s.issuer.token_requests(), 3);
    // The fourth of the minute from this address, even with the real code and a forwarded
    // address of its own making: refused, the provider not asked.
    let over = s
        .http
        .get(&callback)
        .header(COOKIE, format!("bridle_login={state}"))
        .header("x-forwarded-for", "203.0.113.50")
        .send()
        .await
        .unwrap();
    assert_eq!(over.headers()["retry-after"], "59");
    refused_with(
        over,
        StatusCode::TOO_MANY_REQUESTS,
        "More than 3 sign-ins from your network could not be verified in the last minute. \
         Please try again in 59 seconds.",
    )
    .await;
    assert_eq!(s.issuer.token_requests(), 3);

    // Another address (a browser bound to 127.0.0.2, which loopback also reaches) has its own
    // count and signs in.
    let elsewhere = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let bob = s.sign_in_from(&elsewhere, bob()).await.unwrap();
    assert_eq!(s.get(&bob, "/api/session").await.status(), StatusCode::OK);
    assert_eq!(s.issuer.token_requests(), 4);

    // The next minute, the first address signs in again: the login it started is still good.
    s.clock.store(minute + 60_000, Ordering::SeqCst);
    let done = callback_with(&s, &callback, &state).await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert!(set_cookie(&done, "bridle_session").is_some());
}

#[tokio::test]
async fn sqlite_sign_ins_from_one_address_are_limited_before_the_provider_is_called() {
    sign_ins_from_one_address_are_limited_before_the_provider_is_called(None).await;
}

#[tokio::test]
async fn dynamodb_sign_ins_from_one_address_are_limited_before_the_provider_is_called() {
    sign_ins_from_one_address_are_limited_before_the_provider_is_called(Some(dynamo().await)).await;
}

/// People behind one address (an office, a carrier's NAT) do not use up each other's sign-ins:
/// a sign-in the provider verifies is given back, so only failed exchanges fill the count, and
/// made-up codes from the same address are still refused once it is full.
async fn verified_sign_ins_from_one_address_do_not_fill_its_count(store: Option<Arc<dyn Store>>) {
    let s = site_with(Signup::Open, store, |o| AppOptions {
        sign_in_rate: budget::RequestRate { per_minute: 3 },
        ..o
    })
    .await;
    s.a_second_into_a_minute();
    for i in 0..7 {
        let person = if i % 2 == 0 { alice() } else { bob() };
        let signed_in = s.sign_in(person).await;
        assert!(signed_in.is_ok(), "sign-in {i} of the minute was refused");
    }
    assert_eq!(s.issuer.token_requests(), 7);
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    for i in 1..=3 {
        let made_up = callback.replace("code=", &format!("code=made-up-{i}-"));
        let res = callback_with(&s, &made_up, &state).await;
        refused_with(res, StatusCode::UNAUTHORIZED, "could not be verified").await;
    }
    let over = callback_with(&s, &callback, &state).await;
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(s.issuer.token_requests(), 10, "the provider was not asked");
}

#[tokio::test]
async fn sqlite_verified_sign_ins_from_one_address_do_not_fill_its_count() {
    verified_sign_ins_from_one_address_do_not_fill_its_count(None).await;
}

#[tokio::test]
async fn dynamodb_verified_sign_ins_from_one_address_do_not_fill_its_count() {
    verified_sign_ins_from_one_address_do_not_fill_its_count(Some(dynamo().await)).await;
}

/// Behind a reverse proxy named in `BRIDLE_TRUSTED_PROXIES`, each client is counted by the
/// address the proxy puts last in `X-Forwarded-For`: one client past the rate does not keep
/// another, behind the same proxy, from signing in.
#[tokio::test]
async fn behind_a_trusted_proxy_sign_ins_are_counted_per_forwarded_client() {
    let s = site_with(Signup::Open, None, |o| AppOptions {
        sign_in_rate: budget::RequestRate { per_minute: 2 },
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        ..o
    })
    .await;
    s.a_second_into_a_minute();
    s.issuer.sign_in_as(alice());
    let (state, callback) = start_sign_in(&s, "/auth/login").await;
    let made_up = callback.replace("code=", "code=made-up-");
    let from = |client: &'static str, url: &str| {
        s.http
            .get(url)
            .header(COOKIE, format!("bridle_login={state}"))
            // What the client wrote, then what the proxy saw.
            .header("x-forwarded-for", format!("192.0.2.1, {client}"))
    };
    for _ in 0..2 {
        let res = from("203.0.113.1", &made_up).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    let over = from("203.0.113.1", &made_up).send().await.unwrap();
    assert_eq!(over.status(), StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the same proxy signs in.
    let done = from("203.0.113.2", &callback).send().await.unwrap();
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert_eq!(s.issuer.token_requests(), 3);
}

// --- A risky MCP call, approved on the page --------------------------------------------------

/// One `tools/call` over MCP with `token`; the result object.
async fn mcp_call(s: &Site, token: &str, tool: &str, arguments: Value) -> Value {
    tests::mcp_calls::tools_call(&s.http, &s.url("/mcp"), token, tool, arguments).await
}

/// On a deployment with sign-in, a risky call of an AI client runs only once its owner,
/// signed in, approved it on the page: the address is the public one, the page sends a
/// signed-out browser to sign in and back, another signed-in user finds no such question,
/// and the answer needs the session's CSRF token.
#[tokio::test]
async fn sqlite_a_risky_mcp_call_runs_once_its_signed_in_owner_approved_it() {
    a_risky_mcp_call_runs_once_its_signed_in_owner_approved_it(site(Signup::Open, None).await)
        .await;
}

/// The same with the store and the tokens on DynamoDB (moto), as the web function runs.
#[tokio::test]
async fn dynamodb_a_risky_mcp_call_runs_once_its_signed_in_owner_approved_it() {
    let dynamo = tests::moto::dynamo_store("approve").await;
    let store: Arc<dyn Store> = dynamo.clone();
    let s = site_with(Signup::Open, Some(store), |options| AppOptions {
        tokens: Some(dynamo),
        ..options
    })
    .await;
    a_risky_mcp_call_runs_once_its_signed_in_owner_approved_it(s).await;
}

async fn a_risky_mcp_call_runs_once_its_signed_in_owner_approved_it(s: Site) {
    let alice_in = s.sign_in(alice()).await.unwrap();
    let bob_in = s.sign_in(bob()).await.unwrap();
    let made = s
        .post(
            &alice_in,
            "/api/mcp-tokens",
            Some(json!({"name": "Claude", "scope": "risky"})),
        )
        .await;
    assert_eq!(made.status(), StatusCode::CREATED);
    let token = made.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let event = mcp_call(
        &s,
        &token,
        "create_event",
        json!({"title": "Spring Open", "starts_at": "2030-04-12T10:00", "venue": "Court 1", "capacity": 40}),
    )
    .await;
    let id = event["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    mcp_call(&s, &token, "publish_event", json!({"event_id": id})).await;
    let status = || async {
        let listed = mcp_call(&s, &token, "list_events", json!({})).await;
        listed["structuredContent"]["items"][0]["status"].clone()
    };

    let waits = mcp_call(&s, &token, "cancel_event", json!({"event_id": id})).await;
    assert_eq!(waits["isError"], true, "{waits}");
    let page = tests::mcp_calls::approval_page_in(&waits);
    assert!(
        page.starts_with(&s.url("/approve?token=")),
        "the public address: {page}"
    );
    let path = page.strip_prefix(&s.url("")).unwrap().to_owned();

    // Signed out: to sign in, and back to this very page.
    let res = s.http.get(&page).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::SEE_OTHER);
    let to_login = location(&res);
    let query = to_login.strip_prefix("/auth/login?").expect("to sign in");
    let back: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(back, vec![("return_to".to_owned(), path.clone())]);

    let api = tests::mcp_calls::approval_api_path(&page);
    // Another signed-in user: no such question, to read or to answer.
    assert_eq!(s.get(&bob_in, &api).await.status(), StatusCode::NOT_FOUND);
    let answer = |seen: &str| json!({"approve": true, "description": seen});
    let described = "Cancel Spring Open (published, 2030-04-12T10:00 at Court 1, 0 registered)";
    assert_eq!(
        s.post(&bob_in, &api, Some(answer(described)))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    // The owner: the question as the database says; an answer without the CSRF token is
    // refused, with it the call is approved.
    let shown: Value = s.get(&alice_in, &api).await.json().await.unwrap();
    assert_eq!(shown["description"], described);
    assert_eq!(shown["client"], "Claude");
    let forged = Browser {
        csrf: String::new(),
        ..alice_in.clone()
    };
    assert_eq!(
        s.post(&forged, &api, Some(answer(described)))
            .await
            .status(),
        StatusCode::FORBIDDEN
    );
    let refused = mcp_call(&s, &token, "cancel_event", json!({"event_id": id})).await;
    assert_eq!(
        refused["isError"], true,
        "the forged answer approved nothing: {refused}"
    );
    assert_eq!(status().await, "published");
    let approved = s.post(&alice_in, &api, Some(answer(described))).await;
    assert_eq!(approved.status(), StatusCode::OK);

    let ran = mcp_call(&s, &token, "cancel_event", json!({"event_id": id})).await;
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(status().await, "cancelled");
}
