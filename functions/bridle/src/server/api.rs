//! The web chat's HTTP API. See README.md ("HTTP API") for the contract.

use super::errors::ApiError;
use super::streams::Slot;
use super::{App, MAX_BODY_BYTES};
use crate::auth::CurrentUser;
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use channel_jobs::web::WEB_CHANNEL;
use engine::TurnEvent;
use futures::{Stream, StreamExt, TryStreamExt};
use queue::{Enqueued, TurnJob};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use transcript::{Conversation, ConversationId};

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A conversation as the page lists it.
#[derive(Debug, Serialize)]
pub struct ConversationView {
    id: String,
    created_at_ms: i64,
    turns: u64,
    /// The start of the first user message, for the sidebar.
    preview: String,
}

pub async fn create_conversation(
    State(app): State<App>,
    current: CurrentUser,
) -> Result<(StatusCode, Json<ConversationView>), ApiError> {
    let id = uuid::Uuid::new_v4().to_string();
    let mut conv = Conversation::new(
        id.as_str(),
        current.user.clone(),
        WEB_CHANNEL,
        assembly::CHAT_PURPOSE,
    );
    conv.created_at_ms = now_ms();
    app.store
        .create_conversation(&conv)
        .await
        .map_err(ApiError::internal)?;
    app.owners.remember(conv.id.clone(), conv.user_id.clone());
    Ok((
        StatusCode::CREATED,
        Json(ConversationView {
            id,
            created_at_ms: conv.created_at_ms,
            turns: 0,
            preview: String::new(),
        }),
    ))
}

/// How many conversations a page of the list covers unless asked for fewer, and at most.
pub const CONVERSATIONS_PAGE: usize = 50;
pub const CONVERSATIONS_PAGE_MAX: usize = 200;

/// `GET /api/conversations?after_ms=&after_id=&limit=`: the page after the conversation
/// created at `after_ms` with id `after_id` (both or neither).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationsPage {
    after_ms: Option<i64>,
    after_id: Option<String>,
    limit: Option<usize>,
}

/// A page of the signed-in user's web conversations, newest first, and when more come after
/// it, a `Link: <…>; rel="next"` header to them. One bounded read for the page and one per
/// conversation for its preview, however many conversations the user has.
pub async fn list_conversations(
    State(app): State<App>,
    current: CurrentUser,
    page: Result<Query<ConversationsPage>, QueryRejection>,
) -> Result<(HeaderMap, Json<Vec<ConversationView>>), ApiError> {
    let bad = |why: String| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "Ask for conversations as ?after_ms=<created_at_ms>&after_id=<id>&limit=<1-\
                 {CONVERSATIONS_PAGE_MAX}>: {why}"
            ),
        )
    };
    let Query(page) = page.map_err(|r| bad(r.body_text()))?;
    let limit = page.limit.unwrap_or(CONVERSATIONS_PAGE);
    if !(1..=CONVERSATIONS_PAGE_MAX).contains(&limit) {
        return Err(bad(format!("limit {limit} is out of range.")));
    }
    let after = match (page.after_ms, page.after_id) {
        (Some(_), Some(id)) if !may_be_an_id(&id) => {
            return Err(bad("after_id is not a conversation's id.".into()));
        }
        (Some(at), Some(id)) => Some((at, ConversationId(id))),
        (None, None) => None,
        _ => return Err(bad("after_ms and after_id go together.".into())),
    };
    // Conversations held on a messaging app are answered there, not here: the store's pages
    // are read on past them (a user whose newest conversations are all chats would otherwise
    // get an empty first page), up to SCANNED_PAGES of them; the next page starts after the
    // last one read.
    let (mut web, mut cursor, mut more) = (Vec::new(), after, false);
    for _ in 0..SCANNED_PAGES {
        // One more than the page, to know whether another follows.
        let mut convs = app
            .store
            .conversations_page(&current.user, cursor.as_ref(), limit + 1)
            .await
            .map_err(ApiError::internal)?;
        more = convs.len() > limit;
        convs.truncate(limit);
        let mut read = convs.into_iter();
        for c in read.by_ref() {
            cursor = Some((c.created_at_ms, c.id.clone()));
            if c.channel == WEB_CHANNEL {
                web.push(c);
                if web.len() == limit {
                    break;
                }
            }
        }
        more |= read.next().is_some();
        if web.len() == limit || !more {
            break;
        }
    }
    let mut headers = HeaderMap::new();
    if more && let Some((at, last)) = &cursor {
        let id: String = form_urlencoded::byte_serialize(last.0.as_bytes()).collect();
        let next =
            format!("</api/conversations?after_ms={at}&after_id={id}&limit={limit}>; rel=\"next\"");
        if let Ok(value) = HeaderValue::from_str(&next) {
            headers.insert(header::LINK, value);
        }
    }
    // Each preview is the conversation's first entry, one bounded read however long it is (the
    // page asks again after every turn), eight conversations at a time.
    let views = futures::stream::iter(web.into_iter().map(|c| preview_of(&app, c)))
        .buffered(PREVIEWS_AT_ONCE)
        .try_collect()
        .await?;
    Ok((headers, Json(views)))
}

/// How many of the store's pages one list request reads past messaging-app chats.
const SCANNED_PAGES: usize = 4;

/// How many conversations' previews the list reads at once.
const PREVIEWS_AT_ONCE: usize = 8;

/// `c` as the list shows it: its first message's first 60 characters as the preview (none
/// when the first entry is not the user's).
async fn preview_of(app: &App, c: Conversation) -> Result<ConversationView, ApiError> {
    let first = app
        .store
        .first_visible(&c.id)
        .await
        .map_err(ApiError::internal)?;
    let preview = first
        .filter(|e| e.role == store::VisibleRole::User)
        .map(|e| e.text.chars().take(60).collect())
        .unwrap_or_default();
    Ok(ConversationView {
        id: c.id.0,
        created_at_ms: c.created_at_ms,
        turns: c.turn,
        preview,
    })
}

/// The conversation `id` if it is `current`'s web conversation; anyone else's reads as absent.
async fn owned_conversation(
    app: &App,
    current: &CurrentUser,
    id: &str,
) -> Result<Conversation, ApiError> {
    if !may_be_an_id(id) {
        return Err(no_conversation(id));
    }
    let conv = app
        .store
        .conversation(&ConversationId::from(id))
        .await
        .map_err(ApiError::internal)?;
    match conv {
        Some(c) if c.channel == WEB_CHANNEL => {
            app.owners.remember(c.id.clone(), c.user_id.clone());
            if c.user_id == current.user {
                Ok(c)
            } else {
                Err(no_conversation(id))
            }
        }
        _ => Err(no_conversation(id)),
    }
}

fn no_conversation(id: &str) -> ApiError {
    let shown: String = id.chars().take(MAX_ID_BYTES).collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("There is no conversation {shown:?}."),
    )
}

/// The longest id (a conversation's, a token's) a request may name, in bytes. Ours are far
/// shorter; a longer one names nothing, and is answered so without asking the store (DynamoDB
/// refuses a key over 2,048 bytes, which would read as an outage: a 500 and an error log on
/// demand).
pub const MAX_ID_BYTES: usize = 512;

/// Whether `id` could be one of ours ([`MAX_ID_BYTES`]).
pub fn may_be_an_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_ID_BYTES
}

/// The id of `current`'s web conversation `id`, its owner as this process knows it (an owner
/// never changes, see [`super::owners`]) or as read; anyone else's reads as absent.
async fn owned_id(app: &App, current: &CurrentUser, id: &str) -> Result<ConversationId, ApiError> {
    let id_ = ConversationId::from(id);
    match app.owners.get(&id_) {
        Some(owner) if owner == current.user => Ok(id_),
        Some(_) => Err(no_conversation(id)),
        None => Ok(owned_conversation(app, current, id).await?.id),
    }
}

/// How many entries a page of history holds unless asked for fewer, and at most.
pub const HISTORY_PAGE: u64 = 100;
pub const HISTORY_PAGE_MAX: u64 = 500;

/// `GET /api/conversations/{id}/messages?before=&limit=`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryPage {
    /// Entries before this position (default: the newest).
    before: Option<u64>,
    /// How many positions, 1 to [`HISTORY_PAGE_MAX`] (default [`HISTORY_PAGE`]).
    limit: Option<u64>,
}

/// A page of the conversation's history, newest last: the `limit` positions before `before`
/// (the newest when absent), with `earlier` saying whether any come before them. Two bounded
/// reads (the transcript's end, then the page) however long the conversation is.
pub async fn history(
    State(app): State<App>,
    current: CurrentUser,
    Path(id): Path<String>,
    page: Result<Query<HistoryPage>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(page) = page.map_err(|r| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "Ask for history as ?before=<position>&limit=<1-{HISTORY_PAGE_MAX}>: {}",
                r.body_text()
            ),
        )
    })?;
    let limit = page.limit.unwrap_or(HISTORY_PAGE);
    if !(1..=HISTORY_PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("limit must be from 1 to {HISTORY_PAGE_MAX}."),
        ));
    }
    let conv = owned_conversation(&app, &current, &id).await?;
    let before = match page.before {
        Some(before) => before,
        None => app
            .store
            .next_visible_position(&conv.id)
            .await
            .map_err(ApiError::internal)?,
    };
    let from = before.saturating_sub(limit);
    let entries = app
        .store
        .visible_range(&conv.id, from, before)
        .await
        .map_err(ApiError::internal)?;
    let messages: Vec<Value> = entries.iter().map(history_entry).collect();
    Ok(Json(
        json!({ "id": conv.id, "messages": messages, "earlier": from > 0 }),
    ))
}

/// The sentences the web chat receives as an `error` event (shown in the error style): the
/// model call failed, the job was given up, the server restarted mid-turn.
const ERROR_LINES: [&str; 7] = [
    engine::lines::BACKEND_FAILED,
    engine::lines::THROTTLED,
    engine::lines::OVERLOADED,
    engine::lines::UNREACHABLE,
    engine::lines::TIMED_OUT,
    engine::lines::GAVE_UP,
    engine::lines::INTERRUPTED,
];

/// A visible entry as the web chat reads it: the stored fields, plus `error` — the failure
/// sentence a reply ends with, when it ends with one — so an error keeps its style after a
/// reload.
fn history_entry(entry: &store::VisibleEntry) -> Value {
    let mut value = serde_json::to_value(entry).unwrap_or_default();
    let error = (entry.role == store::VisibleRole::Assistant)
        .then(|| ERROR_LINES.into_iter().find(|l| entry.text.ends_with(l)))
        .flatten();
    if let (Some(line), Some(fields)) = (error, value.as_object_mut()) {
        fields.insert("error".into(), Value::from(line));
    }
    value
}

/// The body of `POST /api/conversations/{id}/messages`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostMessage {
    text: String,
    /// Set by the client so a resend of the same message is recognised; made up when absent.
    client_message_id: Option<String>,
    /// The id of the button pressed (its title is `text`), when the message is a press.
    button_id: Option<String>,
}

fn body_error(rejection: JsonRejection) -> ApiError {
    match rejection {
        r if r.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("The request body is larger than the {MAX_BODY_BYTES}-byte limit."),
        )
        .with_limit(MAX_BODY_BYTES),
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Send the message as JSON with Content-Type: application/json.",
        ),
        JsonRejection::JsonSyntaxError(e) => ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("The body is not valid JSON: {}", e.body_text()),
        ),
        r => ApiError::new(
            StatusCode::BAD_REQUEST,
            format!(
                "Expected a body like {{\"text\": \"hello\"}}: {}",
                r.body_text()
            ),
        ),
    }
}

pub async fn post_message(
    State(app): State<App>,
    current: CurrentUser,
    Path(id): Path<String>,
    body: Result<Json<PostMessage>, JsonRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Json(body) = body.map_err(body_error)?;
    let conversation = owned_id(&app, &current, &id).await?;
    let text = body.text.trim();
    if text.is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "The message text is empty.",
        ));
    }
    let chars = text.chars().count();
    if chars > app.max_message_chars {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "The message is {chars} characters long; the limit is {}.",
                app.max_message_chars
            ),
        )
        .with_limit(app.max_message_chars));
    }
    let message_id = match body.client_message_id {
        Some(m)
            if !m.is_empty()
                && m.len() <= 100
                && m.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') =>
        {
            m
        }
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "client_message_id must be 1-100 characters of letters, digits, '-' and '_'.",
            ));
        }
        None => uuid::Uuid::new_v4().to_string(),
    };
    let job = TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: WEB_CHANNEL.into(),
        // Per conversation: the same client id in another conversation is another message.
        message_id: format!("{conversation}.{message_id}"),
        conversation_key: conversation.0.clone(),
        external_user_id: current.user.0.clone(),
        text: text.to_owned(),
        button_id: body.button_id.filter(|b| !b.is_empty() && b.len() <= 200),
        media: Vec::new(),
        received_at_ms: now_ms(),
    };
    let key = job.dedupe_key();
    let duplicate = || {
        ApiError::new(
            StatusCode::CONFLICT,
            format!("Message {message_id:?} was already received; it is answered once."),
        )
    };
    let Some(rx) = app.hub.subscribe(&key) else {
        return Err(duplicate());
    };
    // Until the job is queued, any way out of here (an error below, or this request dropped
    // because its client went away) forgets the subscription again.
    let unqueued = app.hub.until_queued(&key);
    let slot = match app.streams.take(&current.user).await {
        Ok(Some(slot)) => slot,
        taken => {
            return Err(match taken {
                Err(err) => ApiError::internal(err),
                _ => ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!(
                        "{} replies are streaming to you already; send this once one has finished.",
                        app.streams.cap()
                    ),
                ),
            });
        }
    };
    let refused = match app.queue.enqueue(&job).await {
        Ok(Enqueued::Accepted) => None,
        Ok(Enqueued::Duplicate) => Some(duplicate()),
        Err(err) => Some(ApiError::internal(err)),
    };
    if let Some(refused) = refused {
        drop(unqueued);
        slot.release().await;
        return Err(refused);
    }
    unqueued.queued();
    let queued = Event::default()
        .event("queued")
        .data(json!({ "message_id": message_id }).to_string());
    let first = futures::stream::once(async move { Ok(queued) });
    // The slot is held until the turn is done, whether or not its client still listens: a
    // client that goes away after `queued` leaves its turn running, and without this could
    // post again at once, and so keep any number of turns running (every turn slot of the
    // server) behind everyone else's. The turn's events are passed on while someone listens;
    // then the stream gives the slot back as its last step (so the web Lambda's invocation
    // does not end first), or, once its client has gone, the turn's end does.
    let slot = Arc::new(Mutex::new(Some(slot)));
    let (to_client, from_turn) = tokio::sync::mpsc::unbounded_channel();
    let held = slot.clone();
    tokio::spawn(async move {
        let mut rx = rx;
        let mut listening = true;
        while let Some(event) = rx.recv().await {
            let done = matches!(event, TurnEvent::Done { .. });
            listening = listening && to_client.send(event).is_ok();
            if done {
                break;
            }
        }
        if !listening && let Some(slot) = take_slot(&held) {
            slot.release().await;
        }
    });
    let rest = futures::stream::unfold(Some(from_turn), |rx| async move {
        let mut rx = rx?;
        let event = rx.recv().await?;
        let done = matches!(event, TurnEvent::Done { .. });
        let sse = Event::default()
            .event(event_name(&event))
            .data(serde_json::to_string(&event).unwrap_or_default());
        Some((Ok(sse), (!done).then_some(rx)))
    });
    let release = futures::stream::once(async move {
        if let Some(slot) = take_slot(&slot) {
            slot.release().await;
        }
    })
    .filter_map(|()| async { None });
    let events = first.chain(rest).chain(release);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// The reply stream's slot, unless given back already.
fn take_slot(slot: &Mutex<Option<Slot>>) -> Option<Slot> {
    slot.lock().unwrap_or_else(|e| e.into_inner()).take()
}

fn event_name(event: &TurnEvent) -> &'static str {
    match event {
        TurnEvent::Token { .. } => "token",
        TurnEvent::Reasoning => "reasoning",
        TurnEvent::ToolUse { .. } => "tool_use",
        TurnEvent::ToolResult { .. } => "tool_result",
        TurnEvent::ToolNotRun { .. } => "tool_not_run",
        TurnEvent::Effects { .. } => "effects",
        TurnEvent::Error { .. } => "error",
        TurnEvent::Shaped { .. } => "shaped",
        TurnEvent::Done { .. } => "done",
    }
}

pub async fn list_notes(
    State(app): State<App>,
    current: CurrentUser,
) -> Result<Json<Value>, ApiError> {
    let notes = app
        .notes
        .list(&current.user.0)
        .await
        .map_err(ApiError::internal)?;
    Ok(Json(json!({ "notes": notes })))
}
