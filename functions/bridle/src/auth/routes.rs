//! `GET /auth/login`, `GET /auth/callback`, `POST /auth/logout`, `POST /auth/logout-everywhere`
//! and `GET /api/session`.

use super::from_address;
use super::gate::{CurrentUser, cookie, same_secret};
use super::pending::PendingLogin;
use super::{LOGIN_COOKIE, LOGIN_TTL, Refused, SESSION_COOKIE, SignIn, USED_LOGIN_KEPT};
use crate::server::App;
use crate::server::errors::ApiError;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use std::net::SocketAddr;

/// A `Set-Cookie` value for the cookie named `base` here ([`SignIn::cookie_name`]), with the
/// attributes every Bridle cookie has (`Path=/`, as a `__Host-` name needs).
fn set_cookie(sign_in: &SignIn, base: &str, value: &str, max_age_s: u64) -> String {
    let name = sign_in.cookie_name(base);
    let secure = if sign_in.secure_cookies() {
        "; Secure"
    } else {
        ""
    };
    format!("{name}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Lax{secure}")
}

fn with_cookies(mut response: Response, cookies: &[String]) -> Response {
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            response.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    response
}

/// A short page for a sign-in that did not work, with a way to try again.
pub(super) fn problem(status: StatusCode, sentence: &str) -> Response {
    let page = format!(
        "<!doctype html><meta charset=utf-8><title>Sign-in</title>\
         <body style=\"font-family:sans-serif;max-width:32rem;margin:4rem auto\">\
         <h1>Could not sign you in</h1><p>{sentence}</p><p><a href=\"/auth/login\">Try again</a></p>"
    );
    (status, Html(page)).into_response()
}

/// Only a path of this site (no scheme, no host, no `//`) is a place to return to. Browsers
/// drop tabs and line breaks from a URL and read `\\` as `/`, so `/\t/evil.example` would
/// lead off the site: a path holding any of them, or any control character or space, is not
/// one.
fn safe_return(to: Option<&str>) -> String {
    match to {
        Some(p)
            if p.starts_with('/')
                && p.is_ascii()
                && !p.starts_with("//")
                && !p.contains('\\')
                && !p.chars().any(|c| c.is_control() || c.is_whitespace()) =>
        {
            p.to_owned()
        }
        _ => "/".to_owned(),
    }
}

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    return_to: Option<String>,
}

pub async fn login(State(app): State<App>, Query(q): Query<LoginQuery>) -> Response {
    let Some(sign_in) = app.sign_in.as_deref() else {
        return crate::server::errors::not_found().await.into_response();
    };
    to_provider(sign_in, safe_return(q.return_to.as_deref()), false)
}

/// Send the browser to the identity provider with a sign-in of its own (the login cookie);
/// `again`: asking the provider to authenticate the person again.
fn to_provider(sign_in: &SignIn, return_to: String, again: bool) -> Response {
    let auth = sign_in.oidc.authorize(again);
    let pending = PendingLogin {
        state: auth.state.clone(),
        nonce: auth.nonce,
        pkce_verifier: auth.pkce_verifier,
        return_to,
        expires_at_ms: (sign_in.clock)() + LOGIN_TTL.as_millis() as i64,
        again,
    };
    let cookie = set_cookie(
        sign_in,
        LOGIN_COOKIE,
        &pending.to_cookie(),
        LOGIN_TTL.as_secs(),
    );
    with_cookies(Redirect::to(&auth.url).into_response(), &[cookie])
}

#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

pub async fn callback(
    State(app): State<App>,
    client: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let Some(sign_in) = app.sign_in.as_deref() else {
        return crate::server::errors::not_found().await.into_response();
    };
    if let Some(error) = &q.error {
        // Debug-quoted: the value is the sender's, and a line break in it would forge log lines.
        tracing::info!(error = ?error.chars().take(200).collect::<String>(), "the identity provider did not sign the user in");
        return problem(
            StatusCode::BAD_REQUEST,
            "The sign-in was cancelled or refused at the identity provider.",
        );
    }
    let (Some(code), Some(state)) = (q.code.as_deref(), q.state.as_deref()) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "This address is only for coming back from the identity provider.",
        );
    };
    // The state must be the one this browser was sent off with (no login CSRF).
    let pending =
        cookie(&headers, &sign_in.cookie_name(LOGIN_COOKIE)).and_then(PendingLogin::from_cookie);
    let Some(pending) = pending.filter(|p| same_secret(&p.state, state)) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "This sign-in was started in another browser or has already been used.",
        );
    };
    let now_ms = (sign_in.clock)();
    if pending.expires_at_ms <= now_ms {
        return problem(
            StatusCode::BAD_REQUEST,
            "This sign-in took too long. Please start again.",
        );
    }
    // The provider is called next: counted per client address first (see the module).
    let counted = match from_address::count(sign_in, client.as_deref(), &headers, now_ms).await {
        Ok(counted) => counted,
        Err(refused) => return refused,
    };
    let who = match sign_in
        .oidc
        .finish(code, &pending.pkce_verifier, &pending.nonce)
        .await
    {
        Ok(who) => {
            counted.give_back(sign_in).await;
            who
        }
        Err(err) => {
            // Stays counted against its address: this is what the count is for.
            tracing::warn!(error = %err, "sign-in failed");
            return problem(
                StatusCode::UNAUTHORIZED,
                "The identity provider's answer could not be verified.",
            );
        }
    };
    // Recorded only once verified, so a flood of made-up callbacks writes nothing but their
    // counts per address (refused past the rate, above); a provider that let a code be used
    // twice still signs nobody in twice.
    let kept_until = now_ms + USED_LOGIN_KEPT.as_millis() as i64;
    match sign_in
        .store
        .first_use_of_login(state, now_ms, kept_until)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            return problem(
                StatusCode::BAD_REQUEST,
                "This sign-in has already been used.",
            );
        }
        Err(err) => return ApiError::internal(err).into_response(),
    }
    let account = match sign_in.account_for(&who).await {
        Ok(a) => a,
        Err(Refused::NotInvited) => {
            return problem(
                StatusCode::FORBIDDEN,
                "There is no account for you here yet. Ask the operator to add you \
                 (bridle users add YOUR-EMAIL), then sign in again.",
            );
        }
        Err(Refused::Closed) => {
            return problem(StatusCode::FORBIDDEN, "This account is closed.");
        }
        Err(Refused::Store(err)) => return ApiError::internal(err).into_response(),
    };
    // The person signed out everywhere after the provider last authenticated them: a session
    // the provider still holds (on a lost phone, say) signs nobody in here. Only the provider's
    // signed `auth_time` tells (the login cookie, `again` included, is the browser's to edit),
    // so a token that does not say counts as old. The provider is asked once to authenticate
    // them again (asked with `max_age`, it must say when it did); an answer still old, or
    // still silent, is refused.
    // (The moment itself: the cut is set a little ahead of it, `SIGN_OUT_AHEAD_MS`.)
    let ended = match account.sessions_ended_at_ms {
        0 => 0,
        cut => (cut - SIGN_OUT_AHEAD_MS).max(1),
    };
    let unknown = ended > 0 && who.authenticated_at_ms.is_none();
    if who.authenticated_before(ended) || unknown {
        if pending.again {
            tracing::warn!(user = %account.user, said_when = !unknown, "the identity provider did not authenticate the person again after they signed out everywhere; refused");
            return problem(
                StatusCode::FORBIDDEN,
                "You signed out everywhere, and your identity provider signed you in again \
                 without asking who you are. Sign out at the identity provider, then sign in.",
            );
        }
        tracing::info!(user = %account.user, "signed in on an authentication from before signing out everywhere: the provider is asked to authenticate again");
        return to_provider(sign_in, safe_return(Some(&pending.return_to)), true);
    }
    // A sign-in the provider authenticated after the sign-out everywhere (checked above) starts
    // a session past its cut, which is set a little ahead of its moment: one stamped inside
    // that margin would be ended as it starts.
    let started = match account.sessions_ended_at_ms {
        0 => now_ms,
        cut => now_ms.max(cut + 1),
    };
    let new = match sign_in.start_session(&account.user, started).await {
        Ok(n) => n,
        Err(err) => return ApiError::internal(err).into_response(),
    };
    tracing::info!(user = %account.user, "signed in");
    // The cookie is the browser's own: its path is checked again.
    let return_to = safe_return(Some(&pending.return_to));
    with_cookies(
        Redirect::to(&return_to).into_response(),
        &[
            set_cookie(
                sign_in,
                SESSION_COOKIE,
                &new.secret,
                sign_in.session_ttl.as_secs(),
            ),
            set_cookie(sign_in, LOGIN_COOKIE, "", 0),
        ],
    )
}

/// End the session (the gate checked it and its CSRF token).
pub async fn logout(State(app): State<App>, current: CurrentUser) -> Response {
    let Some(sign_in) = app.sign_in.as_deref() else {
        return crate::server::errors::not_found().await.into_response();
    };
    if let Some(hash) = &current.session
        && let Err(err) = sign_in.store.delete_session(hash).await
    {
        return ApiError::internal(err).into_response();
    }
    tracing::info!(user = %current.user, "signed out");
    with_cookies(
        StatusCode::NO_CONTENT.into_response(),
        &[set_cookie(sign_in, SESSION_COOKIE, "", 0)],
    )
}

/// End every session of the signed-in person, this one too (the gate checked it and its CSRF
/// token): sessions started by now (and [`SIGN_OUT_AHEAD_MS`] more) no longer sign anyone in,
/// on any instance, nor does a sign-in the identity provider authenticated before now
/// ([`callback`]), nor an access token or link code made by then; and revoke every access
/// token of theirs for MCP clients, which a stolen session could have made to keep a way in.
/// Linked chats stay linked.
pub async fn logout_everywhere(State(app): State<App>, current: CurrentUser) -> Response {
    let Some(sign_in) = app.sign_in.as_deref() else {
        return crate::server::errors::not_found().await.into_response();
    };
    // The cut is a moment ahead, so what a request already past the gate makes while this
    // runs (an access token, a link code: each stamped when made, by this or another
    // instance's clock) falls at or before it, and opens nothing: the MCP door refuses a token
    // made by then, a redemption a code made by then, and a handler that reads the account
    // once it has made one undoes it. Sessions first: the door's check is what holds, whatever
    // the revocation below lists.
    let cut = (sign_in.clock)() + SIGN_OUT_AHEAD_MS;
    if let Err(err) = sign_in.store.end_sessions(&current.user, cut).await {
        return ApiError::internal(err).into_response();
    }
    // Listed and revoked too, so the person's list of tokens says so; one the listing misses
    // (DynamoDB's index lags) is refused at the door all the same.
    let revoked = match app.tokens.revoke_tokens_of(&current.user, cut).await {
        Ok(revoked) => revoked,
        Err(err) => {
            tracing::warn!(user = %current.user, error = %err, "could not revoke the tokens of a person signed out everywhere; the MCP door refuses them all the same");
            0
        }
    };
    // Already ended by the line above; deleted too, so its row does not wait for its expiry.
    if let Some(hash) = &current.session
        && let Err(err) = sign_in.store.delete_session(hash).await
    {
        tracing::warn!(user = %current.user, error = %err, "could not delete the session signed out everywhere; it is ended all the same");
    }
    tracing::info!(user = %current.user, revoked, "signed out everywhere; access tokens revoked");
    with_cookies(
        StatusCode::NO_CONTENT.into_response(),
        &[set_cookie(sign_in, SESSION_COOKIE, "", 0)],
    )
}

/// How far ahead of its moment a sign-out everywhere cuts: past any request already running,
/// and past the clocks of other instances.
pub const SIGN_OUT_AHEAD_MS: i64 = 2_000;

/// Where the page goes after signing out: not `/`, which would sign the browser straight back
/// in while the provider's own session lasts.
pub async fn signed_out() -> Html<&'static str> {
    Html(
        "<!doctype html><meta charset=utf-8><title>Signed out</title>\
         <body style=\"font-family:sans-serif;max-width:32rem;margin:4rem auto\">\
         <h1 id=signed-out>You are signed out</h1>\
         <p><a href=\"/auth/login\">Sign in again</a></p>",
    )
}

/// Who is signed in, and the CSRF token the page sends back on every change.
pub async fn session(State(app): State<App>, current: CurrentUser) -> Json<Value> {
    Json(json!({
        "user": {
            "id": current.user,
            "name": current.name,
            "email": current.email,
            "roles": current.roles.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
        },
        "csrf": current.csrf,
        "sign_in": app.sign_in.is_some(),
    }))
}

#[cfg(test)]
mod tests {
    use super::safe_return;

    #[test]
    fn only_paths_of_this_site_are_returned_to() {
        assert_eq!(safe_return(Some("/c/123?x=1")), "/c/123?x=1");
        assert_eq!(safe_return(Some("https://evil.example/")), "/");
        assert_eq!(safe_return(Some("//evil.example/")), "/");
        assert_eq!(safe_return(Some("/\\evil.example")), "/");
        // Not a header value a redirect can carry.
        assert_eq!(safe_return(Some("/c/caf\u{e9}")), "/");
        for sneaky in [
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r/evil.example",
            "/ /x",
        ] {
            assert_eq!(safe_return(Some(sneaky)), "/", "{sneaky:?}");
        }
        assert_eq!(safe_return(None), "/");
    }
}
