//! Bridle's SQLite file off the async threads: one writer thread with group commit, and a few
//! reader threads on their own connections (WAL lets them read beside the writer). The store,
//! the queue and the local server's demo notes share one [`Db`], so no two connections of the
//! process ever wait on each other for the file's write lock (SQLite's busy handler sleeps in
//! 1–100 ms steps; one writer never meets it).
//!
//! A write is a closure sent to the writer thread. The writer takes every write waiting when it
//! is free (up to [`BATCH`]) and runs them in one `BEGIN IMMEDIATE` transaction, each inside its
//! own savepoint: a write whose closure fails (returns `Err`) or panics is rolled back to its
//! savepoint and answers that, the others go on. One `COMMIT` then ends the batch, and only then
//! is each caller answered; if the commit fails, every write of the batch answers that failure,
//! and none of it is in the file.
//!
//! Three strengths of write, chosen per write. Every batch commits with `synchronous=NORMAL`, so
//! the writer does not wait for the disk's flushes at a commit (a checkpoint still syncs).
//!
//! - [`Db::write_durable`]: answered only once the write survives `kill -9` and power loss, as
//!   `synchronous=FULL` promises. After the batch's commit its answer goes to the syncer thread,
//!   which syncs the WAL file (`fdatasync`) and then answers: a sync begun after a commit makes
//!   that commit durable, with everything committed before it (SQLite's FULL does the same, an
//!   fsync of the WAL after the commit's frames are written, only inside the writer). Durable
//!   writes that wait while a sync runs share the next one, and the writer commits the next
//!   batches meanwhile: under load the disk's flushes, not the writer, set the pace of durable
//!   writes alone (the first sync also syncs the WAL's directory entry). For writes
//!   acknowledged outside the process: an enqueue (the `queued` event, a webhook's 200).
//!   Unlike FULL inside SQLite, a durable write is visible to readers from its commit, before
//!   its sync, and [`Db::write_durable_and`] says so at the commit: the queue wakes its waiting
//!   receive then, so a job is handed out, and its turn runs, while its enqueue is being
//!   synced. Should the power fail in that window (a sync slower than the turn that
//!   followed), the job is lost with the enqueue, and with it nothing that was
//!   acknowledged: its sender, never told it was queued, sends it again (a platform redelivers
//!   a webhook without a 200), and a reply that went out meanwhile may go out twice. A failed sync
//!   fails its writes and every durable write after it, until a restart: after a failed
//!   `fsync` the kernel may have dropped the pages it could not write, so a later success would
//!   not cover them. The writes of the failed sync are committed, so a reader may see them
//!   (their outcome is unknown to the caller, as a lost answer's would be); every durable write
//!   after it is refused before it commits ([`Db::broken`] says why).
//! - [`Db::write_then_sync`]: answered at its commit, and the syncer's next sync (begun after
//!   it, as for a durable write) is asked for but not awaited. For the record of something
//!   that already left the process, a reply the browser was streamed or a platform accepted:
//!   the reply went out before its record was written, so a power loss between the two sends
//!   it again on any engine, and waiting for the sync would close no window, only hold the
//!   turn's worker (and its conversation's next message) for a sync more. The record is as
//!   durable as a durable write's about one sync later; until then a power loss rolls it back
//!   with everything after it (see below), and the job, still queued, runs again.
//! - [`Db::write`]: answered at its commit. The write survives `kill -9` (it is in the
//!   operating system's cache); a power loss or kernel crash may roll it back, but only
//!   together with every write after it: WAL frames are appended in order and recovery keeps a
//!   prefix, and the next sync (or checkpoint) makes everything before it durable too. So after
//!   a power loss the file is exactly what a `kill -9` at a slightly earlier moment would have
//!   left — the case every write's crash story already handles (the job is still queued, the
//!   turn resumes from what is stored, a tool's receipt and its domain write go together) — and
//!   never a state no crash could leave.
//!
//! What a power loss can cost beyond a `kill -9`, and why that is acceptable here: work done
//! since the last sync is redone (a model call paid twice, its budget charge rolled back with
//! it; a web reply the browser already showed is answered again); nothing that was
//! acknowledged to a client or a platform is lost. A sync costs about 0.5 ms on this machine's
//! disk and a commit without one about 0.05 ms (measured: `python3` sqlite3, 300-byte inserts,
//! WAL), and a plain web turn makes 6 writes: one durable (the enqueue, which hands the job to
//! the waiting worker), one that begins a sync (the finish, the reply's record) and four plain
//! ones (`tests/tests/round_trips.rs` pins the count). A database that is not a file in WAL mode has no syncer: every batch commits with
//! `synchronous=FULL`.
//!
//! A read is a closure run by one of the reader threads, on a connection that only reads. It
//! sees every write acknowledged before it was sent.
//!
//! An in-memory database (tests, `bridle serve --memory`) has no file to wait on, so it has no
//! threads: its one connection sits behind a mutex and each closure runs on the caller's thread
//! in a transaction of its own. That also keeps tests that pause tokio's clock honest: a paused
//! clock jumps ahead whenever every task waits, and a task waiting on another thread looks idle.
//!
//! [`Db::exclusive`] runs a closure alone on the writer's connection, outside any batch: for
//! schema migrations and recovery at open, which bring their own transactions.
//!
//! The threads answer through a oneshot channel, so a caller works under any executor. A panic
//! inside a closure rolls back that closure's savepoint and is resumed in the caller; the
//! threads keep serving. Dropping the last handle ends the threads once the work already sent
//! is done, and closes the file.

use rusqlite::{Connection, OpenFlags};
use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// The most writes one commit carries.
pub const BATCH: usize = 256;

/// Reader threads (and connections) of a file database.
pub const READERS: usize = 2;

/// Prepared statements each connection keeps (rusqlite's default is 16; the store, the queue
/// and the notes use more distinct statements than that, so a smaller cache re-parses them).
const STATEMENTS: usize = 256;

/// How long a connection waits for the file's lock held by another process (an inspecting
/// CLI) before giving up.
const BUSY: Duration = Duration::from_secs(5);

/// Why a closure's outcome cannot be given: the connection's thread is gone, or the batch it
/// ran in could not be committed (its changes are not in the file).
#[derive(Debug, Clone)]
pub struct Failure(String);

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

type Panic = Box<dyn Any + Send>;
type Outcome<T> = Result<T, Panic>;

/// A write run inside the batch's transaction (or, given the error that stopped the batch from
/// starting, not run).
type WriteJob = Box<dyn FnOnce(Result<&Connection, &rusqlite::Error>) -> Ran + Send>;
/// Run once a write's batch has committed.
type Hook = Box<dyn FnOnce() + Send>;
/// What a write run in a batch leaves behind.
struct Ran {
    /// Whether it succeeded: its savepoint is kept.
    ok: bool,
    /// Run on the writer's thread once the batch has committed, before any sync.
    committed: Option<Hook>,
    /// How to answer its caller once the commit's (or the sync's) outcome is known.
    answer: Answer,
}
/// Given why the write is not acknowledged (its batch did not commit, or its sync failed), or
/// `None`.
type Answer = Box<dyn FnOnce(Option<Failure>) + Send>;
type ReadJob = Box<dyn FnOnce(&Connection) + Send>;
/// Makes everything committed so far survive power loss: the WAL file synced to the disk.
type SyncFn = Box<dyn FnMut() -> std::io::Result<()> + Send>;

/// What a write's answer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strength {
    /// Its commit: it survives `kill -9`.
    Committed,
    /// A sync after its commit: it survives power loss.
    Durable,
    /// Its commit, and a sync is begun after it that the answer does not wait for.
    SyncBegun,
}

enum Job {
    /// A write, and what its answer waits for.
    Write(WriteJob, Strength),
    Exclusive(Box<dyn FnOnce(&mut Connection) + Send>),
}

/// One SQLite database behind a writer thread and reader threads. Share it behind an `Arc`.
#[derive(Debug)]
pub struct Db {
    writes: mpsc::Sender<Job>,
    /// `None` when there are no reader connections: reads go to the writer.
    reads: Option<mpsc::Sender<ReadJob>>,
    /// An in-memory database's one connection, used on the caller's thread (no threads).
    inline: Option<Mutex<Connection>>,
    /// Joined on drop, so the file is closed when the last handle is gone.
    threads: Vec<std::thread::JoinHandle<()>>,
    /// How many batches the writer has committed (each one commit).
    batches: Arc<AtomicU64>,
    /// How many times the syncer has synced the WAL.
    syncs: Arc<AtomicU64>,
    /// How many writes and reads callers have sent.
    writes_sent: AtomicU64,
    reads_sent: AtomicU64,
    /// Why durable writes are refused: a sync of the log failed (see [`Db::broken`]).
    broken: Broken,
}

/// Set once a sync of the log has failed, for good: from then on the writer refuses durable
/// writes before they commit (committed, they would be visible, their hooks run, and their
/// callers told they failed — a tool's effect that happened reported as not done).
type Broken = Arc<Mutex<Option<Failure>>>;

/// How many calls a [`Db`] has served: each write and each read is one round trip to a
/// connection's thread and back (in memory: one lock of the connection).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Calls {
    pub writes: u64,
    pub reads: u64,
    /// Commits of the writer, each carrying one or more writes.
    pub commits: u64,
    /// Syncs of the WAL, each making the durable writes committed before it durable.
    pub syncs: u64,
}

impl Drop for Db {
    fn drop(&mut self) {
        // Closing the channels ends the threads once the work already sent is done (the
        // writer's end closes the syncer's).
        let (writes, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.writes, writes));
        self.reads = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Db {
    /// Open (or create) the database file at `path`: WAL, foreign keys on, a writer, the
    /// syncer and [`READERS`] readers (see the crate docs); migrations at open commit with
    /// `synchronous=FULL`.
    pub fn open(path: impl AsRef<Path>) -> rusqlite::Result<Self> {
        Self::open_with(path.as_ref(), None)
    }

    /// [`Db::open`] whose commits are made durable by `sync` instead of syncing the WAL file:
    /// for a test of what a failed sync does to whoever uses the database.
    pub fn open_syncing_with(
        path: impl AsRef<Path>,
        sync: impl FnMut() -> std::io::Result<()> + Send + 'static,
    ) -> rusqlite::Result<Self> {
        Self::open_with(path.as_ref(), Some(Box::new(sync)))
    }

    /// [`Db::open`], with the syncer's `sync` if given.
    fn open_with(path: &Path, sync: Option<SyncFn>) -> rusqlite::Result<Self> {
        let writer = Connection::open(path)?;
        writer.busy_timeout(BUSY)?;
        // WAL lets readers (ours, and an inspecting CLI's) run beside the writer.
        writer.pragma_update_and_check(None, "journal_mode", "wal", |_| Ok(()))?;
        writer.pragma_update(None, "foreign_keys", true)?;
        kept_prepared(&writer)?;
        let readers = (0..READERS)
            .map(|_| reader(path))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(match sync {
            None => Self::start(writer, readers),
            Some(sync) => Self::start_with(writer, readers, Some(sync)),
        })
    }

    /// A private, empty database in memory, gone when the last handle is dropped. Its closures
    /// run on the caller's thread (see the crate docs).
    pub fn open_in_memory() -> rusqlite::Result<Self> {
        let conn = Connection::open_in_memory()?;
        conn.pragma_update(None, "foreign_keys", true)?;
        kept_prepared(&conn)?;
        Ok(Self::inline(conn))
    }

    /// `conn` used on the caller's thread, behind a mutex: every write its own transaction.
    pub fn inline(conn: Connection) -> Self {
        let (writes, _) = mpsc::channel();
        Self {
            writes,
            reads: None,
            inline: Some(Mutex::new(conn)),
            threads: Vec::new(),
            batches: Arc::new(AtomicU64::new(0)),
            syncs: Arc::new(AtomicU64::new(0)),
            writes_sent: AtomicU64::new(0),
            reads_sent: AtomicU64::new(0),
            broken: Broken::default(),
        }
    }

    /// Start the writer on `writer` and a reader thread on each of `readers` (none: reads go to
    /// the writer). A file in WAL mode gets the syncer (see the crate docs); any other commits
    /// every batch with `synchronous=FULL`.
    pub fn start(writer: Connection, readers: Vec<Connection>) -> Self {
        let wal = writer
            .pragma_query_value(None, "journal_mode", |r| r.get::<_, String>(0))
            .ok()
            .filter(|mode| mode.eq_ignore_ascii_case("wal"))
            .and(writer.path())
            .filter(|path| !path.is_empty())
            .map(|path| std::path::PathBuf::from(format!("{path}-wal")));
        let sync: Option<SyncFn> = wal.map(|wal| {
            // The WAL's directory entry too, once (SQLite's own first sync of a new file does
            // that): a log created at this open would otherwise not be found after a power loss.
            let mut entry_synced = false;
            Box::new(move || {
                std::fs::File::open(&wal)?.sync_data()?;
                if !entry_synced {
                    // As SQLite does, a directory that cannot be synced is no failure: some
                    // file systems refuse to sync a directory at all, and the log's own sync
                    // stands.
                    if let Some(dir) = wal.parent().filter(|d| !d.as_os_str().is_empty()) {
                        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
                    }
                    entry_synced = true;
                }
                Ok(())
            }) as SyncFn
        });
        Self::start_with(writer, readers, sync)
    }

    /// [`Db::start`] on a file in WAL mode whose commits are made durable by `sync` instead of
    /// syncing the WAL file: for a test that holds a sync open to see what happens meanwhile.
    pub fn start_syncing_with(
        writer: Connection,
        readers: Vec<Connection>,
        sync: impl FnMut() -> std::io::Result<()> + Send + 'static,
    ) -> Self {
        Self::start_with(writer, readers, Some(Box::new(sync)))
    }

    /// [`Db::start`] with `sync` as the syncer's way to make commits durable (`None`: every
    /// batch commits with `synchronous=FULL`, no syncer).
    fn start_with(writer: Connection, readers: Vec<Connection>, sync: Option<SyncFn>) -> Self {
        let (writes, jobs) = mpsc::channel::<Job>();
        let batches = Arc::new(AtomicU64::new(0));
        let syncs = Arc::new(AtomicU64::new(0));
        let counted = batches.clone();
        let broken = Broken::default();
        let mut threads = Vec::new();
        let syncer = sync.map(|sync| {
            let (to_sync, waiting) = mpsc::channel::<Vec<Answer>>();
            let synced = syncs.clone();
            let broken = broken.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("sqlite-syncer".into())
                    .spawn(move || sync_loop(sync, waiting, &synced, &broken))
                    .expect("the database's syncer thread starts"),
            );
            to_sync
        });
        threads.push(
            std::thread::Builder::new()
                .name("sqlite-writer".into())
                .spawn({
                    let broken = broken.clone();
                    move || write_loop(writer, jobs, &counted, syncer, &broken)
                })
                .expect("the database's writer thread starts"),
        );
        let reads = (!readers.is_empty()).then(|| {
            let (reads, read_jobs) = mpsc::channel::<ReadJob>();
            let read_jobs = Arc::new(Mutex::new(read_jobs));
            for conn in readers {
                let jobs = read_jobs.clone();
                threads.push(
                    std::thread::Builder::new()
                        .name("sqlite-reader".into())
                        .spawn(move || read_loop(conn, jobs))
                        .expect("the database's reader thread starts"),
                );
            }
            reads
        });
        Self {
            writes,
            reads,
            inline: None,
            threads,
            batches,
            syncs,
            writes_sent: AtomicU64::new(0),
            reads_sent: AtomicU64::new(0),
            broken,
        }
    }

    /// Run `f` in the next group commit; its result once that commit is done. An `Err` from `f`
    /// rolls back what `f` wrote and is given back as is. The write survives `kill -9`; a power
    /// loss may roll it back with everything after it (see the crate docs).
    pub async fn write<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        self.write_with(f, Strength::Committed, no_hook::<T>())
            .await
    }

    /// [`Db::write`] that also survives power loss: the WAL is synced after its commit and
    /// before the answer (and with it every write before this one).
    pub async fn write_durable<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        self.write_with(f, Strength::Durable, no_hook::<T>()).await
    }

    /// [`Db::write_durable`] that also calls `at_commit` with the closure's value once its
    /// commit is done, on the writer's thread, before the sync (not when the closure failed or
    /// the commit did): for waking whoever reads what was written (a queue's receive), who
    /// needs the commit, not the disk. What a reader sees before the sync is the crate docs'
    /// durable-write window.
    pub async fn write_durable_and<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        at_commit: impl FnOnce(&T) + Send + 'static,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Clone + Send + 'static,
        E: Send + 'static,
    {
        let committed = move |value: &T| {
            let value = value.clone();
            Box::new(move || at_commit(&value)) as Hook
        };
        self.write_with(f, Strength::Durable, Some(committed)).await
    }

    /// [`Db::write`] after which the WAL is synced without the caller waiting: answered at its
    /// commit, it survives power loss once the syncer's next sync is done (about one sync
    /// later, as a durable write would), unless that sync fails (every durable write after it
    /// then fails, see the crate docs). For the record of something that already left the
    /// process, where waiting would tell nobody anything: whatever comes after it in the file
    /// cannot outlive it.
    pub async fn write_then_sync<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        self.write_with(f, Strength::SyncBegun, no_hook::<T>())
            .await
    }

    async fn write_with<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        strength: Strength,
        committed: Option<impl FnOnce(&T) -> Hook + Send + 'static>,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        self.writes_sent.fetch_add(1, Ordering::Relaxed);
        if let Some(conn) = &self.inline {
            let out = self.write_inline(conn, f);
            if let (Some(committed), Ok(Ok(value))) = (committed, &out) {
                committed(value)();
            }
            return out;
        }
        let (tx, rx) = oneshot::channel();
        self.send_write(f, strength, committed, move |out| {
            let _ = tx.send(out);
        })?;
        settle(rx.await.ok())
    }

    /// [`Db::write_durable`] for a caller that is not async (a start-up or command-line step):
    /// blocks until the commit survives power loss.
    pub fn write_blocking<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        self.writes_sent.fetch_add(1, Ordering::Relaxed);
        if let Some(conn) = &self.inline {
            return self.write_inline(conn, f);
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.send_write(f, Strength::Durable, no_hook::<T>(), move |out| {
            let _ = tx.send(out);
        })?;
        settle(rx.recv().ok())
    }

    /// One write on the in-memory connection, in a transaction of its own.
    fn write_inline<T, E>(
        &self,
        conn: &Mutex<Connection>,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<Result<T, E>, Failure> {
        let conn = conn.lock().unwrap_or_else(|p| p.into_inner());
        exec(&conn, "BEGIN IMMEDIATE").map_err(|e| not_written(&e))?;
        let out = catch_unwind(AssertUnwindSafe(|| f(&conn)));
        let committed = match &out {
            Ok(Ok(_)) => exec(&conn, "COMMIT"),
            _ => Ok(()),
        };
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        drop(conn);
        self.batches.fetch_add(1, Ordering::Relaxed);
        match (out, committed) {
            (Err(panic), _) => resume_unwind(panic),
            (Ok(_), Err(e)) => Err(not_written(&e)),
            (Ok(out), Ok(())) => Ok(out),
        }
    }

    fn send_write<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
        strength: Strength,
        committed: Option<impl FnOnce(&T) -> Hook + Send + 'static>,
        reply: impl FnOnce(Outcome<Result<Result<T, E>, Failure>>) + Send + 'static,
    ) -> Result<(), Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        let job: WriteJob = Box::new(move |conn| {
            let out = match conn {
                Ok(conn) => catch_unwind(AssertUnwindSafe(|| f(conn))).map(Ok),
                Err(e) => Ok(Err(not_written(e))),
            };
            let (ok, committed) = match &out {
                Ok(Ok(Ok(value))) => (true, committed.map(|c| c(value))),
                _ => (false, None),
            };
            let answer: Answer = Box::new(move |failed| {
                let out = match (out, failed) {
                    (Ok(Ok(Ok(_))), Some(failure)) => Ok(Err(failure)),
                    (out, _) => out,
                };
                reply(out);
            });
            Ran {
                ok,
                committed,
                answer,
            }
        });
        self.writes
            .send(Job::Write(job, strength))
            .map_err(|_| stopped())
    }

    /// Run `f` alone on the writer's connection, outside any batch (it may open its own
    /// transactions): schema migrations and recovery at open. Blocks until it is done.
    pub fn exclusive<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> T + Send + 'static,
    ) -> Result<T, Failure> {
        if let Some(conn) = &self.inline {
            return Ok(f(&mut conn.lock().unwrap_or_else(|p| p.into_inner())));
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let job = Job::Exclusive(Box::new(move |conn| {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(|| f(conn))));
        }));
        self.writes.send(job).map_err(|_| stopped())?;
        match rx.recv() {
            Ok(Ok(out)) => Ok(out),
            Ok(Err(panic)) => resume_unwind(panic),
            Err(_) => Err(stopped()),
        }
    }

    /// Run `f` on a reading connection.
    pub async fn read<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        let Some(reads) = &self.reads else {
            if let Some(conn) = &self.inline {
                self.reads_sent.fetch_add(1, Ordering::Relaxed);
                return Ok(f(&conn.lock().unwrap_or_else(|p| p.into_inner())));
            }
            // No reader: a write (and counted as one).
            return self.write(f).await;
        };
        self.reads_sent.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let job: ReadJob = Box::new(move |conn| {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(|| Ok(f(conn)))));
        });
        reads.send(job).map_err(|_| stopped())?;
        settle(rx.await.ok())
    }

    /// [`Db::read`] for a caller that is not async.
    pub fn read_blocking<T, E>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E> + Send + 'static,
    ) -> Result<Result<T, E>, Failure>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        let Some(reads) = &self.reads else {
            if let Some(conn) = &self.inline {
                self.reads_sent.fetch_add(1, Ordering::Relaxed);
                return Ok(f(&conn.lock().unwrap_or_else(|p| p.into_inner())));
            }
            return self.write_blocking(f);
        };
        self.reads_sent.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::sync_channel(1);
        let job: ReadJob = Box::new(move |conn| {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(|| Ok(f(conn)))));
        });
        reads.send(job).map_err(|_| stopped())?;
        settle(rx.recv().ok())
    }

    /// Why durable writes are refused, once a sync of the log has failed (for good: the
    /// kernel may have dropped the pages it could not write, so only a restart, which reads the
    /// log again, makes durable writes trustworthy again); `None` while all is well. The
    /// server's `/healthz` says it, so a supervisor restarts it.
    pub fn broken(&self) -> Option<String> {
        let broken = self.broken.lock().unwrap_or_else(|p| p.into_inner());
        broken.as_ref().map(ToString::to_string)
    }

    /// How many batches (commits) the writer has run.
    pub fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// The writes and reads sent so far, and the writer's commits: what a test counts to pin
    /// the round trips of a turn.
    pub fn calls(&self) -> Calls {
        Calls {
            writes: self.writes_sent.load(Ordering::Relaxed),
            reads: self.reads_sent.load(Ordering::Relaxed),
            commits: self.batches(),
            syncs: self.syncs.load(Ordering::Relaxed),
        }
    }
}

/// A connection that only reads the file at `path` (WAL: it reads beside the writer).
fn reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY)?;
    conn.pragma_update(None, "query_only", true)?;
    kept_prepared(&conn)?;
    Ok(conn)
}

/// Keep `conn`'s statements prepared: a cache of [`STATEMENTS`], and the query planner's
/// stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`). Without it this build of SQLite (with
/// `SQLITE_ENABLE_STAT4`) marks a statement whose plan could depend on a bound value to be
/// planned again once that value changes, and every cached statement that binds one (nearly
/// all of ours) was parsed and planned afresh on each use. Our plans are index lookups that no
/// value changes.
fn kept_prepared(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_prepared_statement_cache_capacity(STATEMENTS);
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    Ok(())
}

fn settle<T>(received: Option<Outcome<Result<T, Failure>>>) -> Result<T, Failure> {
    match received {
        Some(Ok(result)) => result,
        Some(Err(panic)) => resume_unwind(panic),
        None => Err(stopped()),
    }
}

fn stopped() -> Failure {
    Failure("the database's connection thread stopped".into())
}

fn not_written(e: &rusqlite::Error) -> Failure {
    Failure(format!("the database could not commit the write: {e}"))
}

/// The writer: batches of writes, each one commit. With a syncer, every batch commits with
/// `synchronous=NORMAL` and a durable write's answer goes to the syncer; without one, every
/// batch commits with `synchronous=FULL` and everyone is answered after the commit. An
/// exclusive job runs with `synchronous=FULL` (migrations at open are durable on their own).
fn write_loop(
    mut conn: Connection,
    jobs: mpsc::Receiver<Job>,
    batches: &AtomicU64,
    syncer: Option<mpsc::Sender<Vec<Answer>>>,
    broken: &Broken,
) {
    let normal = syncer.is_some();
    // Without the setting the writes cannot be acknowledged as promised: none runs.
    let set = set_synchronous(&conn, !normal).err();
    let mut next = jobs.recv().ok();
    while let Some(job) = next.take() {
        let first = match job {
            Job::Exclusive(f) => {
                if normal {
                    let _ = set_synchronous(&conn, true);
                }
                f(&mut conn);
                if normal {
                    let _ = set_synchronous(&conn, false);
                }
                next = jobs.recv().ok();
                continue;
            }
            Job::Write(first, strength) => (first, strength),
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match jobs.try_recv() {
                Ok(Job::Write(job, strength)) => batch.push((job, strength)),
                Ok(exclusive) => {
                    // Its turn comes after this batch.
                    next = Some(exclusive);
                    break;
                }
                Err(_) => break,
            }
        }
        // Once a sync has failed, a durable write is refused before it commits.
        let refused = broken.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let batch = match refused {
            Some(Failure(why)) => {
                let e = rusqlite::Error::SqliteFailure(
                    rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
                    Some(why),
                );
                // Only what waits for a sync: a write answered at its commit (a turn's
                // progress, the record of a reply that went out with the lease's release) goes
                // on, as it would have before.
                let (refuse, keep): (Vec<_>, Vec<_>) = batch
                    .into_iter()
                    .partition(|(_, strength)| *strength == Strength::Durable);
                for (job, _) in refuse {
                    (job(Err(&e)).answer)(None);
                }
                keep
            }
            None => batch,
        };
        match &set {
            Some(e) => {
                for (job, _) in batch {
                    (job(Err(e)).answer)(Some(not_written(e)));
                }
            }
            None if batch.is_empty() => {}
            None => run_batch(&conn, batch, batches, syncer.as_ref()),
        }
        if next.is_none() {
            next = jobs.recv().ok();
        }
    }
}

/// No commit hook, for a write whose caller waits for its answer alone.
fn no_hook<T>() -> Option<fn(&T) -> Hook> {
    None
}

/// Set `synchronous` to FULL or NORMAL for the commits that follow.
fn set_synchronous(conn: &Connection, full: bool) -> rusqlite::Result<()> {
    conn.pragma_update(None, "synchronous", if full { "FULL" } else { "NORMAL" })
}

/// One transaction for the whole batch, one savepoint per write, one commit (counted in
/// `batches` before anyone is answered, so a caller sees its own commit counted); then the
/// answers: a durable write's through `syncer` when there is one, after the WAL's next sync
/// (which a write that begins a sync asks for without waiting).
fn run_batch(
    conn: &Connection,
    batch: Vec<(WriteJob, Strength)>,
    batches: &AtomicU64,
    syncer: Option<&mpsc::Sender<Vec<Answer>>>,
) {
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        for (job, _) in batch {
            (job(Err(&e)).answer)(Some(not_written(&e)));
        }
        return;
    }
    let mut answers = Vec::with_capacity(batch.len());
    let mut hooks = Vec::new();
    let mut failed = None;
    for (job, strength) in batch {
        if let Some(e) = &failed {
            answers.push((job(Err(e)).answer, strength));
            continue;
        }
        if let Err(e) = exec(conn, "SAVEPOINT w") {
            answers.push((job(Err(&e)).answer, strength));
            failed = Some(e);
            continue;
        }
        let Ran {
            ok,
            committed,
            answer,
        } = job(Ok(conn));
        answers.push((answer, strength));
        if let Some(committed) = committed {
            hooks.push(committed);
        }
        let settled = if ok {
            exec(conn, "RELEASE w")
        } else {
            exec(conn, "ROLLBACK TO w").and_then(|()| exec(conn, "RELEASE w"))
        };
        if let Err(e) = settled {
            failed = Some(e);
        }
    }
    let outcome = match failed {
        Some(e) => Err(e),
        None => exec(conn, "COMMIT"),
    };
    if outcome.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    batches.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = &outcome {
        for (answer, _) in answers {
            answer(Some(not_written(e)));
        }
        return;
    }
    for committed in hooks {
        // A panic here is the caller's: the batch is committed, and the writer goes on.
        let _ = catch_unwind(AssertUnwindSafe(committed));
    }
    let mut to_sync = Vec::new();
    for (answer, strength) in answers {
        match (syncer, strength) {
            (Some(_), Strength::Durable) => to_sync.push(answer),
            (Some(_), Strength::SyncBegun) => {
                answer(None);
                // The syncer's next sync, which nobody waits for.
                to_sync.push(Box::new(|_| {}));
            }
            _ => answer(None),
        }
    }
    if let (Some(syncer), false) = (syncer, to_sync.is_empty())
        && let Err(mpsc::SendError(unsynced)) = syncer.send(to_sync)
    {
        for answer in unsynced {
            answer(Some(Failure(
                "the database's syncer stopped: the write is not known to be durable".into(),
            )));
        }
    }
}

/// The syncer: takes the durable writes committed since its last sync, syncs the WAL once
/// (a sync begun after their commits makes them durable, with everything committed before),
/// and answers them. A failed sync fails them, and every durable write after it: once a sync
/// has failed, the kernel may have dropped the pages it could not write, so a later sync's
/// success would not cover them (the process must be restarted to trust the file again).
fn sync_loop(
    mut sync: SyncFn,
    waiting: mpsc::Receiver<Vec<Answer>>,
    syncs: &AtomicU64,
    shared: &Broken,
) {
    let mut broken: Option<Failure> = None;
    while let Ok(mut answers) = waiting.recv() {
        while let Ok(more) = waiting.try_recv() {
            answers.extend(more);
        }
        if broken.is_none() {
            if let Err(e) = sync() {
                let failure = Failure(format!(
                    "the database's log could not be synced to the disk ({e}); restart to \
                     make durable writes again"
                ));
                *shared.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure.clone());
                broken = Some(failure);
            }
            syncs.fetch_add(1, Ordering::Relaxed);
        }
        for answer in answers {
            answer(broken.clone());
        }
    }
}

/// Run one statement from the connection's statement cache: transaction control (the writer's,
/// several times per batch; a store's savepoints, on every turn) is parsed once.
pub fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn read_loop(conn: Connection, jobs: Arc<Mutex<mpsc::Receiver<ReadJob>>>) {
    loop {
        let job = {
            let jobs = jobs.lock().unwrap_or_else(|p| p.into_inner());
            jobs.recv()
        };
        match job {
            Ok(job) => job(&conn),
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests;
