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
    // A channel is a plain name (`whatsapp`, `telegram`, ...): one holding the separator of a
    // store's keys could name another key (the sign-in's own binding, say).
    let plain = !body.channel.is_empty()
        && body
            .channel
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    // Longer than any channel account's id (a key DynamoDB would refuse outright, which
    // would read as an outage: a 500 and an error log on demand): not one of ours.
    let sized = body.channel.len() <= 64 && super::api::may_be_an_id(&body.external_id);
    if !plain || !sized || body.channel == OIDC_CHANNEL {
        return Err(not_found());
    }
    // One conditional write: only while it is this person's, whoever linked it since.
    let unlinked = app
        .store
        .unbind_identity_of(&body.channel, &body.external_id, &current.user)
        .await
        .map_err(ApiError::internal)?;
    if !unlinked {
        return Err(not_found());
    }
    tracing::info!(user = %current.user, channel = %body.channel, "a linked chat unlinked from the web");
    Ok(StatusCode::NO_CONTENT)
}
