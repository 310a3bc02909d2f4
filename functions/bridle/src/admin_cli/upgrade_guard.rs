//! An operator's command never upgrades the database under a running `bridle serve` of an older
//! build. The commands run beside the server and open the file as the server does, which brings
//! its tables up to this build's schema; a server of an older build, started before, checked the
//! schema only at its start and would fail its next writes on the changed tables (a table
//! dropped and made again with other columns) until a restart. So a command whose build would
//! upgrade the file asks for the server's lock first: held, it is refused with what to do; free,
//! it holds the lock while it opens (and upgrades) the file, so no server starts meanwhile.

use super::CliError;
use crate::serve_lock::{self, ServeLock, ServeLockError};
use rusqlite::{Connection, OpenFlags};
use std::path::Path;

/// `Some(lock)` to hold while the file at `path` is opened, when this build would upgrade it
/// and no server runs on it; `None` when nothing would be upgraded (or the file is not there
/// yet); refused when a server runs on a file this build would upgrade.
pub fn upgrade_guard(path: &Path) -> Result<Option<ServeLock>, CliError> {
    let Some(behind) = behind(path) else {
        return Ok(None);
    };
    match serve_lock::take(path) {
        Ok(lock) => Ok(Some(lock)),
        Err(ServeLockError::Held { .. }) => Err(CliError::refused(format!(
            "The database at {} is at {behind}, older than this build's, and a bridle serve \
             of an older build runs on it: upgrading it now would break that server. Restart \
             bridle serve with this build first (it upgrades the file), then run this command.",
            path.display()
        ))),
        // No lock file can be made (a read-only directory): nothing could be kept out anyway.
        Err(ServeLockError::Io { .. }) => Ok(None),
    }
}

/// What of the file at `path` this build would upgrade (its store's or its queue's tables),
/// as words; `None` when nothing, or when the file cannot be read (opening it says why).
fn behind(path: &Path) -> Option<String> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).ok()?;
    let store: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .ok()?;
    let queue: u32 = conn
        .query_row(
            "SELECT version FROM queue_schema_version WHERE id = 0",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    let (store_known, queue_known) = (store_sqlite::SCHEMA_VERSION, queue_sqlite::SCHEMA_VERSION);
    match (store < store_known, queue < queue_known) {
        (false, false) => None,
        (true, _) => Some(format!("store schema {store} (this build: {store_known})")),
        (false, true) => Some(format!("queue schema {queue} (this build: {queue_known})")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file this build would upgrade is refused while a server holds its lock, and opened
    /// under the lock when none does; an up-to-date one needs no lock at all.
    #[test]
    fn a_file_this_build_would_upgrade_is_not_upgraded_under_a_running_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bridle.db");
        // The store's tables as this build makes them; the queue's not yet (an older build's
        // file, as far as this build can tell).
        drop(store_sqlite::SqliteStore::open(&path).unwrap());
        let server = serve_lock::take(&path).unwrap();
        let refused = upgrade_guard(&path).unwrap_err().to_string();
        assert!(
            refused.contains("queue schema 0") && refused.contains("Restart bridle serve"),
            "{refused}"
        );
        drop(server);
        let held = upgrade_guard(&path).unwrap();
        assert!(
            held.is_some(),
            "the command holds the lock while it upgrades"
        );
        assert!(
            serve_lock::take(&path).is_err(),
            "no server starts meanwhile"
        );
        drop(
            queue_sqlite::SqliteQueue::open_beside(&path, queue::QueueSettings::default()).unwrap(),
        );
        drop(held);

        // Up to date, nothing is held, and a running server is no reason to refuse.
        let server = serve_lock::take(&path).unwrap();
        assert!(upgrade_guard(&path).unwrap().is_none());
        drop(server);
    }
}
