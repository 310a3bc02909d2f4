//! The OpenID Connect provider the sign-in tests run against (`tests/oidc/provider.mjs`, see
//! `tests::oidc_provider`): its discovery document and keys, and the whole authorization code
//! flow with PKCE done by hand, the way a browser and a Relying Party would do it.

use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;
use serde_json::Value;
use std::collections::HashMap;
use std::process::Command;
use tests::oidc_provider::OidcProvider;
use tokio::sync::mpsc;

const CLIENT_ID: &str = "bridle-test";
const CLIENT_SECRET: &str = "bridle-test-secret";

#[tokio::test]
async fn discovery_names_the_endpoints_s256_and_an_rs256_key() {
    let provider = OidcProvider::start(CLIENT_ID, CLIENT_SECRET, &["http://127.0.0.1:9/callback"]);
    assert!(
        provider.issuer.starts_with("http://127.0.0.1:"),
        "{}",
        provider.issuer
    );
    let http = reqwest::Client::new();

    let config: Value = get_json(&http, &provider.discovery_url()).await;
    assert_eq!(config["issuer"], provider.issuer.as_str(), "{config:#}");
    for endpoint in [
        "authorization_endpoint",
        "token_endpoint",
        "jwks_uri",
        "userinfo_endpoint",
    ] {
        let url = config[endpoint].as_str().unwrap_or_default();
        assert!(
            url.starts_with(&provider.issuer),
            "{endpoint} should be under the issuer: {config:#}"
        );
    }
    assert!(
        strings(&config["code_challenge_methods_supported"]).contains(&"S256"),
        "{config:#}"
    );
    assert!(
        strings(&config["response_types_supported"]).contains(&"code"),
        "{config:#}"
    );
    for scope in ["openid", "email", "profile"] {
        assert!(
            strings(&config["scopes_supported"]).contains(&scope),
            "{config:#}"
        );
    }
    for claim in ["sub", "email", "email_verified", "name"] {
        assert!(
            strings(&config["claims_supported"]).contains(&claim),
            "{config:#}"
        );
    }

    let jwks: Value = get_json(&http, config["jwks_uri"].as_str().unwrap()).await;
    let keys = jwks["keys"].as_array().expect("a JWKS has keys");
    assert!(
        keys.iter().any(|key| key["kty"] == "RSA"
            && key["alg"] == "RS256"
            && key["use"] == "sig"
            && key["n"].is_string()
            && key["e"].is_string()
            && key["d"].is_null()),
        "no public RS256 signing key in {jwks:#}"
    );
}

/// Login form → redirect URI with a code → token endpoint with the PKCE verifier → ID token
/// for this client; plus: an authorization request without PKCE is refused.
#[tokio::test]
async fn the_code_flow_with_pkce_signs_a_user_in() {
    // The Relying Party's redirect URI: a tiny server that hands over the query it receives.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let redirect_uri = format!("http://{}/callback", listener.local_addr().unwrap());
    let (callbacks, mut received) = mpsc::unbounded_channel::<HashMap<String, String>>();
    let app = Router::new()
        .route("/callback", get(callback))
        .with_state(callbacks);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let provider = OidcProvider::start(CLIENT_ID, CLIENT_SECRET, &[&redirect_uri]);
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let config: Value = get_json(&http, &provider.discovery_url()).await;
    let authorization_endpoint = config["authorization_endpoint"].as_str().unwrap();
    let token_endpoint = config["token_endpoint"].as_str().unwrap();

    // PKCE (RFC 7636): a random verifier of unreserved characters, its S256 challenge.
    let verifier = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    let challenge = s256_challenge(&verifier);
    let state = uuid::Uuid::new_v4().simple().to_string();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let authorize = |pkce: bool| {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query
            .append_pair("client_id", CLIENT_ID)
            .append_pair("response_type", "code")
            .append_pair("scope", "openid email profile")
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("state", &state)
            .append_pair("nonce", &nonce);
        if pkce {
            query
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256");
        }
        format!("{authorization_endpoint}?{}", query.finish())
    };

    // Without PKCE the provider sends the browser straight back with an error.
    let mut browser = Browser::new(http.clone());
    let page = browser.get(&authorize(false)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let refused = received.recv().await.unwrap();
    assert_eq!(
        refused.get("error").map(String::as_str),
        Some("invalid_request"),
        "{refused:?}"
    );
    assert!(!refused.contains_key("code"), "{refused:?}");

    // With PKCE: the login form, filled in and submitted, as a user would.
    let mut browser = Browser::new(http.clone());
    let page = browser.get(&authorize(true)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for field in [r#"name="login""#, r#"name="password""#] {
        assert!(
            page.body.contains(field),
            "no {field} in the login page: {}",
            page.body
        );
    }
    let action = form_action(&page.body);
    let page = browser
        .post_form(
            &action,
            &[
                ("prompt", "login"),
                ("login", "alice"),
                ("password", "anything"),
            ],
        )
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.url.starts_with(&format!("{redirect_uri}?")),
        "{}",
        page.url
    );
    let callback = received.recv().await.unwrap();
    assert_eq!(callback.get("state"), Some(&state), "{callback:?}");
    assert_eq!(callback.get("iss"), Some(&provider.issuer), "{callback:?}");
    let code = callback.get("code").expect("a code on the redirect URI");

    // The Relying Party exchanges the code, authenticating with its secret (HTTP Basic).
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", code)
        .append_pair("redirect_uri", &redirect_uri)
        .append_pair("code_verifier", &verifier)
        .finish();
    let response = http
        .post(token_endpoint)
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let tokens: Value = response.json().await.unwrap();
    assert_eq!(status, 200, "{tokens:#}");
    assert_eq!(tokens["token_type"], "Bearer", "{tokens:#}");
    let id_token = tokens["id_token"].as_str().expect("an id_token");
    let parts: Vec<&str> = id_token.split('.').collect();
    assert_eq!(parts.len(), 3, "a JWS has three parts: {id_token}");
    let header: Value = serde_json::from_slice(&base64url_decode(parts[0])).unwrap();
    assert_eq!(header["alg"], "RS256", "{header:#}");
    let claims: Value = serde_json::from_slice(&base64url_decode(parts[1])).unwrap();
    let audience = match &claims["aud"] {
        Value::Array(audiences) => audiences.clone(),
        one => vec![one.clone()],
    };
    assert_eq!(audience, vec![Value::from(CLIENT_ID)], "{claims:#}");
    assert_eq!(claims["iss"], provider.issuer.as_str(), "{claims:#}");
    assert_eq!(claims["nonce"], nonce.as_str(), "{claims:#}");
    assert_eq!(claims["sub"], "alice", "{claims:#}");
    assert_eq!(claims["email"], "alice@example.com", "{claims:#}");
    assert_eq!(claims["email_verified"], true, "{claims:#}");
    assert_eq!(claims["name"], "Alice", "{claims:#}");

    // The access token works at the userinfo endpoint.
    let userinfo: Value = http
        .get(config["userinfo_endpoint"].as_str().unwrap())
        .bearer_auth(tokens["access_token"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(userinfo["sub"], "alice", "{userinfo:#}");
    assert_eq!(userinfo["email"], "alice@example.com", "{userinfo:#}");

    // A code is good once.
    let body = form_urlencoded::Serializer::new(String::new())
        .append_pair("grant_type", "authorization_code")
        .append_pair("code", code)
        .append_pair("redirect_uri", &redirect_uri)
        .append_pair("code_verifier", &verifier)
        .finish();
    let again = http
        .post(token_endpoint)
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 400);
}

async fn callback(
    State(callbacks): State<mpsc::UnboundedSender<HashMap<String, String>>>,
    Query(query): Query<HashMap<String, String>>,
) -> &'static str {
    let _ = callbacks.send(query);
    "signed in"
}

/// What a browser needs here: it follows redirects (303s from the provider) and keeps the
/// provider's cookies (its interaction and session cookies) across them.
struct Browser {
    http: reqwest::Client,
    /// name → value; everything here is on 127.0.0.1, and cookies do not depend on the port.
    cookies: HashMap<String, String>,
}

/// The page a request ends on, after redirects.
struct Page {
    url: String,
    status: u16,
    body: String,
}

impl Browser {
    fn new(http: reqwest::Client) -> Self {
        Self {
            http,
            cookies: HashMap::new(),
        }
    }

    async fn get(&mut self, url: &str) -> Page {
        let request = self.http.get(url);
        self.send(url, request).await
    }

    async fn post_form(&mut self, url: &str, fields: &[(&str, &str)]) -> Page {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let request = self
            .http
            .post(url)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(url, request).await
    }

    async fn send(&mut self, url: &str, mut request: reqwest::RequestBuilder) -> Page {
        let mut url = reqwest::Url::parse(url).unwrap();
        for _ in 0..10 {
            if !self.cookies.is_empty() {
                let cookie = self
                    .cookies
                    .iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect::<Vec<_>>()
                    .join("; ");
                request = request.header("cookie", cookie);
            }
            let response = request.send().await.unwrap();
            for set_cookie in response.headers().get_all("set-cookie") {
                let set_cookie = set_cookie.to_str().unwrap();
                let pair = set_cookie.split(';').next().unwrap();
                let (name, value) = pair.split_once('=').unwrap();
                let expired = set_cookie
                    .to_ascii_lowercase()
                    .contains("expires=thu, 01 jan 1970");
                if expired || value.is_empty() {
                    self.cookies.remove(name.trim());
                } else {
                    self.cookies
                        .insert(name.trim().to_owned(), value.to_owned());
                }
            }
            if !response.status().is_redirection() {
                return Page {
                    url: url.to_string(),
                    status: response.status().as_u16(),
                    body: response.text().await.unwrap(),
                };
            }
            let location = response.headers()["location"].to_str().unwrap();
            url = url.join(location).unwrap();
            request = self.http.get(url.clone());
        }
        panic!("more than 10 redirects, the last to {url}");
    }
}

/// The `action` of the (only) form in an HTML page.
fn form_action(html: &str) -> String {
    let form = &html[html.find("<form").expect("a form in the page")..];
    let action = &form[form.find("action=\"").expect("a form action") + "action=\"".len()..];
    action[..action.find('"').unwrap()].replace("&amp;", "&")
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let response = http.get(url).send().await.unwrap();
    assert_eq!(response.status(), 200, "GET {url}");
    response.json().await.unwrap()
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|values| values.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// BASE64URL(SHA-256(verifier)), computed by Node's crypto (Node is what runs the provider;
/// this crate has no SHA-256 of its own, and the provider checking it is the point).
fn s256_challenge(verifier: &str) -> String {
    let output = Command::new("node")
        .args([
            "-e",
            "process.stdout.write(require('node:crypto').createHash('sha256')\
             .update(process.argv[1]).digest('base64url'))",
            verifier,
        ])
        .output()
        .expect("node runs");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Unpadded base64url, as in a JWT.
fn base64url_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.trim_end_matches('=').bytes() {
        let value = ALPHABET
            .iter()
            .position(|&c| c == byte)
            .unwrap_or_else(|| panic!("not base64url: {text}")) as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    out
}
