//! The embedded queue adapter: the [`JobQueue`](queue::JobQueue) port on SQLite, for the local
//! server (`bridle serve`) and for tests.
//!
//! Jobs are rows ordered by one global sequence; a group's head is its lowest sequence. A
//! receive picks, in one transaction, the head of every group that is not in flight, oldest
//! first, stamps it with a fresh receipt and hides it for the visibility timeout. A head whose
//! timeout passed is delivered again, or, once it has been delivered `max_receives` times, moved
//! to the dead letters so the rest of its group can go on. Dedupe keys live in their own table
//! for the dedupe window, whether or not their job is still queued. The tables may share a file
//! with the store; they are prefixed `queue_` and versioned apart from it (see `schema.rs`).
//!
//! One process owns a queue file. On open, every job that was in flight is made visible at once:
//! the worker that held it died with the previous process, so waiting out its timeout would only
//! delay the conversation. Its receive count is kept, so a job that kills the process every time
//! still ends in the dead letters.
//!
//! No SQLite call runs on the async threads: every operation is a closure on a shared
//! [`sqlite_db::Db`] — writes on its writer thread with group commit (an enqueue is acknowledged
//! only once durable, sharing its fsync with whatever else was waiting), reads on its reader
//! threads. A server that keeps its store in the same file gives both the same `Db`
//! ([`SqliteQueue::on`]), so the queue never waits on the store for the file's write lock.
//! Long polls wait on a `tokio::sync::Notify` signalled by enqueue (at its commit, before its
//! sync: the turn runs while the enqueue is made durable), ack and release, and wake on their
//! own when a visibility timeout runs out. An enqueue that finds a long poll waiting and its
//! group otherwise empty hands the job out in its own transaction and gives it to that poll at
//! the commit (`handover.rs`), so the poll makes no write of its own.
//!
//! Depends on the `queue` port, `rusqlite`, `sqlite-db` and tokio's timers only. Never on AWS,
//! the store or the engine.

mod deliver;
mod error;
mod handover;
mod port;
mod schema;

use queue::{DeadLetter, QueueError, QueueSettings, TurnJob};
use rusqlite::Connection;
use sqlite_db::Db;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::Notify;

pub use error::CorruptRow;
pub use schema::{SCHEMA_VERSION, SchemaTooNew};

/// A receive's finding that it handed out every job that was ready: until work is signalled
/// again, the next receive has nothing to find, so it waits for the signal before it looks
/// (saving a write of the shared database after every hand-out).
#[derive(Debug, Clone, Copy)]
struct Dry {
    /// [`SqliteQueue::changes`] before that receive looked.
    at: u64,
    /// When the earliest job then in flight becomes visible again.
    next_visible_at_ms: Option<i64>,
}

/// The signal that work may have become ready.
#[derive(Debug, Default)]
struct Work {
    ready: Notify,
    /// How many times work was signalled: a receive compares it with [`Dry::at`].
    changes: AtomicU64,
}

impl Work {
    /// Count it, then wake the waiting receive.
    fn signal(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.ready.notify_waiters();
    }
}

/// The job queue on SQLite. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct SqliteQueue {
    db: Arc<Db>,
    settings: QueueSettings,
    /// Signalled when work may have become ready: a job enqueued (at its commit, from the
    /// writer's thread), released, put back, or acknowledged with more of its group waiting.
    work: Arc<Work>,
    /// What the last receive that handed jobs out left behind, when it took every job ready.
    dry: Mutex<Option<Dry>>,
    /// The receives waiting for work, which an enqueue may hand its job to (`handover.rs`).
    handover: Arc<handover::Handover>,
    /// The dedupe keys of the jobs that were in flight when the file was opened.
    recovered: Vec<String>,
}

impl SqliteQueue {
    /// Open (or create) the queue's tables in the database file at `path` on a [`Db`] of its
    /// own, bring them up to date, and make every job that was in flight visible again (see
    /// the crate docs).
    ///
    /// A `max_receives` of 0 is taken as 1. Tables written by a newer build fail with
    /// [`QueueError::Unavailable`] wrapping [`SchemaTooNew`]; they are left untouched.
    pub fn open(path: impl AsRef<Path>, settings: QueueSettings) -> Result<Self, QueueError> {
        let db = Db::open(path).map_err(error::unavailable)?;
        Self::on(Arc::new(db), settings)
    }

    /// The queue in the file at `path` as seen beside the process that runs it (the operator's
    /// `bridle jobs` while `bridle serve` runs): its tables brought up to date and nothing else.
    /// Its jobs in flight are left to their worker; [`SqliteQueue::open`] would make them
    /// visible again, as after a crash, and the running worker's acks would then be refused.
    pub fn open_beside(
        path: impl AsRef<Path>,
        settings: QueueSettings,
    ) -> Result<Self, QueueError> {
        let db = Arc::new(Db::open(path).map_err(error::unavailable)?);
        db.exclusive(|conn| schema::migrate(conn, schema::MIGRATIONS))
            .map_err(failed)??;
        Ok(Self::with(db, settings, Vec::new()))
    }

    /// A private, empty queue in memory, gone when it is dropped.
    pub fn open_in_memory(settings: QueueSettings) -> Result<Self, QueueError> {
        let db = Db::open_in_memory().map_err(error::unavailable)?;
        Self::on(Arc::new(db), settings)
    }

    /// The queue on `db` (shared with the store, or its own): its tables brought up to date and
    /// the jobs in flight made visible again, alone on the writer's connection.
    pub fn on(db: Arc<Db>, settings: QueueSettings) -> Result<Self, QueueError> {
        let recovered = db.exclusive(recover).map_err(failed)??;
        Ok(Self::with(db, settings, recovered))
    }

    fn with(db: Arc<Db>, mut settings: QueueSettings, recovered: Vec<String>) -> Self {
        settings.max_receives = settings.max_receives.max(1);
        Self {
            db,
            settings,
            work: Arc::default(),
            dry: Mutex::new(None),
            handover: Arc::default(),
            recovered,
        }
    }

    /// Work may have become ready: count it, then wake the waiting receive.
    fn signal(&self) {
        self.work.signal();
    }

    /// The dedupe keys of the jobs that were in flight when this file was opened: their worker
    /// died with the previous process, so their claims on the job (in the store) are dead too.
    pub fn recovered(&self) -> &[String] {
        &self.recovered
    }

    /// The settings in force.
    pub fn settings(&self) -> &QueueSettings {
        &self.settings
    }

    /// The jobs neither acknowledged nor dead, in flight or waiting.
    pub fn depth(&self) -> Result<usize, QueueError> {
        let n: i64 = self.read_blocking(|conn| {
            conn.query_row("SELECT COUNT(*) FROM queue_jobs", [], |row| row.get(0))
                .map_err(error::unavailable)
        })?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// The jobs that were delivered `max_receives` times without success, oldest job first;
    /// those this build cannot read are left out ([`SqliteQueue::unreadable_dead_letters`]).
    pub fn dead_letters(&self) -> Result<Vec<DeadLetter>, QueueError> {
        Ok(self.read_blocking(dead_letters)?.0)
    }

    /// The numbers of the dead letters whose bodies this build cannot read (written by another
    /// build, or edited by hand), oldest first: no worker of this build could run them.
    pub fn unreadable_dead_letters(&self) -> Result<Vec<i64>, QueueError> {
        Ok(self.read_blocking(dead_letters)?.1)
    }

    /// Put dead jobs back in the queue, ready now with a fresh receive count: the one numbered
    /// `seq`, or every one when `None` (but those this build cannot read, which stay). A
    /// retried job goes to the back of its conversation's queue (messages that came after it
    /// may have been answered meanwhile). Returns how many were put back.
    pub fn retry_dead(&self, seq: Option<i64>) -> Result<usize, QueueError> {
        let now = now_ms();
        let put_back = self.write_blocking(move |tx| {
            let dead: Vec<(i64, Vec<u8>)> = {
                let mut stmt = tx
                    .prepare_cached(
                        "SELECT seq, body FROM queue_dead_letters
                         WHERE ?1 IS NULL OR seq = ?1 ORDER BY seq",
                    )
                    .map_err(error::unavailable)?;
                let rows = stmt
                    .query_map([seq], |row| Ok((row.get(0)?, body_bytes(row.get_ref(1)?))))
                    .map_err(error::unavailable)?;
                rows.collect::<Result<_, _>>().map_err(error::unavailable)?
            };
            let mut put_back = 0;
            for (dead_seq, body) in &dead {
                let job = match decode_bytes(body, || format!("dead letter {dead_seq}")) {
                    Ok(job) => job,
                    // Asked for by its number: say why it stays.
                    Err(err) if seq.is_some() => return Err(err),
                    Err(_) => continue,
                };
                tx.prepare_cached(
                    "INSERT INTO queue_jobs
                        (group_key, dedupe_key, body, visible_at_ms, receipt, receive_count, enqueued_at_ms)
                     VALUES (?1, ?2, ?3, ?4, NULL, 0, ?4)",
                )
                .map_err(error::unavailable)?
                // Read as a job, so UTF-8: put back as the text it was.
                .execute(rusqlite::params![
                    job.group(),
                    job.dedupe_key(),
                    String::from_utf8_lossy(body),
                    now
                ])
                .map_err(error::unavailable)?;
                tx.prepare_cached("DELETE FROM queue_dead_letters WHERE seq = ?1")
                    .map_err(error::unavailable)?
                    .execute([dead_seq])
                    .map_err(error::unavailable)?;
                put_back += 1;
            }
            Ok(put_back)
        })?;
        self.signal();
        Ok(put_back)
    }

    /// Run `f` in the shared database's next group commit: a delivery, ack or release, which
    /// survives `kill -9`; a power loss may roll it back with everything after it, and the job
    /// is then delivered again (see `sqlite-db`).
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, QueueError> + Send + 'static,
    ) -> Result<T, QueueError> {
        self.db.write(f).await.map_err(failed)?
    }

    /// [`SqliteQueue::write`] that also survives power loss, and calls `at_commit` with the
    /// outcome at its commit, before the sync.
    async fn write_durable_and<T: Clone + Send + 'static>(
        &self,
        at_commit: impl FnOnce(&T) + Send + 'static,
        f: impl FnOnce(&Connection) -> Result<T, QueueError> + Send + 'static,
    ) -> Result<T, QueueError> {
        self.db
            .write_durable_and(f, at_commit)
            .await
            .map_err(failed)?
    }

    fn write_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, QueueError> + Send + 'static,
    ) -> Result<T, QueueError> {
        self.db.write_blocking(f).map_err(failed)?
    }

    fn read_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, QueueError> + Send + 'static,
    ) -> Result<T, QueueError> {
        self.db.read_blocking(f).map_err(failed)?
    }
}

fn failed(e: sqlite_db::Failure) -> QueueError {
    QueueError::Unavailable(Box::new(e))
}

/// Bring the queue's tables up to date and make the jobs in flight visible again; the dedupe
/// keys of those jobs.
fn recover(conn: &mut Connection) -> Result<Vec<String>, QueueError> {
    schema::migrate(conn, schema::MIGRATIONS)?;
    let recovered = conn
        .prepare("SELECT dedupe_key FROM queue_jobs WHERE receipt IS NOT NULL ORDER BY seq")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(error::unavailable)?;
    conn.execute(
        "UPDATE queue_jobs SET receipt = NULL, visible_at_ms = ?1 WHERE receipt IS NOT NULL",
        [now_ms()],
    )
    .map_err(error::unavailable)?;
    Ok(recovered)
}

/// The dead letters, oldest job first, and the numbers of those whose bodies cannot be read.
fn dead_letters(conn: &Connection) -> Result<(Vec<DeadLetter>, Vec<i64>), QueueError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, body, receive_count, dead_at_ms FROM queue_dead_letters ORDER BY seq",
        )
        .map_err(error::unavailable)?;
    let rows = stmt
        .query_map([], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                body_bytes(row.get_ref(1)?),
                row.get::<_, i64>(2)?,
                row.get::<_, i64>(3)?,
            ))
        })
        .map_err(error::unavailable)?;
    let (mut readable, mut unreadable) = (Vec::new(), Vec::new());
    for row in rows {
        let (seq, body, receive_count, dead_at_ms) = row.map_err(error::unavailable)?;
        let what = || format!("dead letter {seq}");
        let read =
            decode_bytes(&body, what).and_then(|job| Ok((job, error::count(receive_count, what)?)));
        let Ok((job, receive_count)) = read else {
            unreadable.push(seq);
            continue;
        };
        readable.push(DeadLetter {
            seq,
            job,
            receive_count,
            dead_at_ms,
        });
    }
    Ok((readable, unreadable))
}

/// A stored job body.
fn decode(body: &str, what: impl FnOnce() -> String) -> Result<TurnJob, QueueError> {
    serde_json::from_str(body).map_err(|e| error::corrupt(what(), e))
}

/// A stored job body as bytes (text or blob; anything else is no body).
fn body_bytes(value: rusqlite::types::ValueRef<'_>) -> Vec<u8> {
    match value {
        rusqlite::types::ValueRef::Text(b) | rusqlite::types::ValueRef::Blob(b) => b.to_vec(),
        _ => Vec::new(),
    }
}

/// [`decode`] of a body read as bytes: one that is not UTF-8 is corrupt too.
fn decode_bytes(body: &[u8], what: impl FnOnce() -> String) -> Result<TurnJob, QueueError> {
    match std::str::from_utf8(body) {
        Ok(text) => decode(text, what),
        Err(e) => Err(error::corrupt(what(), e)),
    }
}

/// Wall-clock milliseconds: visibility deadlines and dedupe expiry outlive the process.
fn now_ms() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    millis(since_epoch)
}

/// A duration in whole milliseconds, saturating.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}
