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

/// Which of the file's schemas a command opens, and so would upgrade.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opens {
    /// The store's tables (`users`, `identities`, `tokens`, `export`, `budget`).
    Store,
    /// The queue's tables (`jobs`).
    Queue,
}

/// `Some(lock)` to hold while the file at `path` is opened, when this build would upgrade what
/// the command `opens` and no server runs on it; `None` when nothing would be upgraded (or the
/// file is not there yet); refused when a server runs on a file this build would upgrade.
pub fn upgrade_guard(path: &Path, opens: Opens) -> Result<Option<ServeLock>, CliError> {
    let Some(behind) = behind(path, opens) else {
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

/// What of the file at `path` this build would upgrade of what a command `opens`, as words;
/// `None` when nothing, or when the file is not there (opening it makes it). A file that
/// cannot be read is taken as behind: the lock is asked for.
fn behind(path: &Path, opens: Opens) -> Option<String> {
    if !path.exists() {
        return None;
    }
    let read = || -> rusqlite::Result<u32> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        conn.busy_timeout(std::time::Duration::from_secs(2))?;
        match opens {
            Opens::Store => conn.pragma_query_value(None, "user_version", |r| r.get(0)),
            Opens::Queue => conn
                .query_row(
                    "SELECT version FROM queue_schema_version WHERE id = 0",
                    [],
                    |r| r.get(0),
                )
                .or_else(|e| match e {
                    // No queue tables yet: this build makes them.
                    rusqlite::Error::SqliteFailure(..) | rusqlite::Error::QueryReturnedNoRows => {
                        Ok(0)
                    }
                    other => Err(other),
                }),
        }
    };
    let (name, known) = match opens {
        Opens::Store => ("store", store_sqlite::SCHEMA_VERSION),
        Opens::Queue => ("queue", queue_sqlite::SCHEMA_VERSION),
    };
    match read() {
        Ok(found) if found >= known => None,
        Ok(found) => Some(format!("{name} schema {found} (this build: {known})")),
        Err(e) => Some(format!("a {name} schema that could not be read ({e})")),
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
        assert!(
            upgrade_guard(&path, Opens::Store).unwrap().is_none(),
            "the store is current"
        );
        let refused = upgrade_guard(&path, Opens::Queue).unwrap_err().to_string();
        assert!(
            refused.contains("queue schema 0") && refused.contains("Restart bridle serve"),
            "{refused}"
        );
        drop(server);
        let held = upgrade_guard(&path, Opens::Queue).unwrap();
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
        assert!(upgrade_guard(&path, Opens::Queue).unwrap().is_none());
        assert!(upgrade_guard(&path, Opens::Store).unwrap().is_none());
        drop(server);
    }
}
