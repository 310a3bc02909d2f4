//! The web chat: one page, one script, one stylesheet, compiled into the binary (no front-end
//! build step).

use axum::http::header;
use axum::response::{Html, IntoResponse};

pub async fn index() -> impl IntoResponse {
    Html(include_str!("../../assets/index.html"))
}

pub async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/app.js"),
    )
}

pub async fn style() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../../assets/app.css"),
    )
}

/// "Connect an AI client" (`/connect`).
pub async fn connect() -> impl IntoResponse {
    Html(include_str!("../../assets/connect.html"))
}

pub async fn connect_script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/connect.js"),
    )
}

/// A risky MCP call's approval (`/approve?token=…&call=…`), where an AI client sends its owner.
pub async fn approve() -> impl IntoResponse {
    Html(include_str!("../../assets/approve.html"))
}

pub async fn approve_script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../../assets/approve.js"),
    )
}
