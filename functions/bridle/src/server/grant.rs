//! The signed-in person's own assistant grant: `GET /api/assistant-grant` reads it (with what
//! each choice means), `POST` `{"grant": "read"|"write"|"risky"}` sets it. Only the session's
//! own account is ever read or changed; the assistant's next call is checked against it.

use super::App;
use super::errors::ApiError;
use crate::admin_cli::grant::meaning;
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use store::StoreError;
use transcript::Grant;

fn view(grant: Grant) -> Value {
    let choices: Vec<Value> = Grant::ALL
        .into_iter()
        .map(|g| json!({"grant": g, "meaning": meaning(g)}))
        .collect();
    json!({"grant": grant, "meaning": meaning(grant), "choices": choices})
}

fn no_account() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "There is no account here to change yet; send the assistant a message first.",
    )
}

pub async fn read(State(app): State<App>, current: CurrentUser) -> Result<Json<Value>, ApiError> {
    let account = app
        .store
        .account(&current.user)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(no_account)?;
    Ok(Json(view(account.assistant_grant)))
}

#[derive(Debug, Deserialize)]
pub struct NewGrant {
    grant: String,
}

pub async fn set(
    State(app): State<App>,
    current: CurrentUser,
    body: Result<Json<NewGrant>, axum::extract::rejection::JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let choose = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "Choose what the assistant may do: read, write or risky.",
        )
    };
    let Json(body) = body.map_err(|_| choose())?;
    let grant = Grant::parse(body.grant.trim()).ok_or_else(choose)?;
    match app.store.set_assistant_grant(&current.user, grant).await {
        Ok(()) => {
            tracing::info!(user = %current.user, %grant, "assistant grant changed");
            Ok(Json(view(grant)))
        }
        Err(StoreError::NotFound { .. }) => Err(no_account()),
        Err(err) => Err(ApiError::internal(err)),
    }
}
