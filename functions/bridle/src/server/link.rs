//! `POST /api/link-code`: a one-time code (30 minutes) for the signed-in web user, to send from
//! a messaging app; the worker redeems it and binds that account to this user.

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

/// The redeemer a voided code is used up by, which no channel account is (there is no channel
/// named `void`).
const VOIDED: &str = "void#signed out everywhere";

pub async fn create_link_code(
    State(app): State<App>,
    current: CurrentUser,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let linkable = app.channels.setup.linkable();
    if linkable.is_empty() {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "No messaging app is connected to this server yet; see README.md (\"Messaging channels\").",
        ));
    }
    let issued =
        crate::admin_cli::issue_link_code(app.store.as_ref(), &current.user, (app.clock)())
            .await
            .map_err(ApiError::internal)?;
    // Made by a request that passed the gate before its person signed out everywhere: used up
    // at once (redeemed for no chat), so it links nothing. One made before the sign-out is
    // refused where it is redeemed (`channel_jobs::identity`).
    if !current
        .still_signed_in(app.store.as_ref())
        .await
        .map_err(ApiError::internal)?
    {
        app.store
            .consume_link_code(&issued.code, VOIDED, (app.clock)())
            .await
            .map_err(ApiError::internal)?;
        tracing::warn!(user = %current.user, "a link code made by a session signed out everywhere meanwhile; used up");
        return Err(super::errors::signed_out());
    }
    let links = app.channels.setup.open_chat.links(&issued.code, &linkable);
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "code": issued.display,
            "expires_at_ms": issued.expires_at_ms,
            "links": links,
        })),
    ))
}
