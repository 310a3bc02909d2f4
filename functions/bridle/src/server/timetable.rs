//! The web chat's "Timetable" panel: `GET /api/timetable` (the signed-in person's events,
//! each with its grid per day, from [`planner::Planner::timetables`]) and its script
//! (`assets/timetable.js`, which draws the grid with `textContent` only).

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};

/// The current user's timetables; nobody else's records are read.
pub async fn timetables(
    State(app): State<App>,
    current: CurrentUser,
) -> Result<Json<Value>, ApiError> {
    let events = app
        .planner
        .timetables(&current.user)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!({ "events": events })))
}

pub async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/timetable.js"),
    )
}
