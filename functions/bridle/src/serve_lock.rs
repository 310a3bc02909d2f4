//! One `bridle serve` per database. Two would each take the other's jobs in flight for a dead
//! process's (a start makes them visible again and releases their claims), run them twice at
//! once and send their replies twice. The server holds an exclusive lock on a file beside the
//! database for as long as it runs; the operating system lets go of it when the process ends,
//! however it ends (`kill -9` included), so a restart never finds a stale lock. The operator's
//! commands (`bridle users`, `bridle jobs`…) run beside the server and take no lock, unless
//! their build would upgrade the file ([`crate::admin_cli::upgrade_guard`]).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// The lock, held until dropped.
#[derive(Debug)]
pub struct ServeLock {
    _file: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ServeLockError {
    #[error(
        "another bridle serve is running on {db} (it holds {lock}); stop it first, or give this one another BRIDLE_DB",
        db = db.display(),
        lock = lock.display()
    )]
    Held { db: PathBuf, lock: PathBuf },
    #[error("cannot open the lock file {}", lock.display())]
    Io {
        lock: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The lock file of the database at `db`: its name with `.lock` after it.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Take the lock of the database at `db`, at once or not at all.
pub fn take(db: &Path) -> Result<ServeLock, ServeLockError> {
    let lock = lock_path(db);
    let io = |source| ServeLockError::Io {
        lock: lock.clone(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(ServeLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(ServeLockError::Held {
            db: db.to_owned(),
            lock,
        }),
        Err(TryLockError::Error(e)) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_holder_at_a_time_and_free_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("bridle.db");
        let first = take(&db).unwrap();
        let second = take(&db).unwrap_err();
        assert!(matches!(second, ServeLockError::Held { .. }), "{second:?}");
        assert!(
            second
                .to_string()
                .contains("another bridle serve is running")
        );
        drop(first);
        take(&db).expect("free again once its holder is gone");
    }
}
