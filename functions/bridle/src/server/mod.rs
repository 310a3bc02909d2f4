//! The local server: the web chat, its HTTP API, and the worker, in one process.

mod admin;
mod api;
mod approvals;
mod assets;
pub(crate) mod errors;
mod grant;
mod inspect;
mod inspect_view;
mod limits;
mod link;
mod links;
pub mod owners;
mod peers;
pub mod streams;
pub mod sweep;
mod timetable;
mod tokens;
pub mod web_rates;
mod webhooks;

pub use limits::HttpLimits;
pub use webhooks::Channels;
mod usage;

use crate::auth;
use crate::hub::Hub;
use crate::notes::Notes;
use crate::worker::Worker;
use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit};
use axum::http::{HeaderValue, header};
use axum::middleware;
use axum::routing::{any, delete, get, post};
use engine::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use queue::JobQueue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use store::Store;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tower_http::set_header::SetResponseHeaderLayer;

/// Largest request body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// How long turns cut short at the end of the grace period get to release their leases and
/// claims and put their jobs back (a few store writes each) before the server exits anyway.
const CUT_SHORT_WAIT: Duration = Duration::from_secs(2);
/// Past the grace period, how long connections still get to write the final event the stop
/// gave their streams; a connection still open after it is closed.
const FLUSH_WAIT: Duration = Duration::from_millis(500);

/// The single user of the local web chat.
pub const LOCAL_USER: &str = "local";

/// Everything the server and its worker share.
#[derive(Clone)]
pub struct App {
    pub store: Arc<dyn Store>,
    /// The one database the store, the queue and the notes share (its calls are counted).
    pub db: Arc<store_sqlite::Db>,
    pub queue: Arc<dyn JobQueue>,
    pub engine: Arc<Engine>,
    pub hub: Arc<Hub>,
    /// Reply streams open per user ([`streams`]).
    pub streams: Arc<streams::OpenStreams>,
    /// Web conversations' owners as read here (they never change): a message into one its
    /// sender owns is queued without reading the conversation again.
    pub owners: Arc<owners::Owners>,
    pub notes: Arc<Notes>,
    /// The planner's service layer (the engine's tools use the same one): the timetable panel
    /// reads through it.
    pub planner: Arc<planner::Planner>,
    /// Messaging channels: webhooks in, channel jobs out.
    pub channels: Channels,
    pub max_message_chars: usize,
    pub max_concurrent_turns: usize,
    /// How long one attempt of a job may run ([`crate::AppOptions::job_budget`]).
    pub job_budget: std::time::Duration,
    /// Caps and prices (meter, admin page).
    pub budget: Arc<budget::BudgetConfig>,
    pub clock: budget::Clock,
    /// Opens `/admin/budget` when no sign-in is configured; `None`: the page does not exist
    /// there. With sign-in, the `admin` and `finance` roles open it.
    pub admin_token: Option<String>,
    /// Sign-in with OpenID Connect; `None`: one local user, no sign-in (loopback only).
    pub sign_in: Option<Arc<crate::auth::SignIn>>,
    /// How long a stop may take: running turns finish, then open streams and connections
    /// close; past it the server exits anyway (`BRIDLE_SHUTDOWN_GRACE_S`).
    pub shutdown_grace: std::time::Duration,
    /// What the server puts up with from clients (`BRIDLE_HTTP_*`).
    pub http: HttpLimits,
    /// `BRIDLE_TRUSTED_PROXIES`: their connections are not counted per client.
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Deliveries after which a failing job is given up (the queue's `max_receives`).
    pub max_receives: u32,
    /// `/mcp` for external AI clients, behind its own token check (not the session gate).
    pub mcp: Router,
    /// The users' MCP access tokens ("Connect an AI client").
    pub tokens: Arc<dyn store::Tokens>,
    /// Changes each signed-in user may make a minute ([`web_rates::WRITES`]).
    pub write_rate: budget::RequestRate,
    /// Reads each signed-in user may make a minute ([`web_rates::READS`]).
    pub read_rate: budget::RequestRate,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("engine", &self.engine)
            .field("max_message_chars", &self.max_message_chars)
            .finish_non_exhaustive()
    }
}

/// The pages' content security policy (a response that sets its own keeps it).
const CSP: &str = "default-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'; \
                   frame-ancestors 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:";

/// `ok`, or 503 with why once the database refuses durable writes (a sync of its log failed:
/// only a restart makes them trustworthy again), so a supervisor restarts the server.
async fn health(axum::extract::State(app): axum::extract::State<App>) -> axum::response::Response {
    use axum::response::IntoResponse;
    match app.db.broken() {
        None => "ok".into_response(),
        Some(why) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// The HTTP routes.
pub fn router(app: App) -> Router {
    let api = Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/healthz", get(health))
        .route(
            "/api/conversations",
            get(api::list_conversations).post(api::create_conversation),
        )
        .route(
            "/api/conversations/{id}/messages",
            get(api::history).post(api::post_message),
        )
        .route("/api/notes", get(api::list_notes))
        .route("/api/timetable", get(timetable::timetables))
        .route("/timetable.js", get(timetable::script))
        .route("/api/link-code", post(link::create_link_code))
        .route("/api/links", get(links::list))
        .route("/api/links/unlink", post(links::unlink))
        .route("/api/usage", get(usage::usage))
        .route("/api/assistant-grant", get(grant::read).post(grant::set))
        .route("/connect", get(assets::connect))
        .route("/connect.js", get(assets::connect_script))
        .route("/api/mcp-tokens", get(tokens::list).post(tokens::create))
        .route("/api/mcp-tokens/{id}", delete(tokens::revoke))
        .route(
            "/api/mcp-tokens/{id}/undo",
            get(tokens::undo_preview).post(tokens::undo),
        )
        .route("/approve", get(assets::approve))
        .route("/approve.js", get(assets::approve_script))
        .route(
            "/api/mcp-approvals/{token}/{call}",
            get(approvals::read).post(approvals::answer),
        )
        .route("/admin/budget", get(admin::budget_page))
        .route("/admin/inspect", get(inspect::page))
        .route("/admin/inspect.js", get(inspect::script))
        .route("/admin/inspect.css", get(inspect::style))
        .route("/admin/inspect/conversations", get(inspect::list))
        .route(
            "/admin/inspect/conversations/{id}",
            get(inspect::conversation),
        )
        .route("/api/session", get(auth::routes::session))
        .route("/auth/login", get(auth::routes::login))
        .route("/auth/callback", get(auth::routes::callback))
        .route("/auth/logout", post(auth::routes::logout))
        .route(
            "/auth/logout-everywhere",
            post(auth::routes::logout_everywhere),
        )
        .route("/auth/signed-out", get(auth::routes::signed_out))
        .fallback(errors::not_found)
        .layer(middleware::from_fn_with_state(app.clone(), auth::gate))
        .layer(middleware::from_fn(limits::json_errors))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES));
    // The webhook applies its own cap (and says 413 in its own words); let it see one byte more.
    let webhook_cap = app.channels.setup.max_webhook_body_bytes + 1;
    let webhooks = Router::new()
        .route("/webhooks/{channel}", any(webhooks::receive))
        .layer(DefaultBodyLimit::max(webhook_cap));
    let mcp = app.mcp.clone();
    // No page of ours may be shown inside another site's frame (clicking a held "yes" or the
    // assistant's grant through an overlay): signed in, a sibling host's page counts as the
    // same site and its frame would carry the session; local, any page can frame loopback.
    api.merge(webhooks)
        .with_state(app)
        .merge(mcp)
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        // Scripts only from our own files (the pages have no inline script; a model's or
        // another sender's text that got into the page as markup could run nothing), no
        // plugins, no <base> to point our relative URLs elsewhere; styles may be inline (the
        // budget and sign-in pages carry theirs).
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ))
        // A JSON answer is never read as a script or a page (another site's <script src> of
        // our API), nor loaded into another site's page at all; no address of ours (an
        // approval page's query) goes out in a Referer.
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::HeaderName::from_static("cross-origin-resource-policy"),
            HeaderValue::from_static("same-origin"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ))
        // Nothing is kept by a browser's or a proxy's cache: the session's CSRF token, a new
        // MCP token's secret, a conversation's history are answers for one person at one time.
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
}

/// Start the worker that runs the app's turn jobs (web chat and messaging channels) off its
/// queue, until `shutdown` turns true; the returned task ends once its running turns finish.
/// [`run`] starts it beside the HTTP server; the web Lambda starts it at init, so a posted
/// message's turn runs, and streams, within the invocation that posted it.
pub fn spawn_worker(app: &App, shutdown: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    let worker = Arc::new(Worker {
        queue: app.queue.clone(),
        hub: app.hub.clone(),
        jobs: app.channels.jobs.clone(),
        max_receives: app.max_receives,
        max_concurrent: app.max_concurrent_turns,
        job_budget: app.job_budget,
    });
    tokio::spawn(worker.run(shutdown))
}

/// Serve until `shutdown` completes, running the worker beside the HTTP server; then drain
/// within [`App::shutdown_grace`]: stop accepting, let running turns finish, tell streams
/// whose queued message has not started that it will be answered after the restart (the job
/// stays in the durable queue), and wait for connections to close. Past the grace period it
/// cuts running turns short (their leases and claims are released and their jobs put back,
/// within [`CUT_SHORT_WAIT`]) and returns: such a turn resumes from the stored transcript on
/// the next start, and a half-sent request was never accepted.
pub async fn run(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut worker_task = spawn_worker(&app, stop_rx.clone());
    // Ends when `stop_tx` says stop (or is dropped).
    sweep::spawn_sweep(
        app.store.clone(),
        app.clock.clone(),
        sweep::SWEEP_EVERY,
        stop_rx.clone(),
    );
    let abandon = app.channels.jobs.options.abandon.clone();
    let (hub, grace, limits) = (app.hub.clone(), app.shutdown_grace, app.http);
    let proxies = app.trusted_proxies.clone();
    let service = router(app).layer(middleware::from_fn(move |request, next| {
        limits::limit_requests(limits, request, next)
    }));
    let accepting = tokio::spawn(accept(listener, service, limits, proxies, stop_rx));
    shutdown.await;
    let _ = stop_tx.send(true);
    let deadline = tokio::time::Instant::now() + grace;
    tracing::info!(
        ?grace,
        "stopping: no new connections; letting running turns finish"
    );
    let graceful = accepting.await.map_err(std::io::Error::other)?;
    if tokio::time::timeout_at(deadline, &mut worker_task)
        .await
        .is_err()
    {
        // Cut them short, so their leases and claims are released and their jobs put back:
        // the next start resumes them at once instead of waiting for those to lapse.
        abandon.send_replace(true);
        let released = tokio::time::timeout(CUT_SHORT_WAIT, worker_task)
            .await
            .is_ok();
        tracing::warn!(
            released,
            "the grace period ended with turns still running; they were cut short and resume on \
             the next start"
        );
    }
    let waiting = hub.interrupt_all();
    if waiting > 0 {
        tracing::info!(
            waiting,
            "told waiting streams their messages are answered after the restart"
        );
    }
    // Streams told just now (a turn cut short, a waiting message) still need their last event
    // written out: past the grace period, connections get a short moment more for that.
    let close_by = deadline.max(tokio::time::Instant::now() + FLUSH_WAIT);
    if tokio::time::timeout_at(close_by, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("the grace period ended with connections still open; closing them");
    }
    Ok(())
}

/// Accept connections until `stop` turns true, at most `limits.max_connections` at a time,
/// each served by hyper as HTTP/1.1 with the header timer on from the connection's start (it
/// also closes silent and idle keep-alive connections); returns the watch over the open ones,
/// for the stop to wait on.
async fn accept(
    listener: TcpListener,
    service: Router,
    limits: HttpLimits,
    proxies: Vec<std::net::IpAddr>,
    mut stop: watch::Receiver<bool>,
) -> GracefulShutdown {
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_peer = peers::PerPeer::new(limits.max_per_peer, proxies);
    let mut refusals_said: Option<tokio::time::Instant> = None;
    // HTTP/1.1 only: browsers speak HTTP/2 only over TLS, and serving both means reading a
    // connection's first bytes to tell them apart, with no timer — a client that sends nothing,
    // or half of HTTP/2's preface, would hold its connection slot for good. With HTTP/1 alone
    // the header timer runs from the connection's start.
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read);
    let builder = Arc::new(builder);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            _ = stopped(&mut stop) => return graceful,
        };
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = stopped(&mut stop) => return graceful,
        };
        // One client's share: past it, the connection is closed at once (its place goes back).
        let Some(peer_place) = per_peer.take(peer.ip()) else {
            // Said once a minute at most: the refusals themselves must not flood the log.
            if refusals_said.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                refusals_said = Some(tokio::time::Instant::now());
                tracing::warn!(peer = %peers::client_of(peer.ip()), "too many connections from one client; closed (said once a minute)");
            }
            drop(tcp);
            continue;
        };
        // Streamed tokens are small writes: without TCP_NODELAY, Nagle plus delayed ACKs hold
        // each one back ~40 ms.
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::warn!(%err, "could not set TCP_NODELAY");
        }
        // A write that makes no progress for the stall limit fails, and the connection ends.
        let mut io = tokio_io_timeout::TimeoutStream::new(tcp);
        io.set_write_timeout(Some(limits.write_stall));
        // The peer's address, for what is counted per client (`auth::from_address`).
        let service = TowerToHyperService::new(tower::util::MapRequest::new(
            service.clone(),
            move |mut request: axum::http::Request<_>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            },
        ));
        let builder = builder.clone();
        let connection = graceful.watch(
            builder
                .serve_connection(TokioIo::new(Box::pin(io)), service)
                .into_owned(),
        );
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(%err, "connection ended with an error");
            }
            drop(peer_place);
            drop(permit);
        });
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}
