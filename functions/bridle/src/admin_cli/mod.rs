//! The operator's commands on accounts and linked messaging accounts: `bridle users …` and
//! `bridle identities …`, on the local SQLite file or the deployed DynamoDB table alike.
//!
//! `main.rs` parses ([`args`]), picks and opens the store ([`StoreSource`], [`open_store`]),
//! reads the channel settings, and calls [`run_users`] / [`run_identities`] with the store as
//! `Arc<dyn Store>` and a writer; nothing here reads the environment, so tests call these
//! directly. Failures are [`CliError`]s: one sentence for stderr and an exit code
//! ([`CliError::exit_code`]).

pub mod args;
pub(crate) mod grant;
mod identities;
pub mod jobs;
mod render;
pub mod tokens;
mod upgrade_guard;
pub use upgrade_guard::{Opens, upgrade_guard};
mod users;

pub use args::{IdentitiesArgs, IdentitiesCommand, StoreArgs, UsersArgs, UsersCommand};
pub use identities::run_identities;
pub use users::{IssuedLinkCode, issue_link_code, run_users};

use crate::channel_setup::ChannelSetup;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use store::{Account, Email, Store, StoreError};

/// Exit code: done.
pub const EXIT_OK: u8 = 0;
/// Exit code: not found, or bad input.
pub const EXIT_BAD_INPUT: u8 = 1;
/// Exit code: the command line is wrong (clap's own code).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the store could not be opened, or failed.
pub const EXIT_STORE: u8 = 3;

/// Why a command did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad input or nothing to act on; the text is one sentence for the operator.
    #[error("{0}")]
    Refused(String),
    /// The store failed; the text says what was being done.
    #[error("{what}: {source}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
    /// Writing the output failed (a closed pipe).
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Refused(_) => EXIT_BAD_INPUT,
            CliError::Store { .. } | CliError::Output(_) => EXIT_STORE,
        }
    }

    pub(crate) fn refused(text: impl Into<String>) -> Self {
        CliError::Refused(text.into())
    }

    pub(crate) fn store(what: impl Into<String>) -> impl FnOnce(StoreError) -> Self {
        let what = what.into();
        move |source| CliError::Store { what, source }
    }

    /// As [`CliError::store`], for a failure of another of Bridle's stores (the job queue, its
    /// dead letters on SQS): the store's exit code, not bad input's, so a script can tell "no
    /// such job" from "the queue could not be reached".
    pub(crate) fn unavailable<E>(what: impl Into<String>) -> impl FnOnce(E) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let what = what.into();
        move |source| CliError::Store {
            what,
            source: StoreError::Unavailable(Box::new(source)),
        }
    }
}

/// Table or JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Json,
}

/// What the commands work with.
#[derive(Clone)]
pub struct Deps {
    pub store: Arc<dyn Store>,
    /// The same store's MCP access tokens (closing an account revokes them).
    pub tokens: Arc<dyn store::Tokens>,
    pub format: Format,
    /// Which messaging apps are on, and their open-chat links (for `users link-code`).
    pub channels: ChannelSetup,
    pub clock: budget::Clock,
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps")
            .field("format", &self.format)
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}

/// Where the accounts are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSource {
    Sqlite(PathBuf),
    DynamoDb { table: String },
}

impl StoreSource {
    /// The flags first, then `TABLE_NAME`, then `BRIDLE_DB`, then `./bridle.db` (as `--help`
    /// says). Blank variables count as unset.
    pub fn choose(args: &StoreArgs, var: &dyn Fn(&str) -> Option<String>) -> Self {
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        if let Some(path) = &args.db {
            return StoreSource::Sqlite(path.clone());
        }
        if let Some(table) = args.dynamodb_table.clone().or_else(|| var("TABLE_NAME")) {
            return StoreSource::DynamoDb { table };
        }
        StoreSource::Sqlite(PathBuf::from(
            var("BRIDLE_DB").unwrap_or_else(|| "./bridle.db".into()),
        ))
    }
}

/// Open the store. A missing SQLite file is created only when `create` is set (adding a user
/// before the first `bridle serve`); otherwise it is a [`CliError::Refused`]. DynamoDB calls get
/// deadlines (connect 2 s, attempt 5 s, operation 15 s).
pub async fn open_store(source: &StoreSource, create: bool) -> Result<Arc<dyn Store>, CliError> {
    Ok(open_store_with_tokens(source, create).await?.0)
}

/// [`open_store`], with the same store's MCP access tokens.
pub async fn open_store_with_tokens(
    source: &StoreSource,
    create: bool,
) -> Result<(Arc<dyn Store>, Arc<dyn store::Tokens>), CliError> {
    Ok(match source {
        StoreSource::Sqlite(path) => {
            if !create && !path.exists() {
                return Err(CliError::refused(format!(
                    "There is no Bridle database at {}: pass --db FILE, set BRIDLE_DB, or add a user first.",
                    path.display()
                )));
            }
            // Not upgraded under a running server of an older build.
            let _upgrading = upgrade_guard(path, Opens::Store)?;
            let store = Arc::new(store_sqlite::SqliteStore::open(path).map_err(
                CliError::store(format!("cannot open the database {}", path.display())),
            )?);
            (store.clone(), store)
        }
        StoreSource::DynamoDb { table } => {
            let store = Arc::new(store_dynamodb::DynamoStore::new(
                dynamodb_client().await,
                table.clone(),
            ));
            (store.clone(), store)
        }
    })
}

/// A DynamoDB client from the standard AWS environment, with deadlines on every call.
pub async fn dynamodb_client() -> aws_sdk_dynamodb::Client {
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(Duration::from_secs(2))
        .operation_attempt_timeout(Duration::from_secs(5))
        .operation_timeout(Duration::from_secs(15))
        .build();
    let conf = aws_sdk_dynamodb::config::Builder::from(&aws)
        .timeout_config(timeouts)
        .build();
    aws_sdk_dynamodb::Client::from_conf(conf)
}

/// The account an operator named: an e-mail address when the text has an `@`, else an id.
pub(crate) async fn find_account(store: &dyn Store, who: &str) -> Result<Account, CliError> {
    let found = if who.contains('@') {
        let email = Email::parse(who).map_err(|e| CliError::refused(format!("{e}.")))?;
        store
            .account_by_email(&email)
            .await
            .map_err(CliError::store("cannot read the accounts"))?
    } else {
        store
            .account(&who.into())
            .await
            .map_err(CliError::store("cannot read the accounts"))?
    };
    found.ok_or_else(|| {
        CliError::refused(if who.contains('@') {
            format!("No account has the e-mail address {}.", who.trim())
        } else {
            format!("No account has the id {who:?}.")
        })
    })
}
