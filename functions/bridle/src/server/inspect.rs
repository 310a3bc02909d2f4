//! The turn inspector (`/admin/inspect`): an admin picks one of their conversations and sees
//! each turn as the model saw it ([`super::inspect_view`]), read from the stored transcripts.
//!
//! Who may open it: with sign-in configured, signed-in users with the `admin` role; anyone
//! else gets 404, as if it did not exist. Without sign-in (one local user on loopback), the
//! same rule as `/admin/budget`: it exists only when `BRIDLE_ADMIN_TOKEN` is set (else 404),
//! and its JSON answers only with that token in the `Authorization: Bearer …` header (else
//! 401); the page itself holds no data and asks for the token.
//!
//! Tenant isolation holds for admins too: the inspector lists and opens only the admin's own
//! conversations; another user's conversation reads as not found (404), like one that does
//! not exist.

use super::App;
use super::errors::ApiError;
use super::inspect_view::{self, ConversationView};
use crate::auth::CurrentUser;
use crate::auth::gate::same_secret;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;
use store::AccountRole;
use transcript::{ConversationId, Message};

/// Why a request may not see the inspector.
enum Refused {
    /// The inspector does not exist for this caller.
    Hidden,
    /// Local server with a token configured, but the request did not carry it.
    NeedsToken,
}

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        match self {
            Refused::Hidden => {
                ApiError::new(StatusCode::NOT_FOUND, "No such page or API route.").into_response()
            }
            Refused::NeedsToken => {
                let mut res = ApiError::new(
                    StatusCode::UNAUTHORIZED,
                    "The inspector needs the admin token, sent in the header \"Authorization: Bearer <token>\".",
                )
                .into_response();
                res.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("ascii"));
                res
            }
        }
    }
}

/// Whether the inspector exists for `current` (the page: no data, so no token needed).
fn visible(app: &App, current: &CurrentUser) -> Result<(), Refused> {
    let shown = match app.sign_in {
        Some(_) => current.roles.contains(AccountRole::Admin),
        None => app.admin_token.is_some(),
    };
    shown.then_some(()).ok_or(Refused::Hidden)
}

/// Whether `current` may read the inspector's data.
fn allowed(app: &App, current: &CurrentUser, headers: &HeaderMap) -> Result<(), Refused> {
    visible(app, current)?;
    if app.sign_in.is_some() {
        return Ok(());
    }
    let expected = app.admin_token.as_deref().unwrap_or_default();
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match given {
        Some(given) if same_secret(expected, given) => Ok(()),
        _ => Err(Refused::NeedsToken),
    }
}

pub async fn page(State(app): State<App>, current: CurrentUser) -> Response {
    match visible(&app, &current) {
        Ok(()) => Html(include_str!("../../assets/inspect.html")).into_response(),
        Err(refused) => refused.into_response(),
    }
}

pub async fn script(State(app): State<App>, current: CurrentUser) -> Response {
    match visible(&app, &current) {
        Ok(()) => (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            include_str!("../../assets/inspect.js"),
        )
            .into_response(),
        Err(refused) => refused.into_response(),
    }
}

pub async fn style(State(app): State<App>, current: CurrentUser) -> Response {
    match visible(&app, &current) {
        Ok(()) => (
            [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
            include_str!("../../assets/inspect.css"),
        )
            .into_response(),
        Err(refused) => refused.into_response(),
    }
}

/// A conversation as the inspector's picker lists it.
#[derive(Debug, Serialize)]
pub struct ConversationItem {
    id: String,
    channel: String,
    purpose: String,
    created_at_ms: i64,
    turns: u64,
    prompt_version: String,
}

pub async fn list(
    State(app): State<App>,
    current: CurrentUser,
    headers: HeaderMap,
) -> Result<Json<Vec<ConversationItem>>, Response> {
    allowed(&app, &current, &headers).map_err(IntoResponse::into_response)?;
    let convs = app
        .store
        .conversations_of(&current.user)
        .await
        .map_err(|e| ApiError::internal(e).into_response())?;
    Ok(Json(
        convs
            .into_iter()
            .map(|c| ConversationItem {
                id: c.id.0,
                channel: c.channel,
                purpose: c.purpose,
                created_at_ms: c.created_at_ms,
                turns: c.turn,
                prompt_version: c.prompt_version,
            })
            .collect(),
    ))
}

pub async fn conversation(
    State(app): State<App>,
    current: CurrentUser,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Result<Json<ConversationView>, Response> {
    allowed(&app, &current, &headers).map_err(IntoResponse::into_response)?;
    let internal = |e: store::StoreError| ApiError::internal(e).into_response();
    let conv = match super::api::may_be_an_id(&id) {
        true => app
            .store
            .conversation(&ConversationId::from(id.as_str()))
            .await
            .map_err(internal)?,
        false => None,
    }
    .filter(|c| c.user_id == current.user)
    .ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            format!("There is no conversation {id:?}."),
        )
        .into_response()
    })?;
    let mut messages: Vec<Message> = Vec::new();
    for segment in 0..=conv.segment {
        messages.extend(
            app.store
                .messages(&conv.id, segment)
                .await
                .map_err(internal)?,
        );
    }
    let visible = app.store.visible(&conv.id).await.map_err(internal)?;
    Ok(Json(inspect_view::build(
        &conv,
        &messages,
        &visible,
        &app.budget.prices,
    )))
}
