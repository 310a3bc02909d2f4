//! A browser signed in through the Function URL, as the web function's tests drive it: the
//! code flow against the test issuer by hand (no redirects followed), then requests with the
//! session cookie and, for changes, the page's CSRF token.
#![allow(dead_code, reason = "each test binary uses what it needs")]

use reqwest::StatusCode;
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::Value;
use tests::fake_issuer::{FakeIssuer, Person};

pub fn header(res: &reqwest::Response, name: reqwest::header::HeaderName) -> String {
    res.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The value of cookie `name` set by `res`.
pub fn set_cookie(res: &reqwest::Response, name: &str) -> Option<String> {
    res.headers().get_all(SET_COOKIE).iter().find_map(|v| {
        let line = v.to_str().ok()?;
        Some(
            line.strip_prefix(&format!("{name}="))?
                .split(';')
                .next()?
                .to_owned(),
        )
    })
}

/// A browser on the Function URL: no redirects followed (the test follows them by hand).
pub struct Browser {
    pub http: reqwest::Client,
    pub base: String,
    pub cookie: String,
    pub csrf: String,
}

impl Browser {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The code flow as a browser follows it: login → issuer → callback → session cookie.
    pub async fn sign_in(http: reqwest::Client, base: &str, issuer: &FakeIssuer) -> Self {
        issuer.sign_in_as(Person::new("sub-ada", "ada@example.com"));
        let login = http.get(format!("{base}/auth/login")).send().await.unwrap();
        assert_eq!(login.status(), StatusCode::SEE_OTHER);
        let state = set_cookie(&login, "bridle_login").expect("the login cookie");
        let at_issuer = header(&login, LOCATION);
        assert!(at_issuer.starts_with(&issuer.issuer), "{at_issuer}");
        let back = http.get(&at_issuer).send().await.unwrap();
        let callback = header(&back, LOCATION);
        assert!(
            callback.starts_with(&format!("{base}/auth/callback")),
            "{callback}"
        );
        let done = http
            .get(&callback)
            .header(COOKIE, format!("bridle_login={state}"))
            .send()
            .await
            .unwrap();
        assert_eq!(done.status(), StatusCode::SEE_OTHER);
        let cookie = set_cookie(&done, "bridle_session").expect("the session cookie");
        let session: Value = http
            .get(format!("{base}/api/session"))
            .header(COOKIE, format!("bridle_session={cookie}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        Self {
            http,
            base: base.to_owned(),
            cookie,
            csrf: session["csrf"].as_str().expect("a CSRF token").to_owned(),
        }
    }

    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .post(self.url(path))
            .header(COOKIE, format!("bridle_session={}", self.cookie))
            .header("X-CSRF-Token", &self.csrf)
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(self.url(path))
            .header(COOKIE, format!("bridle_session={}", self.cookie))
    }
}
