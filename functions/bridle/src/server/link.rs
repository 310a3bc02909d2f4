//! `POST /api/link-code`: a one-time code (30 minutes) for the signed-in web user, to send from
//! a messaging app; the worker redeems it and binds that account to this user.

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use crate::channel_setup::LINK_CODE_LIFETIME_MS;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use store::StoreError;

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
    let now = now_ms();
    let expires_at_ms = now + LINK_CODE_LIFETIME_MS;
    // A clash with a live code is astronomically rare; try a few fresh ones.
    for _ in 0..5 {
        let code = channels::link_code::generate().map_err(ApiError::internal)?;
        match app
            .store
            .create_link_code(&code, &current.user, now, expires_at_ms)
            .await
        {
            Ok(()) => {
                let links = app.channels.setup.open_chat.links(&code, &linkable);
                return Ok((
                    StatusCode::CREATED,
                    Json(json!({
                        "code": channels::link_code::display(&code),
                        "expires_at_ms": expires_at_ms,
                        "links": links,
                    })),
                ));
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(ApiError::internal(e)),
        }
    }
    Err(ApiError::internal("five link codes in a row were taken"))
}
