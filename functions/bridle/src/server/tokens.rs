//! "Connect an AI client": the signed-in user's MCP access tokens. `GET /api/mcp-tokens` lists
//! them (never the tokens) with the URL to give a client; `POST` creates one and shows it once;
//! `DELETE /api/mcp-tokens/{id}` revokes one of the user's own (another's id reads as not
//! found); `GET /api/mcp-tokens/{id}/undo` says what undoing the client's last change would put
//! back, and `POST` with that change's action undoes exactly it (a revoked token's too: nothing
//! else reaches its conversation). The page is `/connect`.

use super::App;
use super::errors::ApiError;
use crate::admin_cli::tokens::{issue_token, token_json};
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use store::{BucketKey, BudgetLedger, Charge, Reserve, TokenScope};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The URL a client connects to: the public URL with sign-in, else this server's own address.
fn mcp_url(app: &App, headers: &HeaderMap) -> String {
    match &app.sign_in {
        Some(sign_in) => format!("{}/mcp", sign_in.public_url),
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .unwrap_or("127.0.0.1:8080");
            format!("http://{host}/mcp")
        }
    }
}

pub async fn list(
    State(app): State<App>,
    current: CurrentUser,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let now = now_ms();
    let tokens = app
        .tokens
        .tokens_of(&current.user)
        .await
        .map_err(ApiError::internal)?;
    let tokens: Vec<Value> = tokens.iter().map(|t| token_json(t, now)).collect();
    Ok(Json(
        json!({"url": mcp_url(&app, &headers), "tokens": tokens}),
    ))
}

#[derive(Debug, Deserialize)]
pub struct NewToken {
    name: Option<String>,
    scope: String,
    /// Days until it stops working (1–365); `null`: 90.
    expires_in_days: Option<u32>,
}

/// Working (not revoked, not expired) tokens a user may hold at once.
pub const MAX_LIVE: usize = 20;
/// Tokens a user may make in a day.
pub const MAX_A_DAY: usize = 20;

/// The ledger's name for the tokens a user made in a day (UTC).
const MADE_A_DAY: &str = "mcp_tokens_1d";

/// The ledger's count of the tokens `current` made on the day (UTC) of `now`, and when it may
/// be swept.
fn day_bucket(current: &CurrentUser, now: i64) -> (BucketKey, i64) {
    const DAY_MS: i64 = 86_400_000;
    let start_ms = now - now.rem_euclid(DAY_MS);
    let bucket = BucketKey {
        scope: format!("web_user:{}", current.user),
        window: MADE_A_DAY.into(),
        start_ms,
    };
    (bucket, start_ms + 2 * DAY_MS)
}

/// Count one token made by `current` on the day (UTC) of `now` in the budget ledger, one
/// conditional add; `false`: [`MAX_A_DAY`] were made that day, and this one is not counted.
/// The list [`create`] reads first may miss tokens made a moment ago (by a request racing this
/// one; on DynamoDB its index lags behind the table): the ledger's count misses none, so no
/// burst of requests makes more than [`MAX_A_DAY`] in a day, nor (those made within the lag
/// aside) holds more than [`MAX_LIVE`] working ones.
async fn counted_today(app: &App, current: &CurrentUser, now: i64) -> Result<bool, ApiError> {
    let (bucket, expires_at_ms) = day_bucket(current, now);
    let charge = Charge {
        bucket,
        amount: 1,
        limit: Some(MAX_A_DAY as u64),
        expires_at_ms,
    };
    let ledger: &dyn BudgetLedger = app.store.as_ref();
    match ledger.reserve(&[charge]).await {
        Ok(Reserve::Reserved) => Ok(true),
        Ok(Reserve::Tripped { .. }) => {
            tracing::warn!(user = %current.user, "access tokens over the day's count; refused");
            Ok(false)
        }
        Err(err) => Err(ApiError::internal(err)),
    }
}

pub async fn create(
    State(app): State<App>,
    current: CurrentUser,
    headers: HeaderMap,
    Json(body): Json<NewToken>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let bad = |text: &str| ApiError::new(StatusCode::BAD_REQUEST, text.to_owned());
    let scope = TokenScope::parse(&body.scope)
        .ok_or_else(|| bad("Choose what the client may do: read, write or risky."))?;
    let name = body.name.as_deref().map(str::trim).unwrap_or("AI client");
    if name.is_empty() || name.chars().count() > 100 {
        return Err(bad("Give the client a name of 1 to 100 characters."));
    }
    let days = body.expires_in_days.unwrap_or(90);
    if !(1..=365).contains(&days) {
        return Err(bad("A token may last from 1 to 365 days."));
    }
    let now = now_ms();
    // Tokens are never deleted (a revoked one stays listed), and the list is read whole: a
    // user keeps at most [`MAX_LIVE`] working ones and makes at most [`MAX_A_DAY`] a day.
    let held = app
        .tokens
        .tokens_of(&current.user)
        .await
        .map_err(ApiError::internal)?;
    if held.iter().filter(|t| t.is_live(now)).count() >= MAX_LIVE {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "You have {MAX_LIVE} working access tokens; revoke one you no longer use first."
            ),
        ));
    }
    let day_ago = now - 86_400_000;
    if held.iter().filter(|t| t.created_at_ms > day_ago).count() >= MAX_A_DAY {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "You made {MAX_A_DAY} access tokens in the last day; make the next one tomorrow."
            ),
        ));
    }
    if !counted_today(&app, &current, now).await? {
        return Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("You made {MAX_A_DAY} access tokens today; make the next one tomorrow."),
        ));
    }
    let expires = now + i64::from(days) * 86_400_000;
    let issued = issue_token(
        app.tokens.as_ref(),
        &current.user,
        name,
        scope,
        Some(expires),
        now,
    )
    .await;
    let (token, secret) = match issued {
        Ok(issued) => issued,
        Err(err) => {
            // Not made: not counted (best effort; a failure leaves it counted for the day).
            let ledger: &dyn BudgetLedger = app.store.as_ref();
            let (bucket, expires_at_ms) = day_bucket(&current, now);
            let back = store::Adjustment {
                bucket,
                delta: -1,
                expires_at_ms,
            };
            if let Err(e) = ledger.adjust(&[back]).await {
                tracing::warn!(error = %e, "could not give back a token not made; it stays counted");
            }
            return Err(ApiError::internal(err));
        }
    };
    // Made by a request that passed the gate before its person signed out everywhere (its
    // body held back until then): revoked at once, so it outlives the sign-out no more than
    // the session does. One made before the sign-out's revocation is refused at the MCP door.
    if !current
        .still_signed_in(app.store.as_ref())
        .await
        .map_err(ApiError::internal)?
    {
        app.tokens
            .revoke_token(&token.id, now_ms())
            .await
            .map_err(ApiError::internal)?;
        tracing::warn!(user = %current.user, "an access token made by a session signed out everywhere meanwhile; revoked");
        return Err(super::errors::signed_out());
    }
    let mut value = token_json(&token, now);
    value["token"] = json!(secret);
    value["url"] = json!(mcp_url(&app, &headers));
    Ok((StatusCode::CREATED, Json(value)))
}

pub async fn revoke(
    State(app): State<App>,
    current: CurrentUser,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let token = own_token(&app, &current, &id).await?;
    app.tokens
        .revoke_token(&token.id, now_ms())
        .await
        .map_err(ApiError::internal)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The user's own token `id`, or 404 (another's id reads as not found).
async fn own_token(
    app: &App,
    current: &CurrentUser,
    id: &str,
) -> Result<store::McpToken, ApiError> {
    let not_found = || ApiError::new(StatusCode::NOT_FOUND, "No such token.");
    if !super::api::may_be_an_id(id) {
        return Err(not_found());
    }
    app.tokens
        .token(id)
        .await
        .map_err(ApiError::internal)?
        .filter(|t| t.user == current.user)
        .ok_or_else(not_found)
}

/// The person acting directly, for the changes their token's client made, and the undo scope
/// of those changes: the token's conversation, `mcp:<token id>`, which only the token reaches
/// otherwise (a revoked one's changes could not be undone at all).
fn owner_caller(
    current: &CurrentUser,
    token: &store::McpToken,
) -> (planner::Caller, store::UndoScope) {
    let conversation = mcp::confirm::token_conversation(&token.id);
    let caller = planner::Caller {
        user: current.user.clone(),
        actor: store::ActorKind::User,
        action_id: format!("web:{}", uuid::Uuid::new_v4()),
        conversation: Some(conversation.clone()),
        call_key: None,
        grant: tools::Grant::Risky,
    };
    (caller, store::UndoScope::Conversation(conversation))
}

/// `GET /api/mcp-tokens/{id}/undo`: what undoing the token's client's last change would put
/// back (`{"change": null}` when nothing is left to undo): the action, when it was made, and a
/// line per record.
pub async fn undo_preview(
    State(app): State<App>,
    current: CurrentUser,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let token = own_token(&app, &current, &id).await?;
    let (caller, scope) = owner_caller(&current, &token);
    let preview = app
        .planner
        .undo_preview(&caller, &scope)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!({
        "change": preview.map(|p| json!({
            "action": p.action_id,
            "made_at_ms": p.at_ms,
            "lines": p.lines,
        })),
    })))
}

#[derive(Debug, Deserialize)]
pub struct UndoAsked {
    /// The action the preview named: undone only while it is still the client's last change.
    action: String,
}

/// `POST /api/mcp-tokens/{id}/undo` `{"action"}`: undo the token's client's last change, the
/// one the preview named (409, nothing undone, when another has come on top since or it was
/// undone already). The person's own click is their yes.
pub async fn undo(
    State(app): State<App>,
    current: CurrentUser,
    Path(id): Path<String>,
    Json(asked): Json<UndoAsked>,
) -> Result<Json<Value>, ApiError> {
    let token = own_token(&app, &current, &id).await?;
    let (caller, scope) = owner_caller(&current, &token);
    match app
        .planner
        .undo_previewed(&caller, scope, &asked.action)
        .await
    {
        Ok(answer) => Ok(Json(json!({ "undone": answer }))),
        Err(planner::PlannerError::Changed) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "That change is no longer this client's last one (it was undone, or another came \
             after it), so nothing was undone. Look again.",
        )),
        Err(planner::PlannerError::Rule(rule)) => Err(ApiError::new(StatusCode::CONFLICT, rule)),
        Err(
            err
            @ (planner::PlannerError::AccountInactive(_) | planner::PlannerError::NotAllowed(_)),
        ) => Err(ApiError::new(StatusCode::FORBIDDEN, err.to_string())),
        Err(err) => Err(ApiError::internal(err)),
    }
}
