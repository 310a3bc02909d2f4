//! `bridle`, the operator's CLI, and the local server behind `bridle serve`: the same engine,
//! store and queue ports as on AWS, on an embedded SQLite file, with a web chat that streams.
//!
//! `main.rs` only parses the command line and the environment and calls [`start`]; everything
//! here takes its dependencies as arguments, so tests run the real server in-process.

pub mod admin_cli;
pub mod auth;
pub mod backends;
pub mod budget_report;
pub mod channel_setup;
pub mod config;
pub mod eval;
pub mod export;
pub mod guards;
pub mod hub;
pub mod notes;
pub mod planning;
pub mod serve_lock;
pub mod server;
pub mod smoke;
pub mod worker;

use backend::ChatModel;
use engine::{Engine, EngineOptions};
use queue::QueueSettings;
use queue_sqlite::SqliteQueue;
use std::path::PathBuf;
use std::sync::Arc;
use store_sqlite::SqliteStore;
use tools::Registry;

/// Where the server keeps its data.
#[derive(Clone)]
pub enum Db {
    File(PathBuf),
    /// Nothing survives the process (tests, benchmarks).
    Memory,
    /// The file at the path, already opened (a test's, whose syncs it makes fail).
    Opened(PathBuf, Arc<store_sqlite::Db>),
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => f.debug_tuple("File").field(path).finish(),
            Self::Memory => f.write_str("Memory"),
            Self::Opened(path, _) => f.debug_tuple("Opened").field(path).finish(),
        }
    }
}

/// Turns the local server runs at once unless `BRIDLE_MAX_CONCURRENT_TURNS` says (always one at
/// a time per conversation). A waiting turn costs little (its job stays queued, a running one
/// mostly waits on its model); more of them at once make each group commit and each wake-up of
/// the database's threads carry more work. Measured with the load benchmark on two cores, 64
/// conversations (README, Measure): 8 gave 1,410–1,470 turns/s at 0.88–0.91 ms of server CPU a
/// turn, 32 gave 1,775–1,830 at 0.72–0.75 ms.
pub const DEFAULT_MAX_CONCURRENT_TURNS: usize = 32;

/// What [`build_app`] needs.
#[derive(Clone)]
pub struct AppOptions {
    pub db: Db,
    pub model_id: String,
    pub max_message_chars: usize,
    pub max_concurrent_turns: usize,
    /// How long one attempt of a job may run before it is cut off and retried (or, on its
    /// last delivery, given up and its turn closed).
    pub job_budget: std::time::Duration,
    /// How long a stop may take (see [`server::run`]).
    pub shutdown_grace: std::time::Duration,
    /// What the server puts up with from clients.
    pub http: server::HttpLimits,
    pub engine: EngineOptions,
    pub queue: QueueSettings,
    /// Messaging channels (`/webhooks/*`); none by default.
    pub channels: channel_setup::ChannelSetup,
    /// Budgets and cheap guards in front of every model call.
    pub guards: guards::GuardOptions,
    /// `BRIDLE_ADMIN_TOKEN`: opens `/admin/budget` when no sign-in is configured; `None`
    /// keeps it hidden (404) there.
    pub admin_token: Option<String>,
    /// Sign-in with OpenID Connect (the provider discovered); `None`: one local user.
    pub sign_in: Option<SignInOptions>,
    /// Keep conversations, accounts and sessions in this store instead of the SQLite file
    /// (tests run the router on DynamoDB this way); the queue and the demo notes stay in SQLite.
    pub store: Option<OtherStore>,
    /// With `store`: the MCP access tokens' store (the same adapter). `None`: the SQLite file.
    pub tokens: Option<Arc<dyn store::Tokens>>,
    /// Requests per minute each user may make through MCP.
    pub mcp_rate: mcp::RateLimit,
    /// Changes per minute each signed-in user may make through the web app.
    pub web_write_rate: budget::RequestRate,
    /// Reads per minute each signed-in user may make through the web app.
    pub web_read_rate: budget::RequestRate,
    /// Sign-ins that may come back from the identity provider to one client address a minute.
    pub sign_in_rate: budget::RequestRate,
    /// `BRIDLE_TRUSTED_PROXIES`: reverse proxies in front of the server, whose
    /// `X-Forwarded-For` names the client (`auth::from_address`).
    pub trusted_proxies: Vec<std::net::IpAddr>,
    /// Reply streams one user may hold open at once (see `server::streams`).
    pub streams_per_user: usize,
    /// Count each user's reply streams in the store as well, each held at most this long: for
    /// processes that serve one request at a time (the web Lambda; `server::streams`).
    pub shared_streams: Option<std::time::Duration>,
}

impl std::fmt::Debug for AppOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppOptions")
            .field("db", &self.db)
            .field("model_id", &self.model_id)
            .field("engine", &self.engine)
            .field("channels", &self.channels)
            .field("sign_in", &self.sign_in)
            .field("mcp_rate", &self.mcp_rate)
            .field("web_write_rate", &self.web_write_rate)
            .field("web_read_rate", &self.web_read_rate)
            .field("sign_in_rate", &self.sign_in_rate)
            .field("streams_per_user", &self.streams_per_user)
            .field("shared_streams", &self.shared_streams)
            .finish_non_exhaustive()
    }
}

/// A store other than the SQLite file (see [`AppOptions::store`]).
#[derive(Clone)]
pub struct OtherStore(pub Arc<dyn store::Store>);

impl std::fmt::Debug for OtherStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OtherStore")
    }
}

/// Sign-in settings for [`build_app`]: the discovered provider and the session rules.
#[derive(Debug, Clone)]
pub struct SignInOptions {
    pub oidc: Arc<auth::Oidc>,
    /// `BRIDLE_PUBLIC_URL`, without a trailing slash.
    pub public_url: String,
    pub signup: auth::Signup,
    pub session_ttl: std::time::Duration,
}

/// [`AppOptions::job_budget`] unless set: ten minutes.
pub const DEFAULT_JOB_BUDGET: std::time::Duration = std::time::Duration::from_secs(10 * 60);

impl Default for AppOptions {
    fn default() -> Self {
        Self {
            db: Db::Memory,
            model_id: String::new(),
            max_message_chars: 8_000,
            max_concurrent_turns: DEFAULT_MAX_CONCURRENT_TURNS,
            job_budget: DEFAULT_JOB_BUDGET,
            shutdown_grace: std::time::Duration::from_secs(25),
            http: server::HttpLimits::default(),
            engine: EngineOptions::default(),
            queue: QueueSettings::default(),
            channels: channel_setup::ChannelSetup::default(),
            guards: guards::GuardOptions::default(),
            admin_token: None,
            sign_in: None,
            store: None,
            tokens: None,
            mcp_rate: mcp::RateLimit::default(),
            web_write_rate: server::web_rates::WRITES.default_rate(),
            web_read_rate: server::web_rates::READS.default_rate(),
            sign_in_rate: server::web_rates::SIGN_INS.default_rate(),
            trusted_proxies: Vec::new(),
            streams_per_user: server::streams::DEFAULT_PER_USER,
            shared_streams: None,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("cannot open the database")]
    Store(#[from] store::StoreError),
    #[error("cannot open the job queue")]
    Queue(#[from] queue::QueueError),
    #[error("cannot open the notes table")]
    Notes(#[from] rusqlite::Error),
    #[error("a tool definition is invalid")]
    Tools(#[from] tools::RegistryError),
    #[error(transparent)]
    Backend(#[from] backends::BackendSetupError),
}

/// Open storage, register the tools and build the engine: everything `serve` runs on.
pub fn build_app(
    model: Arc<dyn ChatModel>,
    options: AppOptions,
) -> Result<server::App, StartError> {
    // One database for the store, the queue and the notes: one writer thread commits all
    // their writes, in groups (see `sqlite-db`), so none of them waits on another's lock.
    let db = match &options.db {
        Db::File(path) => store_sqlite::Db::open(path).map(Arc::new),
        Db::Memory => store_sqlite::Db::open_in_memory().map(Arc::new),
        Db::Opened(_, db) => Ok(db.clone()),
    }
    .map_err(|e| store::StoreError::Unavailable(Box::new(e)))?;
    let store = SqliteStore::on(db.clone())?;
    let queue = SqliteQueue::on(db.clone(), options.queue)?;
    let notes = notes::Notes::on(db.clone())?;
    let notes = Arc::new(notes);
    let sqlite: Arc<SqliteStore> = Arc::new(store);
    if options.store.is_none() {
        // Crash story: jobs in flight when the previous process died (kill -9, power loss) are
        // visible again in the queue; their claims died with that process too, so the restart
        // resumes their turns at once instead of finding "another worker" until they expire.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        sqlite.release_claims_of_dead_process(queue.recovered(), now)?;
    }
    if options.sign_in.is_none() {
        planning::ensure_local_account(sqlite.as_ref())?;
    }
    let sqlite_tokens: Arc<dyn store::Tokens> = sqlite.clone();
    let store: Arc<dyn store::Store> = match &options.store {
        Some(other) => other.0.clone(),
        None => sqlite,
    };
    let mut registry = Registry::default();
    notes::register(&mut registry, notes.clone())?;
    // One engine for the web chat and the messaging channels, assembled where the worker
    // Lambda's is (DESIGN.md invariant 11).
    let assembled = assembly::assemble(assembly::Parts {
        model,
        store: store.clone(),
        registry,
        risk: Some(notes::risk_policy(notes.clone())),
        engine: EngineOptions {
            model_id: options.model_id.clone(),
            ..options.engine.clone()
        },
        guards: options.guards.clone(),
    })?;
    let mcp_tokens = options.tokens.clone().unwrap_or(sqlite_tokens);
    let mcp = mcp_for(&assembled, &store, mcp_tokens.clone(), &options);
    let queue = Arc::new(queue);
    let channels = channel_jobs_for(&assembled.engine, &store, &queue, &options);
    let sign_in = options.sign_in.clone().map(|o| {
        Arc::new(auth::SignIn {
            oidc: o.oidc,
            store: store.clone(),
            public_url: o.public_url,
            signup: o.signup,
            session_ttl: o.session_ttl,
            clock: options.guards.clock.clone(),
            rate: options.sign_in_rate,
            trusted_proxies: options.trusted_proxies.clone(),
        })
    });
    let streams = match options.shared_streams {
        None => server::streams::OpenStreams::with_cap(options.streams_per_user),
        Some(hold) => server::streams::OpenStreams::shared(
            options.streams_per_user,
            server::streams::Shared {
                leases: store.clone(),
                hold,
                clock: options.guards.clock.clone(),
            },
        ),
    };
    Ok(server::App {
        store,
        db,
        queue,
        engine: assembled.engine,
        channels,
        hub: Arc::default(),
        owners: Arc::default(),
        notes,
        planner: assembled.planner.clone(),
        max_message_chars: options.max_message_chars,
        max_concurrent_turns: options.max_concurrent_turns,
        job_budget: options.job_budget,
        shutdown_grace: options.shutdown_grace,
        http: options.http,
        trusted_proxies: options.trusted_proxies.clone(),
        max_receives: options.queue.max_receives,
        budget: options.guards.budget.clone(),
        clock: options.guards.clock.clone(),
        admin_token: options.admin_token.clone(),
        sign_in,
        mcp,
        tokens: mcp_tokens,
        write_rate: options.web_write_rate,
        read_rate: options.web_read_rate,
        streams: Arc::new(streams),
    })
}

/// `/mcp`: the engine's registry and confirmation policy, served to external AI clients with
/// the owners' access tokens; request counts in the store's budget ledger.
fn mcp_for(
    assembled: &assembly::Assembled,
    store: &Arc<dyn store::Store>,
    tokens: Arc<dyn store::Tokens>,
    options: &AppOptions,
) -> axum::Router {
    let ledger: Arc<dyn store::BudgetLedger> = store.clone();
    mcp::router(mcp::handler::McpParts {
        registry: assembled.registry.clone(),
        policy: assembled.policy.clone(),
        tokens,
        accounts: store.clone(),
        ledger,
        pending: store.clone(),
        leases: store.clone(),
        clock: options.guards.clock.clone(),
        options: mcp::McpOptions {
            rate: options.mcp_rate,
            loopback_only: options.sign_in.is_none(),
            may_be_risky: planner::MAY_NEED_CONFIRMATION
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            public_url: options.sign_in.as_ref().map(|s| s.public_url.clone()),
        },
    })
}

/// The job path of the app: the webhook handler on the local queue, and the jobs (web chat and
/// messaging channels) on the one engine; the web chat's sender is the browser stream.
fn channel_jobs_for(
    engine: &Arc<Engine>,
    store: &Arc<dyn store::Store>,
    queue: &Arc<SqliteQueue>,
    options: &AppOptions,
) -> server::Channels {
    let setup = options.channels.clone();
    let mut senders = setup.senders.clone();
    senders.insert(
        channel_jobs::web::WEB_CHANNEL.to_owned(),
        Arc::new(channel_jobs::web::BrowserStream),
    );
    let jobs = channel_jobs::ChannelJobs {
        engine: engine.clone(),
        store: store.clone(),
        senders,
        options: channel_jobs::JobOptions {
            signup_url: setup
                .public_base_url
                .clone()
                .unwrap_or_else(|| "http://127.0.0.1:8080/".to_owned()),
            media: Some(media_for(options)),
            lobby_retention: setup.lobby_retention,
            // Reads here are hand-offs to the local database's threads, not paid calls.
            context_beside_claim: options.store.is_none(),
            // A local disk can fill for a while: settling an attempt waits it out a little.
            settle_retry_for: channel_jobs::settle::LOCAL_RETRY_FOR,
            confirm_code_key: setup.confirm_code_key.clone(),
            ..channel_jobs::JobOptions::default()
        },
    };
    let webhook = webhook::Webhook::new(
        setup.inbound.clone(),
        queue.clone(),
        setup.max_webhook_body_bytes,
    );
    server::Channels {
        webhook: Arc::new(webhook),
        jobs: Arc::new(jobs),
        setup: Arc::new(setup),
    }
}

/// Channel attachments: fetched with the channels' credentials, kept in the configured store or
/// a folder beside the database file (`bridle.db` → `bridle-media/`; in memory for an in-memory
/// database).
fn media_for(options: &AppOptions) -> channel_jobs::attachments::Attachments {
    let store = options
        .channels
        .media_store
        .clone()
        .unwrap_or_else(|| match &options.db {
            Db::File(path) | Db::Opened(path, _) => {
                Arc::new(channels::media::LocalFiles::beside(path))
            }
            Db::Memory => Arc::new(channels::media::InMemory::default()),
        });
    channel_jobs::attachments::Attachments {
        fetcher: options.channels.media.clone(),
        store,
    }
}

/// A temporary file holding `text`, named `<prefix>…<suffix>`, removed when dropped (pass or
/// fail): the scripts, prompts and price files the unit tests hand to the configuration.
#[cfg(test)]
pub(crate) fn temp_file_with(prefix: &str, suffix: &str, text: &str) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new()
        .prefix(prefix)
        .suffix(suffix)
        .tempfile()
        .unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}
