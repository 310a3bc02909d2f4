//! JSON errors for the API: a status and a sentence that says what to change.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub limit: Option<usize>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            limit: None,
        }
    }

    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    pub fn internal(err: impl std::fmt::Display) -> Self {
        tracing::error!(error = %err, "request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Something went wrong on our side; please try again.",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message });
        if let Some(limit) = self.limit {
            body["limit"] = json!(limit);
        }
        (self.status, Json(body)).into_response()
    }
}

/// A change whose session was signed out everywhere while it was being made: not kept.
pub fn signed_out() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "You were signed out everywhere while this was being made, so it was not kept. Sign in \
         again.",
    )
}

pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "No such page or API route.")
}
