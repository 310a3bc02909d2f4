//! `/admin/budget`: the finance report as a page, with spend against caps as an inline SVG
//! chart. With sign-in configured, for signed-in users with the `admin` or `finance` role
//! (others get 403). Without sign-in (one local user on loopback), only when
//! `BRIDLE_ADMIN_TOKEN` is set (otherwise 404), and only with that token in the
//! `Authorization: Bearer …` header (otherwise 401); compared in constant time. Never in the
//! query string: a URL ends up in browser history, proxy and server logs and `Referer` headers.
//! The token stays for that case because a loopback server without sign-in cannot tell its
//! operator from any other process on the machine.

use super::App;
use super::errors::ApiError;
use crate::auth::CurrentUser;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use budget::report::render::sections;
use budget::report::{Report, chart};
use store::AccountRole;
use subtle::ConstantTimeEq;

/// Conversations listed on the page.
const TOP: usize = 10;

/// The bearer token of the `Authorization` header, the only place the token is taken from.
fn presented(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Equal tokens, in time that does not depend on where they differ.
fn token_matches(expected: &str, given: &str) -> bool {
    expected.as_bytes().ct_eq(given.as_bytes()).into()
}

pub async fn budget_page(
    State(app): State<App>,
    current: CurrentUser,
    headers: HeaderMap,
) -> Response {
    if app.sign_in.is_some() {
        let allowed = [AccountRole::Admin, AccountRole::Finance]
            .into_iter()
            .any(|r| current.roles.contains(r));
        if !allowed {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "The budget page is for the admin and finance roles.",
            )
            .into_response();
        }
        return render(&app).await;
    }
    let Some(expected) = app.admin_token.as_deref() else {
        return super::errors::not_found().await.into_response();
    };
    let authorised = presented(&headers).is_some_and(|given| token_matches(expected, given));
    if !authorised {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "This page needs the admin token, sent in the header \"Authorization: Bearer <token>\".",
        )
            .into_response();
    }
    render(&app).await
}

async fn render(app: &App) -> Response {
    let ledger: std::sync::Arc<dyn store::BudgetLedger> = app.store.clone();
    match Report::build(ledger.as_ref(), &app.budget, (app.clock)(), TOP).await {
        Ok(report) => Html(page(&report)).into_response(),
        Err(err) => ApiError::internal(err).into_response(),
    }
}

fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn table(id: &str, header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut out = format!("<table id=\"{id}\"><thead><tr>");
    for h in header {
        out += &format!("<th>{}</th>", esc(h));
    }
    out += "</tr></thead><tbody>";
    for row in rows {
        out += "<tr>";
        for cell in row {
            out += &format!("<td>{}</td>", esc(&cell));
        }
        out += "</tr>";
    }
    out + "</tbody></table>"
}

/// The whole page (no script, no external resources).
pub fn page(report: &Report) -> String {
    const TITLES: [&str; 4] = [
        "Usage",
        "Top conversations by cost",
        "Caps",
        "Prices (USD per million tokens)",
    ];
    let mut tables = String::new();
    for (title, section) in TITLES.iter().zip(sections(report)) {
        tables += &format!("<h2>{title}</h2>");
        tables += &table(section.id, section.header, section.rows);
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Bridle · budget</title><style>\
         body{{font-family:sans-serif;margin:2rem;color:#222}}\
         table{{border-collapse:collapse;margin:0 0 1.5rem}}\
         th,td{{border-bottom:1px solid #ddd;padding:.3rem .8rem;text-align:left}}\
         h2{{margin-top:2rem}}</style></head><body>\
         <h1>Budget</h1><p>Current windows (fixed, aligned to the Unix epoch).</p>\
         <h2>Spend against caps</h2>{chart}{tables}\
         </body></html>",
        chart = chart::svg(report),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("s3cret", "s3cret"));
        assert!(!token_matches("s3cret", "s3cre"));
        assert!(!token_matches("s3cret", "s3cret!"));
        assert!(!token_matches("s3cret", ""));
    }
}
