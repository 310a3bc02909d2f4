//! A risky MCP call's approval, by the token's owner, signed in: `GET
//! /api/mcp-approvals/{token}/{call}` reads the question (what the call would do, and which
//! client asks), `POST` answers it (`{"approve": true|false, "description": <what the page
//! showed>}`). Another owner's token, or a question answered, expired or never asked, is not
//! found. The page is `/approve` ([`mcp::approval`] holds the rules).

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use mcp::approval::{self, Answered, Asked};
use serde::Deserialize;
use serde_json::{Value, json};

fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "There is no such question waiting: it was answered, or has expired (after 10 minutes). \
         Ask the AI client to make the change again.",
    )
}

pub async fn read(
    State(app): State<App>,
    current: CurrentUser,
    Path((token, call)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let asked = Asked {
        user: &current.user,
        token_id: &token,
        hash: &call,
    };
    let question = approval::question(
        app.tokens.as_ref(),
        app.store.as_ref(),
        asked,
        (app.clock)(),
    )
    .await
    .map_err(ApiError::internal)?
    .ok_or_else(not_found)?;
    Ok(Json(json!({
        "description": question.description,
        "client": question.client,
        "expires_at_ms": question.expires_at_ms,
    })))
}

#[derive(Debug, Deserialize)]
pub struct Answer {
    approve: bool,
    /// What the page showed: an answer is to what the person read.
    description: String,
}

pub async fn answer(
    State(app): State<App>,
    current: CurrentUser,
    Path((token, call)): Path<(String, String)>,
    Json(body): Json<Answer>,
) -> Result<Json<Value>, ApiError> {
    let asked = Asked {
        user: &current.user,
        token_id: &token,
        hash: &call,
    };
    let action = format!("web:{}", uuid::Uuid::new_v4().simple());
    let answered = approval::answer(
        app.tokens.as_ref(),
        app.store.as_ref(),
        asked,
        &body.description,
        body.approve,
        &action,
        (app.clock)(),
    )
    .await
    .map_err(ApiError::internal)?;
    match answered {
        Answered::Approved => Ok(Json(json!({"answer": "approved"}))),
        Answered::Declined => Ok(Json(json!({"answer": "declined"}))),
        Answered::Changed => Err(ApiError::new(
            StatusCode::CONFLICT,
            "What the change would do is not what this page showed any more; reload it to \
             read it again.",
        )),
        Answered::NotFound => Err(not_found()),
    }
}
