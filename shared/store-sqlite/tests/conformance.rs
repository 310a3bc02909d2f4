//! The store conformance suite, on an in-memory database and on a file.

use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use store_sqlite::SqliteStore;

store::conformance_tests!(SqliteStore::open_in_memory().unwrap());

mod file {
    store::conformance_tests!(super::TempStore::new());
}

/// A file-backed store in the temp dir; the file and its WAL companions go when it drops.
#[derive(Debug)]
struct TempStore {
    store: Option<SqliteStore>,
    path: PathBuf,
}

impl TempStore {
    fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "bridle-store-conformance-{}-{}.sqlite",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let store = Some(SqliteStore::open(&path).unwrap());
        Self { store, path }
    }
}

impl Deref for TempStore {
    type Target = SqliteStore;
    fn deref(&self) -> &SqliteStore {
        self.store.as_ref().unwrap()
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        drop(self.store.take());
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}
