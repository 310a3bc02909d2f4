//! A small OpenID Connect issuer for the sign-in rules that a certified provider will not break on
//! purpose: discovery, a JWKS the test can rotate, an authorization endpoint that signs in
//! whoever the test says (no login page) or, unless asked to authenticate again
//! (`prompt=login`, `max_age=0`), the person of a session it keeps from an earlier
//! authentication, with that `auth_time`; and a token endpoint that checks the PKCE verifier and
//! hands out an ID token the test may tamper with (expired, wrong audience or issuer, another
//! key, `alg: none`). RSA keys are fixtures (`functions/bridle/tests/fixtures/`), so nothing is
//! generated at test time. The happy path is also tested against a real provider
//! (`oidc-provider` from npm, [`crate::oidc_provider`]).

use axum::extract::{Form, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use openidconnect::core::{
    CoreGenderClaim, CoreIdToken, CoreIdTokenClaims, CoreJsonWebKeySet, CoreJwsSigningAlgorithm,
    CoreRsaPrivateSigningKey,
};
use openidconnect::{
    Audience, EmptyAdditionalClaims, EndUserEmail, EndUserName, IssuerUrl, JsonWebKey,
    JsonWebKeyId, Nonce, PrivateSigningKey, StandardClaims, SubjectIdentifier,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A test key: fixture `n` (1, 2 or 3) under key id `kid`.
pub fn key(n: u8, kid: &str) -> CoreRsaPrivateSigningKey {
    let path = format!(
        "{}/../functions/bridle/tests/fixtures/oidc-test-key-{n}.pem",
        env!("CARGO_MANIFEST_DIR")
    );
    let pem = std::fs::read_to_string(path).expect("the test key fixture");
    CoreRsaPrivateSigningKey::from_pem(&pem, Some(JsonWebKeyId::new(kid.into())))
        .expect("a PKCS#1 RSA key")
}

/// Who the authorization endpoint signs in next.
#[derive(Debug, Clone)]
pub struct Person {
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
}

impl Person {
    pub fn new(subject: &str, email: &str) -> Self {
        Self {
            subject: subject.into(),
            email: Some(email.into()),
            email_verified: true,
            name: Some(subject.into()),
        }
    }
}

/// What the token endpoint does to the ID token it hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tamper {
    None,
    Expired,
    WrongAudience,
    WrongIssuer,
    /// Signed with a key that is not in the JWKS, under the published key id.
    ForeignKey,
    /// `alg: none`, no signature.
    Unsigned,
}

#[derive(Clone)]
struct Pending {
    nonce: String,
    challenge: String,
    person: Person,
    authenticated_at: chrono::DateTime<chrono::Utc>,
}

struct Inner {
    issuer: String,
    client_id: String,
    signing: CoreRsaPrivateSigningKey,
    published: Vec<CoreRsaPrivateSigningKey>,
    next_person: Option<Person>,
    tamper: Tamper,
    codes: HashMap<String, Pending>,
    /// A careless provider: a code may be exchanged more than once.
    codes_reusable: bool,
    jwks_fetches: usize,
    token_requests: usize,
    /// The browser's session at the provider: who, authenticated when.
    session: Option<(Person, chrono::DateTime<chrono::Utc>)>,
    /// A provider that signs in on its session even when asked to authenticate again.
    ignores_prompt: bool,
    /// A provider whose ID tokens do not say when it authenticated the person.
    omits_auth_time: bool,
    /// Each authorization request's `prompt` ("" for none), in order.
    prompts: Vec<String>,
}

/// The running issuer.
#[derive(Clone)]
pub struct FakeIssuer {
    pub issuer: String,
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for FakeIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeIssuer")
            .field("issuer", &self.issuer)
            .finish()
    }
}

impl FakeIssuer {
    /// Start on a free loopback port, signing with fixture key 1 (`kid` "k1"), for `client_id`.
    pub async fn start(client_id: &str) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let inner = Arc::new(Mutex::new(Inner {
            issuer: issuer.clone(),
            client_id: client_id.into(),
            signing: key(1, "k1"),
            published: vec![key(1, "k1")],
            next_person: None,
            tamper: Tamper::None,
            codes: HashMap::new(),
            codes_reusable: false,
            jwks_fetches: 0,
            token_requests: 0,
            session: None,
            ignores_prompt: false,
            omits_auth_time: false,
            prompts: Vec::new(),
        }));
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(inner.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { issuer, inner }
    }

    /// The next sign-in at the authorization endpoint is this person.
    pub fn sign_in_as(&self, person: Person) {
        self.inner.lock().unwrap().next_person = Some(person);
    }

    /// The browser holds a session at the provider for `person`, who authenticated at `at`:
    /// an authorization request with nobody to sign in signs them in on it, unless it asks for
    /// a new authentication.
    pub fn keep_session(&self, person: Person, at: chrono::DateTime<chrono::Utc>) {
        self.inner.lock().unwrap().session = Some((person, at));
    }

    /// Behave as a provider that signs in on its session even when asked to authenticate again.
    pub fn ignore_prompt(&self) {
        self.inner.lock().unwrap().ignores_prompt = true;
    }

    /// Behave as a provider whose ID tokens carry no `auth_time` (OpenID Connect requires it
    /// only when the request had `max_age`).
    pub fn omit_auth_time(&self) {
        self.inner.lock().unwrap().omits_auth_time = true;
    }

    /// Each authorization request's `prompt` so far ("" for none).
    pub fn prompts(&self) -> Vec<String> {
        self.inner.lock().unwrap().prompts.clone()
    }

    pub fn tamper(&self, tamper: Tamper) {
        self.inner.lock().unwrap().tamper = tamper;
    }

    /// Rotate: sign with fixture key `n` under `kid`, and publish only it.
    pub fn rotate(&self, n: u8, kid: &str) {
        let mut inner = self.inner.lock().unwrap();
        inner.signing = key(n, kid);
        inner.published = vec![key(n, kid)];
    }

    /// Behave as a careless provider that lets a code be exchanged more than once (a real one
    /// must not: RFC 6749 §4.1.2).
    pub fn reuse_codes(&self) {
        self.inner.lock().unwrap().codes_reusable = true;
    }

    pub fn jwks_fetches(&self) -> usize {
        self.inner.lock().unwrap().jwks_fetches
    }

    /// Requests to the token endpoint (code exchanges), good or bad.
    pub fn token_requests(&self) -> usize {
        self.inner.lock().unwrap().token_requests
    }

    /// An ID token for `person` with `nonce`, as the token endpoint would hand it out now.
    pub fn id_token(&self, person: &Person, nonce: &str) -> String {
        mint(
            &self.inner.lock().unwrap(),
            person,
            nonce,
            chrono::Utc::now(),
        )
    }
}

fn mint(
    inner: &Inner,
    person: &Person,
    nonce: &str,
    authenticated_at: chrono::DateTime<chrono::Utc>,
) -> String {
    let now = chrono::Utc::now();
    let (issuer, audience, expires) = match inner.tamper {
        Tamper::WrongIssuer => (
            "http://127.0.0.1:9/other".to_owned(),
            inner.client_id.clone(),
            now + chrono::Duration::minutes(5),
        ),
        Tamper::WrongAudience => (
            inner.issuer.clone(),
            "someone-else".to_owned(),
            now + chrono::Duration::minutes(5),
        ),
        Tamper::Expired => (
            inner.issuer.clone(),
            inner.client_id.clone(),
            now - chrono::Duration::minutes(5),
        ),
        _ => (
            inner.issuer.clone(),
            inner.client_id.clone(),
            now + chrono::Duration::minutes(5),
        ),
    };
    let mut standard =
        StandardClaims::<CoreGenderClaim>::new(SubjectIdentifier::new(person.subject.clone()))
            .set_email(person.email.clone().map(EndUserEmail::new))
            .set_email_verified(Some(person.email_verified));
    if let Some(name) = &person.name {
        standard = standard.set_name(Some(EndUserName::new(name.clone()).into()));
    }
    let claims = CoreIdTokenClaims::new(
        IssuerUrl::new(issuer).unwrap(),
        vec![Audience::new(audience)],
        expires,
        now - chrono::Duration::seconds(1),
        standard,
        EmptyAdditionalClaims {},
    )
    .set_nonce(Some(Nonce::new(nonce.to_owned())))
    .set_auth_time((!inner.omits_auth_time).then_some(authenticated_at));
    let alg = CoreJwsSigningAlgorithm::RsaSsaPkcs1V15Sha256;
    match inner.tamper {
        Tamper::Unsigned => {
            let b64 = |v: &Value| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
            };
            let header = json!({"alg": "none", "typ": "JWT"});
            let body = serde_json::to_value(&claims).unwrap();
            format!("{}.{}.", b64(&header), b64(&body))
        }
        Tamper::ForeignKey => {
            let kid = inner.published[0]
                .as_verification_key()
                .key_id()
                .cloned()
                .unwrap();
            let foreign = CoreRsaPrivateSigningKey::from_pem(&pem(3), Some(kid)).unwrap();
            text(CoreIdToken::new(claims, &foreign, alg, None, None).unwrap())
        }
        _ => text(CoreIdToken::new(claims, &inner.signing, alg, None, None).unwrap()),
    }
}

fn pem(n: u8) -> String {
    std::fs::read_to_string(format!(
        "{}/../functions/bridle/tests/fixtures/oidc-test-key-{n}.pem",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn text(token: CoreIdToken) -> String {
    serde_json::to_value(&token)
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

async fn discovery(State(inner): State<Arc<Mutex<Inner>>>) -> Json<Value> {
    let issuer = inner.lock().unwrap().issuer.clone();
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "code_challenge_methods_supported": ["S256"],
        "scopes_supported": ["openid", "email", "profile"],
    }))
}

async fn jwks(State(inner): State<Arc<Mutex<Inner>>>) -> Json<Value> {
    let mut inner = inner.lock().unwrap();
    inner.jwks_fetches += 1;
    let keys = inner
        .published
        .iter()
        .map(|k| k.as_verification_key())
        .collect();
    Json(serde_json::to_value(CoreJsonWebKeySet::new(keys)).unwrap())
}

async fn authorize(
    State(inner): State<Arc<Mutex<Inner>>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    let prompt = q.get("prompt").cloned().unwrap_or_default();
    let again =
        prompt.split(' ').any(|p| p == "login") || q.get("max_age").is_some_and(|age| age == "0");
    inner.prompts.push(prompt);
    // The person the test names authenticates now (types their password); else the
    // provider's session signs its person in, unless a new authentication was asked for.
    let signed_in = match inner.next_person.take() {
        Some(person) => Some((person, chrono::Utc::now())),
        None if !again || inner.ignores_prompt => inner.session.clone(),
        None => None,
    };
    let Some((person, authenticated_at)) = signed_in else {
        return (axum::http::StatusCode::FORBIDDEN, "nobody to sign in").into_response();
    };
    assert_eq!(
        q.get("code_challenge_method").map(String::as_str),
        Some("S256")
    );
    assert_eq!(q.get("client_id"), Some(&inner.client_id));
    let code = format!("code-{}", inner.codes.len() + 1);
    inner.codes.insert(
        code.clone(),
        Pending {
            nonce: q.get("nonce").cloned().unwrap_or_default(),
            challenge: q.get("code_challenge").cloned().unwrap_or_default(),
            person,
            authenticated_at,
        },
    );
    let redirect = q.get("redirect_uri").cloned().unwrap_or_default();
    let state = q.get("state").cloned().unwrap_or_default();
    Redirect::to(&format!("{redirect}?code={code}&state={state}")).into_response()
}

async fn token(
    State(inner): State<Arc<Mutex<Inner>>>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    let mut inner = inner.lock().unwrap();
    inner.token_requests += 1;
    let code = form.get("code").cloned().unwrap_or_default();
    let found = if inner.codes_reusable {
        inner.codes.get(&code).cloned()
    } else {
        inner.codes.remove(&code)
    };
    let Some(pending) = found else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant"})),
        )
            .into_response();
    };
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(verifier.as_bytes()));
    if challenge != pending.challenge {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid_grant", "error_description": "PKCE"})),
        )
            .into_response();
    }
    let id_token = mint(
        &inner,
        &pending.person,
        &pending.nonce,
        pending.authenticated_at,
    );
    Json(json!({
        "access_token": "at-1",
        "token_type": "Bearer",
        "expires_in": 300,
        "id_token": id_token,
    }))
    .into_response()
}
