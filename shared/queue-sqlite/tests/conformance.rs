//! The queue conformance suite, on an in-memory database and on a file.

use queue::QueueSettings;
use queue_sqlite::SqliteQueue;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

queue::queue_conformance_tests!(|settings| SqliteQueue::open_in_memory(settings).unwrap());

mod file {
    queue::queue_conformance_tests!(|settings| super::TempQueue::new(settings));
}

/// A file-backed queue in the temp dir; the file and its WAL companions go when it drops.
#[derive(Debug)]
struct TempQueue {
    queue: Option<SqliteQueue>,
    path: PathBuf,
}

impl TempQueue {
    fn new(settings: QueueSettings) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "bridle-queue-conformance-{}-{}.sqlite",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let queue = Some(SqliteQueue::open(&path, settings).unwrap());
        Self { queue, path }
    }
}

impl Deref for TempQueue {
    type Target = SqliteQueue;
    fn deref(&self) -> &SqliteQueue {
        self.queue.as_ref().unwrap()
    }
}

impl Drop for TempQueue {
    fn drop(&mut self) {
        drop(self.queue.take());
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}
