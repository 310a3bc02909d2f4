//! The gate in front of every route but the public ones: who is asking (the session's user, or
//! the local user when no sign-in is configured), and, for a state-changing request of a
//! signed-in user, the session's CSRF token in `X-CSRF-Token` and a place in the user's
//! changes per minute ([`web_rates::WRITES`]); for any other request of a signed-in user, a
//! place in the user's reads per minute ([`web_rates::READS`]). A request without a session gets
//! 401 (JSON) — `GET /` is sent to sign in instead, and `GET /approve?…` (where an AI client
//! sends its owner) to sign in and back.

use super::{SESSION_COOKIE, SignIn, hash_secret};
use crate::server::errors::ApiError;
use crate::server::{App, LOCAL_USER, web_rates};
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use store::{AccountStatus, Roles};
use subtle::ConstantTimeEq;
use transcript::UserId;

/// The header a page sends its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Who is asking, as the gate found out.
#[derive(Debug, Clone)]
pub struct CurrentUser {
    pub user: UserId,
    pub name: String,
    pub email: Option<String>,
    pub roles: Roles,
    /// The session's CSRF token; `None` for the local user (no sign-in configured).
    pub csrf: Option<String>,
    /// The stored key of the session, for signing out.
    pub session: Option<String>,
    /// When the session began (its sign-in's callback), for [`CurrentUser::still_signed_in`].
    pub session_started_at_ms: Option<i64>,
}

impl CurrentUser {
    /// The one user of a server without sign-in.
    pub fn local() -> Self {
        Self {
            user: LOCAL_USER.into(),
            name: "You".into(),
            email: None,
            roles: Roles::default(),
            csrf: None,
            session: None,
            session_started_at_ms: None,
        }
    }

    /// Whether this request's session is still one its person has not signed out of
    /// everywhere, read again now: the gate read it as the request arrived, and a request whose
    /// body was held back can run its handler after the sign-out. A handler that makes
    /// something that outlives the session (an access token, a link code) asks once it is
    /// made, and undoes it when not. The local user has no session to end.
    pub async fn still_signed_in(
        &self,
        store: &dyn store::Store,
    ) -> Result<bool, store::StoreError> {
        let Some(started) = self.session_started_at_ms else {
            return Ok(true);
        };
        Ok(store.account(&self.user).await?.is_some_and(|account| {
            account.status != AccountStatus::Closed && started > account.sessions_ended_at_ms
        }))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for CurrentUser {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<CurrentUser>()
            .cloned()
            .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "Sign in first."))
    }
}

/// Routes anyone may call: the platforms' webhooks (signed by the platform), sign-in itself,
/// the health check and the pages' static assets (the same code for everyone: nothing of a
/// user's, and not worth a place in their reads per minute; the admin inspector's are not
/// among them: to anyone but an admin it does not exist), and the icon a browser asks for by
/// itself (a 404).
fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/healthz"
            | "/app.js"
            | "/app.css"
            | "/timetable.js"
            | "/connect.js"
            | "/approve.js"
            | "/favicon.ico"
            | "/auth/login"
            | "/auth/callback"
            | "/auth/signed-out"
    ) || path.starts_with("/webhooks/")
}

/// The value of cookie `name` in the request, if it is there once. Twice (two paths, or one
/// planted for a parent domain beside this host's own, which a browser sends first when its
/// path is longer) it is none: which one is ours cannot be told.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Whether a browser says the request comes from a page of another origin than the address
/// it was sent to: its `Origin` is `null` (a sandboxed or opaque page) or names another host.
/// No `Origin` (a command-line client, an MCP client) is not a page.
fn from_another_site(headers: &axum::http::HeaderMap) -> bool {
    let Some(origin) = headers.get(axum::http::header::ORIGIN) else {
        return false;
    };
    let origin = origin.to_str().unwrap_or("null");
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    !authority.is_some_and(|a| a.eq_ignore_ascii_case(host))
}

/// Equal secrets, compared in time that does not depend on where they differ.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

pub async fn gate(State(app): State<App>, mut request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    // Without sign-in the server trusts whoever reaches it, so only by a loopback name: a page
    // on another site that rebinds its DNS name to 127.0.0.1 gets 421, not the user's data.
    // (The platforms' signed webhooks may arrive through a tunnel under its own name.)
    if app.sign_in.is_none() && !path.starts_with("/webhooks/") && !loopback_host(&request) {
        return ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "This server answers only at 127.0.0.1, localhost or [::1] until sign-in is set up.",
        )
        .into_response();
    }
    if is_public(&path) {
        return next.run(request).await;
    }
    let Some(sign_in) = app.sign_in.as_deref() else {
        // Another site's page may still post a form to 127.0.0.1 (a form needs no preflight):
        // a browser names the page's origin, and a change from another origin is refused.
        if !request.method().is_safe() && from_another_site(request.headers()) {
            tracing::warn!(%path, "a change posted from another site's page refused");
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "Changes are taken only from this server's own pages.",
            )
            .into_response();
        }
        request.extensions_mut().insert(CurrentUser::local());
        return next.run(request).await;
    };
    let current = match session_user(sign_in, request.headers()).await {
        Ok(Some(current)) => current,
        Ok(None) if path == "/" => return Redirect::to("/auth/login").into_response(),
        // The page an MCP client sends its owner to: back to it once signed in.
        Ok(None) if path == "/approve" => {
            let back = request
                .uri()
                .path_and_query()
                .map_or("/approve", |p| p.as_str());
            let query: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("return_to", back)
                .finish();
            return Redirect::to(&format!("/auth/login?{query}")).into_response();
        }
        Ok(None) => {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "Sign in first (open the web app and sign in).",
            )
            .into_response();
        }
        Err(err) => return ApiError::internal(err).into_response(),
    };
    if request.method().is_safe()
        && let Some(refused) = web_rates::READS
            .refusal(
                app.read_rate,
                app.store.as_ref(),
                &current.user,
                (app.clock)(),
            )
            .await
    {
        return refused;
    }
    if !request.method().is_safe() {
        let given = request
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok());
        let expected = current.csrf.as_deref().unwrap_or_default();
        if !given.is_some_and(|g| same_secret(g, expected)) {
            tracing::warn!(user = %current.user, %path, "state-changing request without the session's CSRF token refused");
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "This request is missing the page's CSRF token (X-CSRF-Token); reload the page and try again.",
            )
            .into_response();
        }
        // Signing out is never refused for the minute's changes: someone holding a stolen
        // session could otherwise spend them to keep the owner from signing them out.
        if !matches!(path.as_str(), "/auth/logout" | "/auth/logout-everywhere")
            && let Some(refused) = web_rates::WRITES
                .refusal(
                    app.write_rate,
                    app.store.as_ref(),
                    &current.user,
                    (app.clock)(),
                )
                .await
        {
            return refused;
        }
    }
    request.extensions_mut().insert(current);
    next.run(request).await
}

/// Whether the request names this machine: `Host` (or, for HTTP/2, the URI's authority) is
/// `127.0.0.1`, `localhost` or `[::1]`, with any port. No `Host` at all is a local client.
fn loopback_host(request: &Request) -> bool {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    let Some(host) = host else {
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    matches!(name.to_ascii_lowercase().as_str(), "localhost" | "::1")
        || name
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The user of the request's session cookie: a live session of an account that is not closed,
/// started after the account last signed out everywhere.
async fn session_user(
    sign_in: &SignIn,
    headers: &HeaderMap,
) -> Result<Option<CurrentUser>, store::StoreError> {
    let name = sign_in.cookie_name(SESSION_COOKIE);
    let Some(secret) = cookie(headers, &name).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let hash = hash_secret(secret);
    let Some(session) = sign_in.store.session(&hash, (sign_in.clock)()).await? else {
        return Ok(None);
    };
    let Some(account) = sign_in.store.account(&session.user).await? else {
        return Ok(None);
    };
    // A session started in the same millisecond as a sign-out everywhere is ended with it.
    if account.status == AccountStatus::Closed
        || session.created_at_ms <= account.sessions_ended_at_ms
    {
        sign_in.store.delete_session(&hash).await?;
        return Ok(None);
    }
    Ok(Some(CurrentUser {
        user: account.user,
        name: account.display_name,
        email: account.email.map(|e| e.as_str().to_owned()),
        roles: account.roles,
        csrf: Some(session.csrf),
        session: Some(hash),
        session_started_at_ms: Some(session.created_at_ms),
    }))
}
