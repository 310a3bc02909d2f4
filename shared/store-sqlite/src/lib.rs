//! The embedded storage adapter: Bridle's store ports on one SQLite file, for the local server
//! and for tests.
//!
//! Each table keeps the transcript exactly: message and visible-entry bodies are the serde JSON of
//! the whole value, so a read gives back what was written, byte for byte. Append-only is the
//! primary key's job: a second write at `(conversation, position)` fails inside SQLite and
//! becomes [`StoreError::Conflict`], with no read-then-write race. The schema is versioned with
//! `PRAGMA user_version` (see `schema.rs`).
//!
//! One connection sits behind a `std::sync::Mutex`, and every operation runs synchronously
//! under it. This is deliberate: the statements are sub-millisecond, so handing them to a
//! blocking pool would cost more than it saves, and the lock is never held across an `.await`.
//!
//! Depends on the `store` ports, `transcript` and `rusqlite` only. Never on AWS, a backend or
//! the engine.

mod accounts;
mod budget;
mod claims;
mod confirmations;
mod conversations;
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
mod visible;

use rusqlite::Connection;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use store::StoreError;

pub use schema::{SCHEMA_VERSION, SchemaTooNew};
pub use tool_results::{put_receipt, receipts_here};

/// The store ports on SQLite. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Mutex<Connection>,
}

impl SqliteStore {
    /// Open (or create) the database file at `path` and bring its schema up to date.
    ///
    /// A file written by a newer build fails with [`StoreError::Unavailable`] wrapping
    /// [`SchemaTooNew`]; it is left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let conn = Connection::open(path).map_err(error::unavailable)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(error::unavailable)?;
        // WAL lets readers in other processes (an inspecting CLI) run beside the server.
        conn.pragma_update_and_check(None, "journal_mode", "wal", |_| Ok(()))
            .map_err(error::unavailable)?;
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
        Self::init(conn)
    }

    /// A private, empty database in memory, gone when the store is dropped.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::init(Connection::open_in_memory().map_err(error::unavailable)?)
    }

    fn init(mut conn: Connection) -> Result<Self, StoreError> {
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(error::unavailable)?;
        schema::migrate(&mut conn, schema::MIGRATIONS)?;
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    /// The connection, for one synchronous operation. A panic in an earlier operation does not
    /// wedge the store: its transaction rolled back when it unwound, so the connection is sound.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
