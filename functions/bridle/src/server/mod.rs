//! The local server: the web chat, its HTTP API, and the worker, in one process.

mod admin;
mod api;
mod assets;
pub(crate) mod errors;
mod link;
mod webhooks;

pub use webhooks::Channels;
mod usage;

use crate::auth;
use crate::hub::Hub;
use crate::notes::Notes;
use crate::worker::Worker;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware;
use axum::routing::{any, get, post};
use axum::serve::ListenerExt;
use engine::Engine;
use queue::JobQueue;
use std::future::Future;
use std::sync::Arc;
use store::Store;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Largest request body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// The single user of the local web chat.
pub const LOCAL_USER: &str = "local";

/// Everything the server and its worker share.
#[derive(Clone)]
pub struct App {
    pub store: Arc<dyn Store>,
    pub queue: Arc<dyn JobQueue>,
    pub engine: Arc<Engine>,
    pub hub: Arc<Hub>,
    pub notes: Arc<Notes>,
    /// Messaging channels: webhooks in, channel jobs out.
    pub channels: Channels,
    pub max_message_chars: usize,
    pub max_concurrent_turns: usize,
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
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("engine", &self.engine)
            .field("max_message_chars", &self.max_message_chars)
            .finish_non_exhaustive()
    }
}

/// The HTTP routes.
pub fn router(app: App) -> Router {
    let api = Router::new()
        .route("/", get(assets::index))
        .route("/app.js", get(assets::script))
        .route("/app.css", get(assets::style))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/api/conversations",
            get(api::list_conversations).post(api::create_conversation),
        )
        .route(
            "/api/conversations/{id}/messages",
            get(api::history).post(api::post_message),
        )
        .route("/api/notes", get(api::list_notes))
        .route("/api/link-code", post(link::create_link_code))
        .route("/api/usage", get(usage::usage))
        .route("/admin/budget", get(admin::budget_page))
        .route("/api/session", get(auth::routes::session))
        .route("/auth/login", get(auth::routes::login))
        .route("/auth/callback", get(auth::routes::callback))
        .route("/auth/logout", post(auth::routes::logout))
        .route("/auth/signed-out", get(auth::routes::signed_out))
        .fallback(errors::not_found)
        .layer(middleware::from_fn_with_state(app.clone(), auth::gate))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES));
    // The webhook applies its own cap (and says 413 in its own words); let it see one byte more.
    let webhook_cap = app.channels.setup.max_webhook_body_bytes + 1;
    let webhooks = Router::new()
        .route("/webhooks/{channel}", any(webhooks::receive))
        .layer(DefaultBodyLimit::max(webhook_cap));
    api.merge(webhooks).with_state(app)
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
        max_concurrent: app.max_concurrent_turns,
    });
    tokio::spawn(worker.run(shutdown))
}

/// Serve until `shutdown` completes, running the worker beside the HTTP server; then drain
/// within [`App::shutdown_grace`]: stop accepting, let running turns finish, tell streams
/// whose queued message has not started that it will be answered after the restart (the job
/// stays in the durable queue), and wait for connections to close. Past the grace period it
/// returns anyway: a turn cut short there resumes from the stored transcript on the next start
/// (its claim and lease lapse), and a half-sent request was never accepted.
pub async fn run(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut stopping = stop_rx.clone();
    let worker_task = spawn_worker(&app, stop_rx);
    let (hub, grace) = (app.hub.clone(), app.shutdown_grace);
    // Streamed tokens are small writes: without TCP_NODELAY, Nagle plus delayed ACKs hold
    // each one back ~40 ms.
    let listener = listener.tap_io(|tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::warn!(%err, "could not set TCP_NODELAY");
        }
    });
    let serving = axum::serve(listener, router(app)).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut served = tokio::spawn(serving.into_future());
    tokio::select! {
        result = &mut served => {
            let _ = worker_task.await;
            return result.unwrap_or_else(|e| Err(std::io::Error::other(e)));
        }
        _ = async { let _ = stopping.wait_for(|stop| *stop).await; } => {}
    }
    let deadline = tokio::time::Instant::now() + grace;
    tracing::info!(
        ?grace,
        "stopping: no new connections; letting running turns finish"
    );
    if tokio::time::timeout_at(deadline, worker_task)
        .await
        .is_err()
    {
        tracing::warn!(
            "the grace period ended with turns still running; they resume on the next start"
        );
    }
    let waiting = hub.interrupt_all();
    if waiting > 0 {
        tracing::info!(
            waiting,
            "told waiting streams their messages are answered after the restart"
        );
    }
    match tokio::time::timeout_at(deadline, &mut served).await {
        Ok(result) => result.unwrap_or_else(|e| Err(std::io::Error::other(e))),
        Err(_) => {
            tracing::warn!("the grace period ended with connections still open; closing them");
            served.abort();
            Ok(())
        }
    }
}
