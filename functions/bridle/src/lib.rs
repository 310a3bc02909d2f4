//! `bridle`, the operator's CLI, and the local server behind `bridle serve`: the same engine,
//! store and queue ports as on AWS, on an embedded SQLite file, with a web chat that streams.
//!
//! `main.rs` only parses the command line and the environment and calls [`start`]; everything
//! here takes its dependencies as arguments, so tests run the real server in-process.

pub mod backends;
pub mod budget_report;
pub mod config;
pub mod guards;
pub mod hub;
pub mod notes;
pub mod server;
pub mod worker;

use backend::ChatModel;
use engine::{Engine, EngineOptions};
use queue::QueueSettings;
use queue_sqlite::SqliteQueue;
use std::path::PathBuf;
use std::sync::Arc;
use store_sqlite::SqliteStore;
use tools::Registry;

/// The frozen system prompt of the local web chat.
pub const SYSTEM_PROMPT: &str = "You are Bridle, a helpful assistant in a web chat. \
Answer briefly and plainly. You can keep notes for the user with the add_note, list_notes and \
delete_note tools; use them when the user asks you to remember, recall or forget something. \
When a tool returns an error, read it and either fix your call or tell the user what happened.";

/// Where the server keeps its data.
#[derive(Debug, Clone)]
pub enum Db {
    File(PathBuf),
    /// Nothing survives the process (tests, benchmarks).
    Memory,
}

/// What [`build_app`] needs.
#[derive(Debug, Clone)]
pub struct AppOptions {
    pub db: Db,
    pub model_id: String,
    pub max_message_chars: usize,
    pub max_concurrent_turns: usize,
    pub engine: EngineOptions,
    pub queue: QueueSettings,
    /// Budgets and cheap guards in front of every model call.
    pub guards: guards::GuardOptions,
    /// `BRIDLE_ADMIN_TOKEN`: opens `/admin/budget`; `None` keeps it hidden (404).
    pub admin_token: Option<String>,
}

impl Default for AppOptions {
    fn default() -> Self {
        Self {
            db: Db::Memory,
            model_id: String::new(),
            max_message_chars: 8_000,
            max_concurrent_turns: 8,
            engine: EngineOptions::default(),
            queue: QueueSettings::default(),
            guards: guards::GuardOptions::default(),
            admin_token: None,
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
    let (store, queue, notes) = match &options.db {
        Db::File(path) => (
            SqliteStore::open(path)?,
            SqliteQueue::open(path, options.queue)?,
            notes::Notes::open(path)?,
        ),
        Db::Memory => (
            SqliteStore::open_in_memory()?,
            SqliteQueue::open_in_memory(options.queue)?,
            notes::Notes::open_in_memory()?,
        ),
    };
    let notes = Arc::new(notes);
    let mut registry = Registry::default();
    notes::register(&mut registry, notes.clone())?;
    let store: Arc<SqliteStore> = Arc::new(store);
    let engine = Engine::new(
        model,
        Arc::new(registry),
        store.clone(),
        EngineOptions {
            model_id: options.model_id.clone(),
            system_prompt: if options.engine.system_prompt.is_empty() {
                SYSTEM_PROMPT.to_owned()
            } else {
                options.engine.system_prompt.clone()
            },
            ..options.engine.clone()
        },
    )
    .with_guard(Arc::new(budget::Guards::standard(budget::StandardGuards {
        ledger: store.clone(),
        config: options.guards.budget.clone(),
        accounts: options.guards.accounts.clone(),
        clock: options.guards.clock.clone(),
        no_model: options.guards.no_model.clone(),
    })));
    Ok(server::App {
        store,
        queue: Arc::new(queue),
        engine: Arc::new(engine),
        hub: Arc::default(),
        notes,
        max_message_chars: options.max_message_chars,
        max_concurrent_turns: options.max_concurrent_turns,
        budget: options.guards.budget.clone(),
        clock: options.guards.clock.clone(),
        admin_token: options.admin_token.clone(),
    })
}
