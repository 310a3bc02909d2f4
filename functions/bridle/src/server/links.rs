//! "Linked chats": the messaging accounts linked to the signed-in person. `GET /api/links`
//! lists them; `POST /api/links/unlink` takes one back from the web (a lost phone's chat, one
//! linked by someone who held the session for a while), so that its messages come from a
//! stranger again. Scoped to the owner: another person's link, or one that is not linked,
//! reads as not found. The binding of the person's sign-in at the identity provider (channel
//! `oidc`) is no chat: neither listed nor unlinked here. The chat itself is not told (it may be in someone else's hands, and on
//! SMS a message costs).

use super::App;
use super::errors::ApiError;
use crate::auth::{CurrentUser, OIDC_CHANNEL};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use store::StoreError;

pub async fn list(State(app): State<App>, current: CurrentUser) -> Result<Json<Value>, ApiError> {
    let bindings = app
        .store
        .bindings(Some(&current.user))
        .await
        .map_err(ApiError::internal)?;
    let links: Vec<Value> = bindings
        .iter()
        .filter(|b| b.channel != OIDC_CHANNEL)
        .map(|b| {
            json!({
                "channel": b.channel,
                "external_id": b.external_id,
                "linked_at_ms": b.bound_at_ms,
            })
        })
        .collect();
    Ok(Json(json!({ "links": links })))
}

#[derive(Debug, Deserialize)]
pub struct Unlink {
    channel: String,
    external_id: String,
}

pub async fn unlink(
    State(app): State<App>,
    current: CurrentUser,
    Json(body): Json<Unlink>,
) -> Result<StatusCode, ApiError> {
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "No such linked chat.");
    // Taken before the read: the chat linked again after it (to anyone) is left alone.
    let now = (app.clock)();
    let bound = app
        .store
        .identity(&body.channel, &body.external_id)
        .await
        .map_err(ApiError::internal)?;
    if body.channel == OIDC_CHANNEL || bound.as_ref() != Some(&current.user) {
        return Err(not_found());
    }
    match app
        .store
        .unbind_identity_if(&body.channel, &body.external_id, now)
        .await
    {
        Ok(Some(_)) => {
            tracing::info!(user = %current.user, channel = %body.channel, "a linked chat unlinked from the web");
            Ok(StatusCode::NO_CONTENT)
        }
        Ok(None) | Err(StoreError::Conflict { .. }) => Err(not_found()),
        Err(err) => Err(ApiError::internal(err)),
    }
}
