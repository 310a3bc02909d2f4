//! A token's changing calls take turns: a second change through the same token is not judged
//! by the confirmation policy (nor run) until the first has run, so neither is judged against a
//! state the other is about to change. Reads do not wait, and a call that waits too long is
//! refused with nothing done.

use axum::body::Body;
use axum::http::Request;
use mcp::handler::{McpOptions, McpParts, router};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use store::{Account, Accounts, Lease, Leases, McpToken, TokenScope, Tokens};
use store_sqlite::SqliteStore;
use tokio::sync::Notify;
use tools::{Ctx, Registry, ToolDef, handler_fn};
use tower::ServiceExt;

const TOKEN: &str = "brd_one-at-a-time-test-token";

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Counts what it judged; judges only `risky_change` risky.
#[derive(Default)]
struct Judging(AtomicUsize);

#[async_trait::async_trait]
impl engine::RiskPolicy for Judging {
    async fn assess(&self, _: &Ctx, tool: &str, _: &Value) -> Option<String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        (tool == "risky_change").then(|| "Do the risky thing".to_owned())
    }
}

/// What `change` saw: the first call waits inside for `go`.
struct Gate {
    inside: Notify,
    go: Notify,
    ran: AtomicUsize,
    /// Calls of `change` that ran to their end.
    done: AtomicUsize,
}

impl Gate {
    fn new(ran: usize) -> Arc<Self> {
        Arc::new(Self {
            inside: Notify::new(),
            go: Notify::new(),
            ran: AtomicUsize::new(ran),
            done: AtomicUsize::new(0),
        })
    }
}

/// `change` and `risky_change` (changes) and `look` (read-only).
fn registry(gate: Arc<Gate>) -> Registry {
    let mut r = Registry::default();
    let schema = json!({"type": "object"});
    r.register(
        ToolDef::new("change", "Change.", schema.clone()).purposes(&[mcp::MCP_PURPOSE]),
        handler_fn(move |_ctx: Ctx, _args: Value| {
            let gate = gate.clone();
            async move {
                if gate.ran.fetch_add(1, Ordering::SeqCst) == 0 {
                    gate.inside.notify_one();
                    gate.go.notified().await;
                }
                gate.done.fetch_add(1, Ordering::SeqCst);
                Ok(json!({"ok": true}))
            }
        }),
    )
    .unwrap();
    r.register(
        ToolDef::new("risky_change", "Risky change.", schema.clone()).purposes(&[mcp::MCP_PURPOSE]),
        handler_fn(|_ctx: Ctx, _args: Value| async { Ok(json!({"done": true})) }),
    )
    .unwrap();
    r.register(
        ToolDef::new("look", "Look.", schema)
            .purposes(&[mcp::MCP_PURPOSE])
            .read_only(),
        handler_fn(|_ctx: Ctx, _args: Value| async { Ok(json!({"seen": true})) }),
    )
    .unwrap();
    r
}

/// `/mcp` on an in-memory store holding Ana's write token.
async fn setup(gate: Arc<Gate>, judging: Arc<Judging>) -> (axum::Router, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    store
        .put_account(&Account::new("ana", "Ana"))
        .await
        .unwrap();
    store
        .create_token(&McpToken {
            id: "tok_ana".into(),
            hash: mcp::hash_token(TOKEN),
            user: "ana".into(),
            name: "test".into(),
            scope: TokenScope::Write,
            created_at_ms: 0,
            expires_at_ms: None,
            last_used_ms: None,
            revoked_at_ms: None,
        })
        .await
        .unwrap();
    let app = router(McpParts {
        registry: Arc::new(registry(gate)),
        policy: judging,
        tokens: store.clone(),
        accounts: store.clone(),
        ledger: store.clone(),
        pending: store.clone(),
        leases: store.clone(),
        clock: Arc::new(now_ms),
        options: McpOptions::default(),
    });
    (app, store)
}

/// `tools/call` of `tool`; the result object.
async fn call(app: axum::Router, tool: &str) -> Value {
    call_as(app, TOKEN, tool).await
}

/// [`call`] with `token`.
async fn call_as(app: axum::Router, token: &str, tool: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": {}}});
    let request = Request::post("/mcp")
        .header("host", "localhost")
        .header("authorization", format!("Bearer {token}"))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let value: Value = serde_json::from_slice(&bytes).unwrap();
    value["result"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokens_second_change_is_judged_only_after_the_first_has_run() {
    let gate = Gate::new(0);
    let judging = Arc::new(Judging::default());
    let (app, _store) = setup(gate.clone(), judging.clone()).await;

    let first = tokio::spawn(call(app.clone(), "change"));
    gate.inside.notified().await;
    assert_eq!(judging.0.load(Ordering::SeqCst), 1);
    let second = tokio::spawn(call(app.clone(), "change"));
    // A read is not held up by the change under way.
    let look = call(app.clone(), "look").await;
    assert_eq!(look["isError"], false, "{look}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        judging.0.load(Ordering::SeqCst),
        1,
        "the second change is not judged while the first runs"
    );
    assert!(!second.is_finished());

    gate.go.notify_one();
    let first = first.await.unwrap();
    let second = second.await.unwrap();
    assert_eq!(first["isError"], false, "{first}");
    assert_eq!(second["isError"], false, "{second}");
    assert_eq!(judging.0.load(Ordering::SeqCst), 2);
    assert_eq!(gate.ran.load(Ordering::SeqCst), 2);
}

/// Another token of the same owner takes turns too: its change is not judged while the first
/// token's runs (judged against a state the other is about to change: a draft's rename judged
/// harmless, run after the other published it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_owners_tokens_take_turns_with_each_other() {
    let gate = Gate::new(0);
    let judging = Arc::new(Judging::default());
    let (app, store) = setup(gate.clone(), judging.clone()).await;
    let second_token = "brd_one-at-a-time-second-token";
    store
        .create_token(&McpToken {
            id: "tok_ana_2".into(),
            hash: mcp::hash_token(second_token),
            user: "ana".into(),
            name: "another client".into(),
            scope: TokenScope::Write,
            created_at_ms: 0,
            expires_at_ms: None,
            last_used_ms: None,
            revoked_at_ms: None,
        })
        .await
        .unwrap();
    let first = tokio::spawn(call(app.clone(), "change"));
    gate.inside.notified().await;
    let second = tokio::spawn(call_as(app.clone(), second_token, "change"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        judging.0.load(Ordering::SeqCst),
        1,
        "the other token's change is not judged while the first runs"
    );
    gate.go.notify_one();
    assert_eq!(first.await.unwrap()["isError"], false);
    assert_eq!(second.await.unwrap()["isError"], false);
    assert_eq!(judging.0.load(Ordering::SeqCst), 2);
}

/// A change that cannot have its turn within the wait is refused, neither judged nor run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_waits_too_long_is_refused_with_nothing_done() {
    // Past its first call: `change` does not stop inside.
    let gate = Gate::new(1);
    let judging = Arc::new(Judging::default());
    let (app, store) = setup(gate.clone(), judging.clone()).await;
    // Another call of the token holds its turn past the wait (as a process that died holding
    // it would, until it lapses).
    let now = now_ms();
    let held = store
        .acquire_lease(&"mcp-owner:ana".into(), "mcp:another", now, now + 60_000)
        .await
        .unwrap();
    assert_eq!(held, Lease::Held);
    let started = std::time::Instant::now();
    let refused = call(app.clone(), "change").await;
    assert!(started.elapsed() >= mcp::one_at_a_time::WAIT - Duration::from_secs(1));
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Earlier changes through your access tokens were still being made"),
        "{text}"
    );
    assert_eq!(judging.0.load(Ordering::SeqCst), 0, "not judged");
    assert_eq!(gate.ran.load(Ordering::SeqCst), 1, "not run");
    // Once the other call gives its turn back, the token's changes go again.
    store
        .release_lease(&"mcp-owner:ana".into(), "mcp:another")
        .await
        .unwrap();
    let done = call(app, "change").await;
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(gate.ran.load(Ordering::SeqCst), 2);
}

/// A call refused after its judgement (here: risky, and the token may only write) gives its
/// turn back before it answers, as a question to the human does: the next request, which may
/// come to another instance, finds it free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_refused_after_its_judgement_gives_its_turn_back_before_it_answers() {
    let gate = Gate::new(1);
    let judging = Arc::new(Judging::default());
    let (app, store) = setup(gate.clone(), judging.clone()).await;
    let refused = call(app, "risky_change").await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(judging.0.load(Ordering::SeqCst), 1);
    let now = now_ms();
    let free = store
        .acquire_lease(&"mcp-owner:ana".into(), "mcp:next", now, now + 1_000)
        .await
        .unwrap();
    assert_eq!(free, Lease::Held, "the turn was given back");
}

/// A client that leaves while its change runs (a timeout, a dropped connection, on purpose)
/// does not end its turn early: the change runs to its end (its write may be on its way to the
/// store anyway), and the token's next change is judged only after it. Otherwise a client could
/// send an `undo`, hang up, and have its next `undo` judged against the top its first one was
/// reverting, then revert the action beneath unjudged. (rmcp runs each request's handler in a
/// task of its own, which the request's going away does not cancel; this pins that.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_client_left_runs_to_its_end_before_the_next_is_judged() {
    let gate = Gate::new(0);
    let judging = Arc::new(Judging::default());
    let (app, _store) = setup(gate.clone(), judging.clone()).await;

    let left = tokio::spawn(call(app.clone(), "change"));
    gate.inside.notified().await;
    left.abort();
    assert!(left.await.unwrap_err().is_cancelled(), "the client left");
    let next = tokio::spawn(call(app.clone(), "change"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        judging.0.load(Ordering::SeqCst),
        1,
        "the next change is not judged while the one whose client left still runs"
    );
    assert!(!next.is_finished());

    gate.go.notify_one();
    let next = next.await.unwrap();
    assert_eq!(next["isError"], false, "{next}");
    assert_eq!(judging.0.load(Ordering::SeqCst), 2);
    assert_eq!(
        gate.done.load(Ordering::SeqCst),
        2,
        "both changes ran to their end, the first too"
    );
}

/// A token revoked while its change waits for the token's turn (a lost laptop, its client
/// still sending) does no more: once the change has its turn, the token is read again, and the
/// change is refused, neither judged nor run. The change already running finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_waiting_when_its_token_is_revoked_is_not_made() {
    let gate = Gate::new(0);
    let judging = Arc::new(Judging::default());
    let (app, store) = setup(gate.clone(), judging.clone()).await;

    let first = tokio::spawn(call(app.clone(), "change"));
    gate.inside.notified().await;
    let waiting = tokio::spawn(call(app.clone(), "change"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(store.revoke_token("tok_ana", now_ms()).await.unwrap());
    gate.go.notify_one();

    let first = first.await.unwrap();
    assert_eq!(
        first["isError"], false,
        "the running change finished: {first}"
    );
    let waiting = waiting.await.unwrap();
    assert_eq!(waiting["isError"], true, "{waiting}");
    let text = waiting["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("was revoked"), "{text}");
    assert_eq!(judging.0.load(Ordering::SeqCst), 1, "not judged");
    assert_eq!(gate.done.load(Ordering::SeqCst), 1, "not run");
}

/// A change waiting for its turn when its person signs out everywhere (the token's revocation
/// missed, as a failed or lagging one does) is not made either: once it has its turn, its
/// account is read again as the door reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_waiting_when_its_owner_signs_out_everywhere_is_not_made() {
    let gate = Gate::new(0);
    let judging = Arc::new(Judging::default());
    let (app, store) = setup(gate.clone(), judging.clone()).await;

    let first = tokio::spawn(call(app.clone(), "change"));
    gate.inside.notified().await;
    let waiting = tokio::spawn(call(app.clone(), "change"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut ana = store.account(&"ana".into()).await.unwrap().unwrap();
    ana.sessions_ended_at_ms = now_ms();
    store.put_account(&ana).await.unwrap();
    gate.go.notify_one();

    assert_eq!(first.await.unwrap()["isError"], false);
    let waiting = waiting.await.unwrap();
    assert_eq!(waiting["isError"], true, "{waiting}");
    let text = waiting["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("signed out everywhere"), "{text}");
    assert_eq!(judging.0.load(Ordering::SeqCst), 1, "not judged");
    assert_eq!(gate.done.load(Ordering::SeqCst), 1, "not run");
}

/// A call that runs past one hold keeps its turn: the lease is renewed while it runs (else the
/// token's next change could be judged against a state this one is about to change), and
/// given back, renewals stopped, when it has run.
#[tokio::test(start_paused = true)]
async fn a_turn_is_kept_while_its_call_runs_past_one_hold() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let started = tokio::time::Instant::now();
    let base = now_ms();
    let clock: engine::Clock = Arc::new(move || base + started.elapsed().as_millis() as i64);
    let conversation = transcript::ConversationId::from("mcp:tok-1");
    let turn = mcp::one_at_a_time::take(
        store.clone(),
        conversation.clone(),
        "call-1".into(),
        clock.clone(),
    )
    .await
    .unwrap();
    tokio::time::sleep(mcp::one_at_a_time::HOLD * 3).await;
    let at = clock();
    let other = store
        .acquire_lease(&conversation, "call-2", at, at + 1_000)
        .await
        .unwrap();
    assert!(
        matches!(other, Lease::Busy { ref holder, .. } if holder == "call-1"),
        "three holds on, the running call still has its turn: {other:?}"
    );
    turn.give_back().await;
    let at = clock();
    assert_eq!(
        store
            .acquire_lease(&conversation, "call-2", at, at + 1_000)
            .await
            .unwrap(),
        Lease::Held,
        "given back when it has run"
    );
    tokio::time::sleep(mcp::one_at_a_time::HOLD * 2).await;
    let at = clock();
    assert_eq!(
        store
            .acquire_lease(&conversation, "call-3", at, at + 1_000)
            .await
            .unwrap(),
        Lease::Held,
        "and no longer renewed"
    );
}
