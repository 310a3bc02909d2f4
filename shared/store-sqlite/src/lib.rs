//! The embedded storage adapter: Bridle's store ports on one SQLite file, for the local server
//! and for tests.
//!
//! Each table keeps the transcript exactly: message and visible-entry bodies are the serde JSON of
//! the whole value, so a read gives back what was written, byte for byte. Append-only is the
//! primary key's job: a second write at `(conversation, position)` fails inside SQLite and
//! becomes [`StoreError::Conflict`], with no read-then-write race. The schema is versioned with
//! `PRAGMA user_version` (see `schema.rs`).
//!
//! No SQLite call runs on the async threads: writes go to one writer thread that commits every
//! write waiting at once (group commit: one fsync for many writers, each acknowledged only once
//! durable), reads to reader threads with their own connections (the `sqlite-db` crate; `db.rs`
//! says its failures as `StoreError`s). The queue and the server's demo notes share the same
//! [`Db`] ([`SqliteStore::on`]), so their writes join the same group commits.
//!
//! Depends on the `store` ports, `transcript`, `sqlite-db` and `rusqlite` only. Never on AWS, a
//! backend or the engine.

mod accounts;
mod action_sizes;
mod budget;
mod claims;
mod confirmations;
mod conversations;
mod db;
mod error;
mod identities;
mod leases;
mod messages;
mod records;
mod retention;
mod schema;
mod sessions;
mod tokens;
mod tool_results;
mod turn_writes;
mod visible;

use std::path::Path;
use std::sync::Arc;
use store::StoreError;

pub use schema::{SCHEMA_VERSION, SchemaTooNew};
pub use sqlite_db::{Calls as DbCalls, Db, Failure as DbFailure};
pub use tool_results::{put_receipt, receipts_here};

/// The store ports on SQLite. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct SqliteStore {
    db: db::Db,
}

impl SqliteStore {
    /// Open (or create) the database file at `path` and bring its schema up to date, on a
    /// [`Db`] of its own. A server that also keeps its queue in the file opens one [`Db`] and
    /// gives it to both ([`SqliteStore::on`]), so they share the writer.
    ///
    /// A file written by a newer build fails with [`StoreError::Unavailable`] wrapping
    /// [`SchemaTooNew`]; it is left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::on(Arc::new(Db::open(path).map_err(error::unavailable)?))
    }

    /// A private, empty database in memory, gone when the store is dropped.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::on(Arc::new(Db::open_in_memory().map_err(error::unavailable)?))
    }

    /// The store on `db`: checks the file for damage and brings the store's tables up to date
    /// (alone on the writer's connection, before any other write).
    pub fn on(db: Arc<Db>) -> Result<Self, StoreError> {
        db.exclusive(|conn| {
            // A damaged file is said at start, in one sentence, not as a query error mid-turn.
            let check: String = conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(|e| error::corrupt("the database file".into(), e))?;
            if check != "ok" {
                return Err(error::corrupt(
                    "the database file".into(),
                    format!("SQLite's quick_check found damage: {check}"),
                ));
            }
            schema::migrate(conn, schema::MIGRATIONS)
        })
        .map_err(|e| StoreError::Unavailable(Box::new(e)))??;
        Ok(Self { db: db::Db(db) })
    }

    /// The database this store is on, to share with a queue or a domain table.
    pub fn db(&self) -> &Arc<Db> {
        &self.db.0
    }
}
