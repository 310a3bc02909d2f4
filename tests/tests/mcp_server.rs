//! MCP at `/mcp` on the real local server (in-process, SQLite): the token door (missing,
//! unknown, revoked, expired → 401 with `WWW-Authenticate`), the tool list from the one
//! registry, calls through the runner as the token's user (audited as `mcp`, undoable over
//! MCP), scope refusals, risky calls run only once approved on Bridle's own page, tenant
//! isolation, the per-token rate limit, and an unknown method answered with a JSON-RPC error. Raw JSON-RPC over HTTP, as a client sends
//! it; the official Python and TypeScript clients are in `mcp_clients.rs`.

use backend::ScriptedModel;
use bridle::admin_cli::tokens::issue_token;
use bridle::{AppOptions, OtherStore};
use serde_json::{Value, json};
use std::sync::Arc;
use store::{Account, AccountStatus, Accounts, ActorKind, Leases, Records, TokenScope, Tokens};
use store_sqlite::SqliteStore;
use tests::server::TestServer;
use transcript::UserId;

const NOW_MS: i64 = 1_700_000_000_000;

struct Mcp {
    server: TestServer,
    store: Arc<SqliteStore>,
}

async fn start(options: AppOptions) -> Mcp {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    for (user, name) in [("alice", "Alice"), ("bob", "Bob")] {
        store.put_account(&Account::new(user, name)).await.unwrap();
    }
    let options = AppOptions {
        store: Some(OtherStore(store.clone())),
        tokens: Some(store.clone()),
        ..options
    };
    let server = TestServer::start(Arc::new(ScriptedModel::new(vec![])), options).await;
    Mcp { server, store }
}

impl Mcp {
    async fn token(&self, user: &str, scope: TokenScope) -> String {
        let now = now_ms();
        issue_token(
            self.store.as_ref(),
            &UserId::from(user),
            "test",
            scope,
            None,
            now,
        )
        .await
        .unwrap()
        .1
    }

    /// One JSON-RPC request; the HTTP status, the `WWW-Authenticate` header, the JSON body.
    async fn rpc(
        &self,
        token: Option<&str>,
        method: &str,
        params: Value,
    ) -> (u16, Option<String>, Value) {
        let mut request = self
            .server
            .client
            .post(self.server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.text().await.unwrap();
        let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
        (status, challenge, value)
    }

    /// `tools/call`; the result object.
    async fn call(&self, token: &str, tool: &str, arguments: Value) -> Value {
        let (status, _, body) = self
            .rpc(
                Some(token),
                "tools/call",
                json!({"name": tool, "arguments": arguments}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        body["result"].clone()
    }
}

/// The id of the user's first token.
async fn token_id(mcp: &Mcp, user: &str) -> String {
    mcp.store.tokens_of(&user.into()).await.unwrap()[0]
        .id
        .clone()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn spring() -> Value {
    json!({"title": "Spring Open", "starts_at": "2030-04-12T10:00", "venue": "Court 1", "capacity": 40})
}

fn initialize() -> Value {
    json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}})
}

#[tokio::test]
async fn the_door_wants_a_live_bearer_token() {
    let mcp = start(AppOptions::default()).await;
    let live = mcp.token("alice", TokenScope::Write).await;

    let (status, challenge, body) = mcp.rpc(None, "initialize", initialize()).await;
    assert_eq!(status, 401);
    assert_eq!(challenge.as_deref(), Some("Bearer realm=\"bridle\""));
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{body}"
    );

    let (status, challenge, body) = mcp.rpc(Some("brd_nope"), "initialize", initialize()).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some("Bearer realm=\"bridle\", error=\"invalid_token\"")
    );
    assert!(
        body["error"].as_str().unwrap().contains("not valid"),
        "{body}"
    );

    // Basic auth is not a bearer token.
    let response = mcp
        .server
        .client
        .post(mcp.server.url("/mcp"))
        .basic_auth("alice", Some(&live))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize()}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 401);

    let (status, _, body) = mcp.rpc(Some(&live), "initialize", initialize()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["serverInfo"]["name"], "bridle");
    assert!(body["result"]["capabilities"]["tools"].is_object());

    // Last use is stamped.
    let id = mcp.store.tokens_of(&"alice".into()).await.unwrap()[0]
        .id
        .clone();
    assert!(
        mcp.store
            .token(&id)
            .await
            .unwrap()
            .unwrap()
            .last_used_ms
            .is_some()
    );

    // Revoked: 401 at once.
    mcp.store.revoke_token(&id, now_ms()).await.unwrap();
    let (status, challenge, _) = mcp.rpc(Some(&live), "tools/list", json!({})).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().contains("invalid_token"));

    // Expired: 401.
    let (_, expired) = issue_token(
        mcp.store.as_ref(),
        &"alice".into(),
        "old",
        TokenScope::Write,
        Some(NOW_MS),
        NOW_MS - 1000,
    )
    .await
    .unwrap();
    let (status, challenge, _) = mcp.rpc(Some(&expired), "tools/list", json!({})).await;
    assert_eq!(status, 401);
    assert!(challenge.unwrap().contains("invalid_token"));
    mcp.server.stop().await;
}

/// A token store that is down.
struct DownTokens;

#[async_trait::async_trait]
impl Tokens for DownTokens {
    async fn create_token(&self, _: &store::McpToken) -> Result<(), store::StoreError> {
        Err(down())
    }
    async fn token_by_hash(&self, _: &str) -> Result<Option<store::McpToken>, store::StoreError> {
        Err(down())
    }
    async fn token(&self, _: &str) -> Result<Option<store::McpToken>, store::StoreError> {
        Err(down())
    }
    async fn tokens_of(&self, _: &UserId) -> Result<Vec<store::McpToken>, store::StoreError> {
        Err(down())
    }
    async fn revoke_token(&self, _: &str, _: i64) -> Result<bool, store::StoreError> {
        Err(down())
    }
    async fn touch_token(&self, _: &str, _: i64) -> Result<(), store::StoreError> {
        Err(down())
    }
}

fn down() -> store::StoreError {
    store::StoreError::Unavailable("connection refused to tokens-db.internal:5432".into())
}

#[tokio::test]
async fn a_token_store_that_is_down_gets_a_calm_503() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let options = AppOptions {
        store: Some(OtherStore(store)),
        tokens: Some(Arc::new(DownTokens)),
        ..AppOptions::default()
    };
    let server = TestServer::start(Arc::new(ScriptedModel::new(vec![])), options).await;
    let response = server
        .client
        .post(server.url("/mcp"))
        .bearer_auth("brd_anything")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
    let body = response.text().await.unwrap();
    assert!(body.contains("could not check the access token"), "{body}");
    assert!(!body.contains("tokens-db"), "no raw error: {body}");
    server.stop().await;
}

#[tokio::test]
async fn the_tool_list_is_the_registrys_mcp_catalogue() {
    let mcp = start(AppOptions::default()).await;
    let token = mcp.token("alice", TokenScope::Read).await;
    let (status, _, body) = mcp.rpc(Some(&token), "tools/list", json!({})).await;
    assert_eq!(status, 200, "{body}");
    let tools = body["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "add_session",
            "build_schedule",
            "cancel_event",
            "create_event",
            "edit_session",
            "list_attendees",
            "list_events",
            "move_session",
            "publish_event",
            "register_attendee",
            "set_rooms",
            "show_schedule",
            "undo",
            "update_event",
            "withdraw_attendee"
        ],
        "conversation-only tools (focus) and chat-only tools (notes) are not offered"
    );
    let tool = |name: &str| tools.iter().find(|t| t["name"] == name).unwrap().clone();
    assert_eq!(
        tool("list_events")["annotations"],
        json!({"readOnlyHint": true, "idempotentHint": true})
    );
    // Every tool a call of which may wait for the person's yes (taking an event's last
    // place, publishing a full draft included).
    for risky in ["cancel_event", "register_attendee", "publish_event"] {
        assert_eq!(
            tool(risky)["annotations"]["destructiveHint"],
            true,
            "{risky}"
        );
    }
    assert_eq!(
        tool("create_event")["annotations"]["destructiveHint"],
        false
    );
    assert_eq!(
        tool("create_event")["inputSchema"]["required"],
        json!(["title", "starts_at", "venue", "capacity"])
    );
    assert!(
        tool("create_event")["description"]
            .as_str()
            .unwrap()
            .starts_with("Create a draft event")
    );
    mcp.server.stop().await;
}

#[tokio::test]
async fn calls_run_as_the_tokens_user_audited_as_mcp_and_undoable() {
    let mcp = start(AppOptions::default()).await;
    let alice = mcp.token("alice", TokenScope::Write).await;
    let bob = mcp.token("bob", TokenScope::Risky).await;

    let created = mcp.call(&alice, "create_event", spring()).await;
    assert_eq!(created["isError"], false, "{created}");
    let event = created["structuredContent"].clone();
    assert_eq!(event["title"], "Spring Open");
    assert_eq!(
        serde_json::from_str::<Value>(text(&created)).unwrap(),
        event,
        "the text is the same JSON"
    );
    let id = event["id"].as_str().unwrap().to_owned();

    let audit = mcp.store.audit_log(&"alice".into()).await.unwrap();
    let last = audit.last().unwrap();
    assert_eq!(last.actor, ActorKind::Mcp);
    assert!(last.action_id.starts_with("mcp:"), "{}", last.action_id);

    // A read tool.
    let listed = mcp.call(&alice, "list_events", json!({})).await;
    assert_eq!(listed["structuredContent"]["items"][0]["id"], id);

    // Invalid arguments: the runner's sentence, readable.
    let invalid = mcp
        .call(
            &alice,
            "create_event",
            json!({"title": "X", "capacity": "lots"}),
        )
        .await;
    assert_eq!(invalid["isError"], true);
    assert!(
        text(&invalid).starts_with("Invalid arguments for create_event"),
        "{invalid}"
    );

    // Tenant isolation: Bob's token sees none of Alice's events, and her id reads as not found.
    let bobs = mcp.call(&bob, "list_events", json!({})).await;
    assert_eq!(bobs["structuredContent"]["items"], json!([]));
    let touched = mcp
        .call(
            &bob,
            "update_event",
            json!({"event_id": id, "title": "Mine now"}),
        )
        .await;
    assert_eq!(touched["isError"], true);
    assert!(text(&touched).contains("No event with id"), "{touched}");
    let still = mcp.call(&alice, "list_events", json!({})).await;
    assert_eq!(
        still["structuredContent"]["items"][0]["title"],
        "Spring Open"
    );

    // Undo over MCP reverts the token's own change, audited as mcp.
    let undone = mcp.call(&alice, "undo", json!({})).await;
    assert_eq!(undone["isError"], false, "{undone}");
    let after = mcp.call(&alice, "list_events", json!({})).await;
    assert_eq!(after["structuredContent"]["items"], json!([]));
    let audit = mcp.store.audit_log(&"alice".into()).await.unwrap();
    let undo_row = audit
        .iter()
        .find(|e| e.reverts.is_some())
        .expect("the undo's own audit row");
    assert_eq!(undo_row.actor, ActorKind::Mcp);
    let conversation = format!("mcp:{}", token_id(&mcp, "alice").await);
    assert_eq!(undo_row.conversation, Some(conversation.into()));
    mcp.server.stop().await;
}

#[tokio::test]
async fn scopes_and_risky_calls_are_refused_readably() {
    let mcp = start(AppOptions::default()).await;
    let reader = mcp.token("alice", TokenScope::Read).await;
    let writer = mcp.token("alice", TokenScope::Write).await;
    let risky = mcp.token("alice", TokenScope::Risky).await;

    let refused = mcp.call(&reader, "create_event", spring()).await;
    assert_eq!(refused["isError"], true);
    assert!(text(&refused).contains("may only read"), "{refused}");
    let listed = mcp.call(&reader, "list_events", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["items"],
        json!([]),
        "nothing was created"
    );

    let created = mcp.call(&writer, "create_event", spring()).await;
    let id = created["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let published = mcp
        .call(&writer, "publish_event", json!({"event_id": id}))
        .await;
    assert_eq!(published["isError"], false, "{published}");

    // Cancelling a published event needs a person's yes: a write token lacks the scope, and a
    // risky token's call waits for its owner's approval on Bridle's page (this client cannot
    // open a page itself: the sentence gives the address); nothing runs either way.
    let no_scope = mcp
        .call(&writer, "cancel_event", json!({"event_id": id}))
        .await;
    assert_eq!(no_scope["isError"], true);
    assert!(text(&no_scope).contains("Cancel Spring Open"), "{no_scope}");
    assert!(text(&no_scope).contains("risky scope"), "{no_scope}");
    let waits = mcp
        .call(&risky, "cancel_event", json!({"event_id": id}))
        .await;
    assert_eq!(waits["isError"], true);
    assert!(text(&waits).contains("owner's approval"), "{waits}");
    assert!(
        text(&waits).contains(&mcp.server.url("/approve?token=")),
        "{waits}"
    );
    let listed = mcp.call(&writer, "list_events", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["items"][0]["status"],
        "published"
    );
    mcp.server.stop().await;
}

/// `tools/call` as a 2026-07-28 client that can send its human to a page (URL-mode
/// elicitation): the request's own `_meta` says so.
async fn modern_call(mcp: &Mcp, token: &str, tool: &str, arguments: Value, round: Value) -> Value {
    let mut params = json!({
        "name": tool,
        "arguments": arguments,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}
        }
    });
    if let Value::Object(round) = round {
        params.as_object_mut().unwrap().extend(round);
    }
    let response = mcp
        .server
        .client
        .post(mcp.server.url("/mcp"))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body = response.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    body["result"].clone()
}

/// The approval API behind the page an approval URL (`…/approve?token=T&call=C`) opens.
fn approval_api(mcp: &Mcp, page: &str) -> String {
    mcp.server.url(&tests::mcp_calls::approval_api_path(page))
}

/// The web user's answer on the page: the HTTP status and body.
async fn answer_on_page(mcp: &Mcp, page: &str, approve: bool, seen: &str) -> (u16, Value) {
    let answered = mcp
        .server
        .client
        .post(approval_api(mcp, page))
        .json(&json!({"approve": approve, "description": seen}))
        .send()
        .await
        .unwrap();
    let status = answered.status().as_u16();
    (status, answered.json().await.unwrap())
}

/// What the page shows: the HTTP status and body.
async fn read_on_page(mcp: &Mcp, page: &str) -> (u16, Value) {
    let read = mcp
        .server
        .client
        .get(approval_api(mcp, page))
        .send()
        .await
        .unwrap();
    let status = read.status().as_u16();
    (status, read.json().await.unwrap())
}

/// A risky call over MCP runs only once the token's owner approved exactly that call on
/// Bridle's own page: the client's own accept (a script answering its own question) approves
/// nothing; a decline, a second use, a description that changed, another owner's question or
/// a revoked token's run nothing.
#[tokio::test]
async fn a_risky_call_runs_only_once_its_owner_approved_it_on_bridles_page() {
    let mcp = start(AppOptions::default()).await;
    // The web user of a server without sign-in is the local user: the page's owner.
    mcp.store
        .put_account(&Account::new("local", "You"))
        .await
        .unwrap();
    let risky = mcp.token("local", TokenScope::Risky).await;
    let created = mcp.call(&risky, "create_event", spring()).await;
    let id = created["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    mcp.call(&risky, "publish_event", json!({"event_id": id}))
        .await;
    let cancel = json!({"event_id": id});
    let status = |id: &str| {
        let store = mcp.store.clone();
        let id = id.to_owned();
        async move {
            let record = store.record("event", &id).await.unwrap().unwrap();
            record.value["status"].as_str().unwrap().to_owned()
        }
    };
    let described = "Cancel Spring Open (published, 2030-04-12T10:00 at Court 1, 0 registered)";

    // Asked: the client is to send its human to Bridle's page; nothing ran.
    let asked = modern_call(&mcp, &risky, "cancel_event", cancel.clone(), json!(null)).await;
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let question = asked["inputRequests"]["confirm"].clone();
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["mode"], "url", "{asked}");
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains(described),
        "{asked}"
    );
    let page = question["params"]["url"].as_str().unwrap().to_owned();
    assert!(
        page.starts_with(&mcp.server.url("/approve?token=")),
        "{page}"
    );
    let html = mcp.server.client.get(&page).send().await.unwrap();
    assert_eq!(html.status().as_u16(), 200);
    assert!(html.text().await.unwrap().contains("/approve.js"));
    assert_eq!(status(&id).await, "published");
    let state = asked["requestState"].clone();
    let accept = json!({"inputResponses": {"confirm": {"action": "accept", "content": {}}}, "requestState": state});

    // The client's accept alone approves nothing.
    let self_accepted =
        modern_call(&mcp, &risky, "cancel_event", cancel.clone(), accept.clone()).await;
    assert_eq!(self_accepted["isError"], true, "{self_accepted}");
    assert!(
        text(&self_accepted).contains("has not been approved"),
        "{self_accepted}"
    );
    assert_eq!(status(&id).await, "published");

    // The page shows what the database says; an answer to another description changes nothing.
    let (code, shown) = read_on_page(&mcp, &page).await;
    assert_eq!(code, 200, "{shown}");
    assert_eq!(shown["description"], described);
    assert_eq!(shown["client"], "test");
    let (code, _) = answer_on_page(&mcp, &page, true, "Cancel something harmless").await;
    assert_eq!(code, 409);

    // Declined on the page: the question is gone and the call runs nothing.
    let (code, body) = answer_on_page(&mcp, &page, false, described).await;
    assert_eq!((code, body["answer"].as_str()), (200, Some("declined")));
    assert_eq!(read_on_page(&mcp, &page).await.0, 404);
    let after_decline =
        modern_call(&mcp, &risky, "cancel_event", cancel.clone(), accept.clone()).await;
    assert_eq!(after_decline["isError"], true, "{after_decline}");
    assert_eq!(status(&id).await, "published");

    // Asked again and approved: the call made again runs, once; the approval is spent.
    let asked = modern_call(&mcp, &risky, "cancel_event", cancel.clone(), json!(null)).await;
    let page = asked["inputRequests"]["confirm"]["params"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, body) = answer_on_page(&mcp, &page, true, described).await;
    assert_eq!((code, body["answer"].as_str()), (200, Some("approved")));
    assert_eq!(
        answer_on_page(&mcp, &page, true, described).await.0,
        404,
        "answered once"
    );
    // The approval is the asking token's: another token of the same owner, making the same
    // call, is asked for its own.
    let second_token = mcp.token("local", TokenScope::Risky).await;
    let other = modern_call(
        &mcp,
        &second_token,
        "cancel_event",
        cancel.clone(),
        json!(null),
    )
    .await;
    assert_eq!(other["resultType"], "input_required", "{other}");
    assert_eq!(status(&id).await, "published");
    let accept = json!({"inputResponses": {"confirm": {"action": "accept", "content": {}}}, "requestState": asked["requestState"]});
    let ran = modern_call(&mcp, &risky, "cancel_event", cancel.clone(), accept.clone()).await;
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(ran["structuredContent"]["status"], "cancelled");
    let again = modern_call(&mcp, &risky, "cancel_event", cancel.clone(), accept).await;
    assert_eq!(again["isError"], true, "{again}");
    let audit = mcp.store.audit_log(&"local".into()).await.unwrap();
    let cancels = audit
        .iter()
        .filter(|e| {
            e.changes
                .iter()
                .any(|c| c.after.as_ref().is_some_and(|a| a["status"] == "cancelled"))
        })
        .count();
    assert_eq!(cancels, 1, "cancelled exactly once");

    // An approval of a call that would now do something else runs nothing: approved at 0
    // registered, made after a registration.
    let second = mcp.call(&risky, "create_event", spring()).await;
    let second_id = second["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    mcp.call(&risky, "publish_event", json!({"event_id": second_id}))
        .await;
    let cancel_second = json!({"event_id": second_id});
    let waits = mcp
        .call(&risky, "cancel_event", cancel_second.clone())
        .await;
    let page = text(&waits)
        .split_whitespace()
        .find(|w| w.contains("/approve?"))
        .expect("the sentence gives the page's address")
        .to_owned();
    let (code, _) = answer_on_page(&mcp, &page, true, described).await;
    assert_eq!(code, 200);
    let registered = mcp
        .call(
            &risky,
            "register_attendee",
            json!({"event_id": second_id, "name": "Dana Lee", "email": "dana@example.com"}),
        )
        .await;
    assert_eq!(registered["isError"], false, "{registered}");
    let changed = mcp
        .call(&risky, "cancel_event", cancel_second.clone())
        .await;
    assert!(text(&changed).contains("changed since"), "{changed}");
    assert_eq!(status(&second_id).await, "published");

    // A client that cannot open a page gets the address in the sentence; approved there, the
    // same call made again runs.
    let waits = mcp
        .call(&risky, "cancel_event", cancel_second.clone())
        .await;
    assert!(text(&waits).contains("owner's approval"), "{waits}");
    let page = text(&waits)
        .split_whitespace()
        .find(|w| w.contains("/approve?"))
        .unwrap()
        .to_owned();
    let now_described = "Cancel Spring Open (published, 2030-04-12T10:00 at Court 1, 1 registered)";
    assert_eq!(
        answer_on_page(&mcp, &page, true, now_described).await.0,
        200
    );
    let ran = mcp.call(&risky, "cancel_event", cancel_second).await;
    assert_eq!(ran["isError"], false, "{ran}");
    assert_eq!(status(&second_id).await, "cancelled");

    // Another owner's question is not the page user's to read or answer.
    let alices = mcp.token("alice", TokenScope::Risky).await;
    let hers = mcp.call(&alices, "create_event", spring()).await;
    let her_id = hers["structuredContent"]["id"].as_str().unwrap().to_owned();
    mcp.call(&alices, "publish_event", json!({"event_id": her_id}))
        .await;
    let asked = modern_call(
        &mcp,
        &alices,
        "cancel_event",
        json!({"event_id": her_id}),
        json!(null),
    )
    .await;
    let her_page = asked["inputRequests"]["confirm"]["params"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(read_on_page(&mcp, &her_page).await.0, 404);
    assert_eq!(
        answer_on_page(&mcp, &her_page, true, described).await.0,
        404
    );
    let accept = json!({"inputResponses": {"confirm": {"action": "accept"}}, "requestState": asked["requestState"]});
    let refused = modern_call(
        &mcp,
        &alices,
        "cancel_event",
        json!({"event_id": her_id}),
        accept,
    )
    .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(status(&her_id).await, "published");

    // A revoked token's question is gone from the page.
    let third = mcp.call(&risky, "create_event", spring()).await;
    let third_id = third["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    mcp.call(&risky, "publish_event", json!({"event_id": third_id}))
        .await;
    let asked = modern_call(
        &mcp,
        &risky,
        "cancel_event",
        json!({"event_id": third_id}),
        json!(null),
    )
    .await;
    let page = asked["inputRequests"]["confirm"]["params"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(read_on_page(&mcp, &page).await.0, 200);
    let token_id = mcp.store.tokens_of(&"local".into()).await.unwrap()[0]
        .id
        .clone();
    mcp.store.revoke_token(&token_id, now_ms()).await.unwrap();
    assert_eq!(read_on_page(&mcp, &page).await.0, 404);

    // An answer whose state is for another call runs nothing.
    let forged = json!({"inputResponses": {"confirm": {"action": "accept"}}, "requestState": "not-the-hash"});
    let refused = modern_call(
        &mcp,
        &alices,
        "cancel_event",
        json!({"event_id": her_id}),
        forged,
    )
    .await;
    assert!(text(&refused).contains("another call"), "{refused}");
    mcp.server.stop().await;
}

#[tokio::test]
async fn a_users_tokens_share_one_requests_per_minute_and_another_user_has_their_own() {
    // Tokens cost nothing to make: were the limit per token, a user (or a leaked session)
    // would multiply it by making more of them.
    let mcp = start(AppOptions {
        mcp_rate: mcp::RateLimit { per_minute: 3 },
        ..AppOptions::default()
    })
    .await;
    let first = mcp.token("alice", TokenScope::Read).await;
    let second = mcp.token("alice", TokenScope::Read).await;
    let bobs = mcp.token("bob", TokenScope::Read).await;
    for _ in 0..3 {
        let listed = mcp.call(&first, "list_events", json!({})).await;
        assert_eq!(listed["isError"], false, "{listed}");
    }
    let limited = mcp.call(&first, "list_events", json!({})).await;
    assert_eq!(limited["isError"], true);
    assert!(text(&limited).contains("at most 3 a minute"), "{limited}");
    let (_, _, body) = mcp.rpc(Some(&first), "tools/list", json!({})).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Too many requests"),
        "{body}"
    );
    assert_eq!(
        body["error"]["code"],
        mcp::handler::RATE_LIMITED.0,
        "not an internal error: {body}"
    );
    let another = mcp.call(&second, "list_events", json!({})).await;
    assert_eq!(another["isError"], true, "a second token shares the count");
    assert!(text(&another).contains("at most 3 a minute"), "{another}");
    let other_user = mcp.call(&bobs, "list_events", json!({})).await;
    assert_eq!(
        other_user["isError"], false,
        "another user has their own count"
    );
    mcp.server.stop().await;
}

/// Requests that are neither calls nor lists (`ping`, `initialize`, notifications) are counted
/// too, at four times the calls' rate: past it the door answers 429 with `Retry-After` before
/// anything else runs, and another user has their own count.
#[tokio::test]
async fn every_request_is_counted_whatever_its_method() {
    let mcp = start(AppOptions {
        mcp_rate: mcp::RateLimit { per_minute: 2 },
        ..AppOptions::default()
    })
    .await;
    let alices = mcp.token("alice", TokenScope::Read).await;
    let bobs = mcp.token("bob", TokenScope::Read).await;
    let mut statuses = Vec::new();
    for method in [
        "initialize",
        "ping",
        "ping",
        "ping",
        "ping",
        "ping",
        "ping",
        "ping",
        "ping",
    ] {
        let params = if method == "initialize" {
            initialize()
        } else {
            json!({})
        };
        statuses.push(mcp.rpc(Some(&alices), method, params).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 200, 200, 200, 429]);
    let refused = mcp
        .server
        .client
        .post(mcp.server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .bearer_auth(&alices)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let body: Value = refused.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("at most 8 a minute of any kind"),
        "{body}"
    );
    assert_eq!(mcp.rpc(Some(&bobs), "ping", json!({})).await.0, 200);
    mcp.server.stop().await;
}

#[tokio::test]
async fn an_unknown_method_gets_a_json_rpc_error() {
    let mcp = start(AppOptions::default()).await;
    let token = mcp.token("alice", TokenScope::Read).await;
    for method in ["tasks/frobnicate", "no/such/method"] {
        let (status, _, body) = mcp.rpc(Some(&token), method, json!({})).await;
        assert!(status < 500, "{method}: HTTP {status}: {body}");
        assert_eq!(body["jsonrpc"], "2.0", "{method}: {body}");
        assert!(body["error"]["code"].is_i64(), "{method}: {body}");
    }
    mcp.server.stop().await;
}

#[tokio::test]
async fn a_request_body_over_the_cap_gets_413_and_runs_nothing() {
    let mcp = start(AppOptions::default()).await;
    let token = mcp.token("alice", TokenScope::Write).await;
    let name = "x".repeat(mcp::handler::MAX_REQUEST_BYTES);
    let (status, _, body) = mcp
        .rpc(
            Some(&token),
            "tools/call",
            json!({"name": "create_event", "arguments": {"title": name}}),
        )
        .await;
    assert_eq!(status, 413, "{body}");
    let (status, _, body) = mcp.rpc(Some(&token), "tools/list", json!({})).await;
    assert_eq!(status, 200, "a request under the cap still runs: {body}");
    mcp.server.stop().await;
}

#[tokio::test]
async fn connect_an_ai_client_creates_lists_and_revokes_the_users_own_tokens() {
    let mcp = start(AppOptions::default()).await;
    let api = |path: &str| mcp.server.url(path);
    let http = &mcp.server.client;

    let page = http.get(api("/connect")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    assert!(page.text().await.unwrap().contains("Connect an AI client"));

    let made = http
        .post(api("/api/mcp-tokens"))
        .json(&json!({"name": "Claude Desktop", "scope": "read", "expires_in_days": 30}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status().as_u16(), 201);
    let made: Value = made.json().await.unwrap();
    let token = made["token"].as_str().unwrap().to_owned();
    assert_eq!(made["url"], api("/mcp"));
    assert_eq!(made["scope"], "read");
    let (status, _, _) = mcp.rpc(Some(&token), "tools/list", json!({})).await;
    assert_eq!(status, 200, "the token opens /mcp");

    let listed: Value = http
        .get(api("/api/mcp-tokens"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["tokens"][0]["name"], "Claude Desktop");
    assert!(!listed.to_string().contains(&token), "never listed");

    let bad = http
        .post(api("/api/mcp-tokens"))
        .json(&json!({"scope": "admin"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    assert!(bad.text().await.unwrap().contains("read, write or risky"));

    // Someone else's token reads as not found; one's own is revoked.
    let bobs = mcp.token("bob", TokenScope::Read).await;
    let bobs_id = token_id(&mcp, "bob").await;
    let other = http
        .delete(api(&format!("/api/mcp-tokens/{bobs_id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status().as_u16(), 404);
    let (status, _, _) = mcp.rpc(Some(&bobs), "tools/list", json!({})).await;
    assert_eq!(status, 200, "bob's token still works");
    let id = made["id"].as_str().unwrap();
    let revoked = http
        .delete(api(&format!("/api/mcp-tokens/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status().as_u16(), 204);
    let (status, _, _) = mcp.rpc(Some(&token), "tools/list", json!({})).await;
    assert_eq!(status, 401);
    mcp.server.stop().await;
}

#[tokio::test]
async fn a_closed_accounts_tokens_open_nothing_and_a_paused_ones_still_read() {
    let mcp = start(AppOptions::default()).await;
    let alice = mcp.token("alice", TokenScope::Write).await;
    let bob = mcp.token("bob", TokenScope::Read).await;
    let created = mcp.call(&alice, "create_event", spring()).await;
    assert_eq!(created["isError"], false, "{created}");
    let set = |status| Account {
        status,
        ..Account::new("alice", "Alice")
    };

    // Paused: reads go on (as on the web), writes are refused as every write is checked.
    mcp.store
        .put_account(&set(AccountStatus::Paused))
        .await
        .unwrap();
    let listed = mcp.call(&alice, "list_events", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["items"][0]["title"],
        "Spring Open"
    );
    let refused = mcp.call(&alice, "create_event", spring()).await;
    assert_eq!(refused["isError"], true, "{refused}");

    // Closed: the door turns the token away before any tool reads a thing.
    mcp.store
        .put_account(&set(AccountStatus::Closed))
        .await
        .unwrap();
    for (method, params) in [
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({"name": "list_events", "arguments": {}}),
        ),
    ] {
        let (status, challenge, body) = mcp.rpc(Some(&alice), method, params).await;
        assert_eq!(status, 401, "{method}: {body}");
        assert_eq!(
            challenge.as_deref(),
            Some("Bearer realm=\"bridle\", error=\"invalid_token\"")
        );
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("account is closed"),
            "{body}"
        );
        assert!(!body.to_string().contains("Spring Open"), "{body}");
    }
    // Another user's token is untouched.
    let theirs = mcp.call(&bob, "list_events", json!({})).await;
    assert_eq!(theirs["structuredContent"]["items"], json!([]));
    mcp.server.stop().await;
}

/// Tokens are never deleted and a user's list is read whole, so a user keeps at most twenty
/// working tokens and makes at most twenty a day: past either, nothing is made and the answer
/// says what to do.
#[tokio::test]
async fn a_user_keeps_at_most_twenty_working_tokens_and_makes_twenty_a_day() {
    let mcp = start(AppOptions::default()).await;
    let http = &mcp.server.client;
    let make = || async {
        http.post(mcp.server.url("/api/mcp-tokens"))
            .json(&json!({"scope": "read"}))
            .send()
            .await
            .unwrap()
    };
    // Twenty working tokens made two days ago.
    let long_ago = now_ms() - 2 * 86_400_000;
    let mut ids = Vec::new();
    for _ in 0..20 {
        let (token, _) = issue_token(
            mcp.store.as_ref(),
            &UserId::from("local"),
            "old",
            TokenScope::Read,
            None,
            long_ago,
        )
        .await
        .unwrap();
        ids.push(token.id);
    }
    let full = make().await;
    assert_eq!(full.status().as_u16(), 409);
    assert!(full.text().await.unwrap().contains("revoke one"));
    let revoked = http
        .delete(mcp.server.url(&format!("/api/mcp-tokens/{}", ids[0])))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status().as_u16(), 204);
    assert_eq!(make().await.status().as_u16(), 201, "room for one again");

    // Revoking and making again, twenty times in a day: then no more today, though there is
    // room among the working ones.
    let revoke_one = || async {
        let listed: Value = http
            .get(mcp.server.url("/api/mcp-tokens"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let live = listed["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["revoked_at_ms"].is_null())
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .unwrap();
        let gone = http
            .delete(mcp.server.url(&format!("/api/mcp-tokens/{live}")))
            .send()
            .await
            .unwrap();
        assert_eq!(gone.status().as_u16(), 204);
    };
    for made in 1..20 {
        revoke_one().await;
        assert_eq!(make().await.status().as_u16(), 201, "token {made}");
    }
    revoke_one().await;
    let today = make().await;
    assert_eq!(today.status().as_u16(), 429);
    assert!(today.text().await.unwrap().contains("tomorrow"));
    mcp.server.stop().await;
}

/// A whole number an AI client wrote with a fraction (`250.0`, an integer to JSON Schema) is
/// that number to the tool: the event gets 250 places (it got 1, the handler's default).
#[tokio::test]
async fn a_whole_number_written_with_a_fraction_is_that_number_over_mcp() {
    let mcp = start(AppOptions::default()).await;
    let alice = mcp.token("alice", TokenScope::Write).await;
    let mut args = spring();
    args["capacity"] = json!(250.0);
    let created = mcp.call(&alice, "create_event", args).await;
    assert_eq!(created["structuredContent"]["capacity"], 250, "{created}");
    mcp.server.stop().await;
}

/// The tokens as DynamoDB lists them a moment after they are made: its index behind, the
/// user's tokens are not listed yet.
struct IndexBehind(Arc<SqliteStore>);

#[async_trait::async_trait]
impl Tokens for IndexBehind {
    async fn create_token(&self, token: &store::McpToken) -> Result<(), store::StoreError> {
        self.0.create_token(token).await
    }
    async fn token_by_hash(
        &self,
        hash: &str,
    ) -> Result<Option<store::McpToken>, store::StoreError> {
        self.0.token_by_hash(hash).await
    }
    async fn token(&self, id: &str) -> Result<Option<store::McpToken>, store::StoreError> {
        self.0.token(id).await
    }
    async fn tokens_of(&self, _: &UserId) -> Result<Vec<store::McpToken>, store::StoreError> {
        Ok(Vec::new())
    }
    async fn revoke_token(&self, id: &str, at_ms: i64) -> Result<bool, store::StoreError> {
        self.0.revoke_token(id, at_ms).await
    }
    async fn touch_token(&self, id: &str, at_ms: i64) -> Result<(), store::StoreError> {
        self.0.touch_token(id, at_ms).await
    }
}

/// The caps hold where the list of a user's tokens misses the newest (a request racing
/// another, DynamoDB's index behind its table): no more than twenty are made in a day, made
/// one after another with nothing listed, or forty at once on the real list.
#[tokio::test]
async fn a_burst_of_token_requests_makes_no_more_than_twenty() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .put_account(&Account::new("local", "Local"))
        .await
        .unwrap();
    let options = AppOptions {
        store: Some(OtherStore(store.clone())),
        tokens: Some(Arc::new(IndexBehind(store.clone()))),
        ..AppOptions::default()
    };
    let server = TestServer::start(Arc::new(ScriptedModel::new(vec![])), options).await;
    let make = || async {
        server
            .client
            .post(server.url("/api/mcp-tokens"))
            .json(&json!({"scope": "read"}))
            .send()
            .await
            .unwrap()
    };
    for made in 1..=20 {
        assert_eq!(make().await.status().as_u16(), 201, "token {made}");
    }
    let over = make().await;
    assert_eq!(over.status().as_u16(), 429);
    assert!(over.text().await.unwrap().contains("tomorrow"));
    let user = UserId::from("local");
    assert_eq!(store.tokens_of(&user).await.unwrap().len(), 20);
    server.stop().await;

    let mcp = start(AppOptions::default()).await;
    let make = || async {
        mcp.server
            .client
            .post(mcp.server.url("/api/mcp-tokens"))
            .json(&json!({"scope": "read"}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let answers = futures::future::join_all((0..40).map(|_| make())).await;
    let made = answers.iter().filter(|s| **s == 201).count();
    assert!(made <= 20, "{answers:?}");
    assert!(
        answers.iter().all(|s| [201, 409, 429].contains(s)),
        "{answers:?}"
    );
    assert_eq!(mcp.store.tokens_of(&user).await.unwrap().len(), made);
    mcp.server.stop().await;
}

/// A question lasts 10 minutes on the page, and an approval 10 minutes for the call: past
/// either, nothing runs and the client is asked again. Ids of shapes Bridle does not make are
/// no question.
#[tokio::test]
async fn questions_and_approvals_expire_and_odd_ids_are_no_question() {
    let clock = Arc::new(std::sync::atomic::AtomicI64::new(now_ms()));
    let c = clock.clone();
    let mcp = start(AppOptions {
        guards: bridle::guards::GuardOptions {
            clock: Arc::new(move || c.load(std::sync::atomic::Ordering::SeqCst)),
            ..bridle::guards::GuardOptions::default()
        },
        ..AppOptions::default()
    })
    .await;
    let later = |ms: i64| {
        clock.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    };
    mcp.store
        .put_account(&Account::new("local", "You"))
        .await
        .unwrap();
    let risky = mcp.token("local", TokenScope::Risky).await;
    let made = mcp.call(&risky, "create_event", spring()).await;
    let id = made["structuredContent"]["id"].as_str().unwrap().to_owned();
    mcp.call(&risky, "publish_event", json!({"event_id": id}))
        .await;
    let cancel = json!({"event_id": id});
    let described = "Cancel Spring Open (published, 2030-04-12T10:00 at Court 1, 0 registered)";
    let page_of = |asked: &Value| {
        asked["inputRequests"]["confirm"]["params"]["url"]
            .as_str()
            .unwrap()
            .to_owned()
    };

    // A question not answered within 10 minutes is gone from the page.
    let asked = modern_call(&mcp, &risky, "cancel_event", cancel.clone(), json!(null)).await;
    let page = page_of(&asked);
    later(10 * 60_000);
    assert_eq!(read_on_page(&mcp, &page).await.0, 404);
    assert_eq!(answer_on_page(&mcp, &page, true, described).await.0, 404);

    // An approval not used within 10 minutes runs nothing; the call is asked about again.
    let asked = modern_call(&mcp, &risky, "cancel_event", cancel.clone(), json!(null)).await;
    let page = page_of(&asked);
    assert_eq!(answer_on_page(&mcp, &page, true, described).await.0, 200);
    later(10 * 60_000);
    let again = modern_call(&mcp, &risky, "cancel_event", cancel.clone(), json!(null)).await;
    assert_eq!(again["resultType"], "input_required", "{again}");
    let listed = mcp.call(&risky, "list_events", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["items"][0]["status"],
        "published"
    );

    // Within its time, it runs.
    assert_eq!(
        answer_on_page(&mcp, &page_of(&again), true, described)
            .await
            .0,
        200
    );
    later(9 * 60_000);
    let ran = mcp.call(&risky, "cancel_event", cancel).await;
    assert_eq!(ran["isError"], false, "{ran}");

    // Odd ids: not looked up, and the page's API says there is no such question.
    let long = "a".repeat(3000);
    for (token, call) in [
        ("%2E%2E", "x"),
        ("tok_0", "conversations"),
        (long.as_str(), "h"),
    ] {
        let api = mcp
            .server
            .url(&format!("/api/mcp-approvals/{token}/{call}"));
        let read = mcp.server.client.get(&api).send().await.unwrap();
        assert_eq!(read.status().as_u16(), 404, "{token}/{call}");
        let answered = mcp
            .server
            .client
            .post(&api)
            .json(&json!({"approve": true, "description": described}))
            .send()
            .await
            .unwrap();
        assert_eq!(answered.status().as_u16(), 404, "{token}/{call}");
    }
    mcp.server.stop().await;
}

/// A call that takes longer than the server's request limit (here it waits for the token's
/// turn, held by another of its calls) is answered when it is done: never a 408, which would
/// tell the client to send again a call that is still running, and so do it twice.
#[tokio::test]
async fn a_call_slower_than_the_request_limit_is_answered_not_timed_out() {
    let limit = std::time::Duration::from_millis(600);
    let mcp = start(AppOptions {
        http: bridle::server::HttpLimits {
            request: limit,
            ..bridle::server::HttpLimits::default()
        },
        ..AppOptions::default()
    })
    .await;
    let alice = mcp.token("alice", TokenScope::Write).await;
    // All of alice's tokens' changes take turns by one lease.
    let turn = mcp::one_at_a_time::owner_turn(&"alice".into());
    let now = now_ms();
    let held = mcp
        .store
        .acquire_lease(&turn, "an earlier call", now, now + 1_500)
        .await
        .unwrap();
    assert_eq!(held, store::Lease::Held);

    let started = std::time::Instant::now();
    let created = mcp.call(&alice, "create_event", spring()).await;
    assert!(started.elapsed() > limit, "{:?}", started.elapsed());
    assert_eq!(created["isError"], false, "{created}");
    let events = mcp.call(&alice, "list_events", json!({})).await;
    let items = events["structuredContent"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "made once: {events}");
    mcp.server.stop().await;
}

/// The owner undoes an AI client's changes from the web app, even once its token is revoked
/// (nothing else reaches the token's conversation then: a lost laptop's changes would stay).
/// The page first reads what the undo would put back; the undo runs only while that change is
/// still the client's last one. Another user's token reads as not found.
#[tokio::test]
async fn the_owner_undoes_a_revoked_clients_last_change_from_the_web_app() {
    let mcp = start(AppOptions::default()).await;
    // The web user of a server without sign-in is the local user.
    mcp.store
        .put_account(&Account::new("local", "You"))
        .await
        .unwrap();
    let token = mcp.token("local", TokenScope::Write).await;
    let created = mcp.call(&token, "create_event", spring()).await;
    assert_eq!(created["isError"], false, "{created}");
    let id = token_id(&mcp, "local").await;
    let s = &mcp.server;
    let revoked = s
        .client
        .delete(s.url(&format!("/api/mcp-tokens/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), 204);
    let undo_call = json!({"name": "undo", "arguments": {}});
    let (status, _, _) = mcp.rpc(Some(&token), "tools/call", undo_call).await;
    assert_eq!(status, 401, "the client cannot undo it any more");

    let preview = |id: String| async move {
        let res = s
            .client
            .get(s.url(&format!("/api/mcp-tokens/{id}/undo")))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json::<Value>().await.unwrap())
    };
    let (status, shown) = preview(id.clone()).await;
    assert_eq!(status, 200, "{shown}");
    let change = &shown["change"];
    assert_eq!(
        change["lines"],
        json!(["delete the event \u{201c}Spring Open\u{201d}"]),
        "{shown}"
    );
    let undo = |action: Value| {
        let url = s.url(&format!("/api/mcp-tokens/{id}/undo"));
        async move {
            let res = s
                .client
                .post(url)
                .json(&json!({ "action": action }))
                .send()
                .await
                .unwrap();
            (res.status().as_u16(), res.json::<Value>().await.unwrap())
        }
    };
    let events = || async {
        mcp.store
            .records_of(&"local".into(), "event")
            .await
            .unwrap()
            .len()
    };
    let (status, stale) = undo(json!("mcp:another-change")).await;
    assert_eq!(status, 409, "{stale}");
    assert_eq!(events().await, 1, "nothing undone");
    let (status, done) = undo(change["action"].clone()).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(events().await, 0, "the client's event is gone");
    let (_, after) = preview(id.clone()).await;
    assert_eq!(after["change"], Value::Null, "{after}");
    let (status, again) = undo(change["action"].clone()).await;
    assert_eq!(status, 409, "undone once: {again}");

    let bobs = mcp.token("bob", TokenScope::Write).await;
    mcp.call(&bobs, "create_event", spring()).await;
    let (status, _) = preview(token_id(&mcp, "bob").await).await;
    assert_eq!(status, 404, "another's token reads as not found");
    mcp.server.stop().await;
}
