//! A sign-in in progress, held by the browser that started it (the `bridle_login` cookie,
//! `HttpOnly`, path `/auth`) rather than stored: starting a sign-in costs no write, so a flood
//! of `GET /auth/login` costs nothing but the requests.
//!
//! The cookie is not sealed, and need not be: it only ever concerns the browser holding it.
//! The callback trusts nothing in it that it does not check again: the `state` must be the one
//! the provider echoes (so a callback from another browser is refused), the provider checks
//! the PKCE verifier against the challenge it was sent, the ID token must carry the nonce,
//! the place to return to is checked again, and a verified state is recorded once
//! ([`store::Sessions::first_use_of_login`]). Someone who edits their own cookie only spoils
//! their own sign-in.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

/// A return path longer than this is not kept (the cookie stays well under browsers' 4 KB).
const MAX_RETURN_TO: usize = 512;
/// A cookie longer than this was not made here.
const MAX_COOKIE: usize = 2048;

/// A sign-in that went to the identity provider and has not come back yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingLogin {
    /// The OAuth `state`, echoed by the provider.
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
    /// Where to go after signing in (a path of this site).
    pub return_to: String,
    pub expires_at_ms: i64,
    /// The provider was asked to authenticate the person again (after a sign-out everywhere):
    /// one still answering with an older authentication, or not saying when, is refused, not
    /// asked once more. Edited, it can only turn a sign-in away sooner: whether one is new is
    /// read from the provider's signed `auth_time` alone.
    #[serde(default)]
    pub again: bool,
}

impl PendingLogin {
    /// The cookie's value: URL-safe base64 of the JSON, nothing a cookie forbids.
    pub fn to_cookie(&self) -> String {
        let mut kept = self.clone();
        if kept.return_to.len() > MAX_RETURN_TO {
            kept.return_to = "/".to_owned();
        }
        let json = serde_json::to_vec(&kept).expect("plain strings and a number serialise");
        URL_SAFE_NO_PAD.encode(json)
    }

    /// The sign-in a cookie holds; `None` for one that was not made here (or was edited out
    /// of shape).
    pub fn from_cookie(value: &str) -> Option<Self> {
        if value.len() > MAX_COOKIE {
            return None;
        }
        let json = URL_SAFE_NO_PAD.decode(value).ok()?;
        serde_json::from_slice(&json).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(return_to: &str) -> PendingLogin {
        PendingLogin {
            state: "s-Abc_123".into(),
            nonce: "n-456".into(),
            pkce_verifier: "v".repeat(64),
            return_to: return_to.into(),
            expires_at_ms: 1_800_000_600_000,
            again: false,
        }
    }

    #[test]
    fn a_cookie_reads_back_as_the_sign_in_it_holds() {
        let p = pending("/c/123?x=1");
        let cookie = p.to_cookie();
        assert!(
            cookie
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "{cookie}"
        );
        assert_eq!(PendingLogin::from_cookie(&cookie), Some(p));
    }

    #[test]
    fn a_long_return_path_is_dropped_so_the_cookie_stays_small() {
        let cookie = pending(&format!("/{}", "a".repeat(4000))).to_cookie();
        assert!(cookie.len() < 400, "{}", cookie.len());
        assert_eq!(PendingLogin::from_cookie(&cookie).unwrap().return_to, "/");
    }

    #[test]
    fn a_cookie_not_made_here_holds_no_sign_in() {
        assert_eq!(PendingLogin::from_cookie(""), None);
        assert_eq!(PendingLogin::from_cookie("not base64!"), None);
        assert_eq!(
            PendingLogin::from_cookie(&URL_SAFE_NO_PAD.encode("{}")),
            None
        );
        assert_eq!(
            PendingLogin::from_cookie(&URL_SAFE_NO_PAD.encode(r#"{"state":"s"}"#)),
            None
        );
        let long = URL_SAFE_NO_PAD.encode(
            serde_json::to_vec(&PendingLogin {
                nonce: "n".repeat(3000),
                ..pending("/")
            })
            .unwrap(),
        );
        assert_eq!(PendingLogin::from_cookie(&long), None);
    }
}
