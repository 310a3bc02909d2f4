//! `POST /api/link-code`: a one-time code (30 minutes) for the signed-in web user, to send from
//! a messaging app; the worker redeems it and binds that account to this user.

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

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
    let issued = crate::admin_cli::issue_link_code(app.store.as_ref(), &current.user, now_ms())
        .await
        .map_err(ApiError::internal)?;
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
