//! The connections, off the async threads: one writer thread with group commit, and a few
//! reader threads on their own connections (WAL lets them read beside the writer).
//!
//! A write is a closure sent to the writer thread. The writer takes every write waiting when it
//! is free (up to [`BATCH`]) and runs them in one `BEGIN IMMEDIATE` transaction, each inside its
//! own savepoint: a write that fails is rolled back to its savepoint and answers its error, the
//! others go on. One `COMMIT` — one fsync of the WAL with `synchronous=FULL` — then makes the
//! whole batch durable, and only then is each caller answered. So a write acknowledged to its
//! caller (and anything the caller acknowledges in turn, like a `queued` event) survives
//! `kill -9` and power loss exactly as a commit of its own would; concurrent writers just share
//! the fsync. If the commit fails, every write of the batch answers that failure.
//!
//! A read is a closure run by one of the reader threads, on a connection that only reads. It
//! sees every write acknowledged before it was sent. An in-memory database has one connection,
//! so there its reads go to the writer thread too.
//!
//! The threads answer through a oneshot channel, so the store works under any executor
//! (`futures::executor::block_on` included). A panic inside a closure rolls back that closure's
//! savepoint and is resumed in the caller; the threads keep serving.

use rusqlite::Connection;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use store::StoreError;
use tokio::sync::oneshot;

/// The most writes one commit carries.
pub(crate) const BATCH: usize = 256;

/// Reader threads (and connections) of a file database.
pub(crate) const READERS: usize = 2;

type Outcome<T> = Result<Result<T, StoreError>, Box<dyn Any + Send>>;

/// A write run inside the batch's transaction (or, given the error that stopped the batch
/// from starting, not run): whether it succeeded (its savepoint is kept), and how to answer its
/// caller once the commit's outcome is known.
type WriteJob = Box<dyn FnOnce(Result<&Connection, &rusqlite::Error>) -> (bool, Answer) + Send>;
type Answer = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;
type ReadJob = Box<dyn FnOnce(&Connection) + Send>;

#[derive(Debug)]
pub(crate) struct Db {
    writes: mpsc::Sender<WriteJob>,
    /// `None` for an in-memory database: reads go to the writer.
    reads: Option<mpsc::Sender<ReadJob>>,
    /// Joined on drop, so the file is closed when the store is gone.
    threads: Vec<std::thread::JoinHandle<()>>,
    /// How many batches the writer has run (each one commit); read by the tests.
    #[cfg_attr(not(test), allow(dead_code))]
    batches: Arc<AtomicU64>,
}

impl Drop for Db {
    fn drop(&mut self) {
        // Closing the channels ends the threads once the work already sent is done.
        let (writes, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.writes, writes));
        self.reads = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Db {
    /// Start the writer on `writer` and, for a file database, a reader thread on each of
    /// `readers`.
    pub(crate) fn start(writer: Connection, readers: Vec<Connection>) -> Self {
        let (writes, write_jobs) = mpsc::channel::<WriteJob>();
        let batches = Arc::new(AtomicU64::new(0));
        let counted = batches.clone();
        let mut threads = vec![
            std::thread::Builder::new()
                .name("store-sqlite-writer".into())
                .spawn(move || write_loop(writer, write_jobs, &counted))
                .expect("the store's writer thread starts"),
        ];
        let reads = (!readers.is_empty()).then(|| {
            let (reads, read_jobs) = mpsc::channel::<ReadJob>();
            let read_jobs = Arc::new(Mutex::new(read_jobs));
            for conn in readers {
                let jobs = read_jobs.clone();
                threads.push(
                    std::thread::Builder::new()
                        .name("store-sqlite-reader".into())
                        .spawn(move || read_loop(conn, jobs))
                        .expect("the store's reader thread starts"),
                );
            }
            reads
        });
        Self {
            writes,
            reads,
            threads,
            batches,
        }
    }

    /// Run `f` in the next group commit; its result once that commit is durable.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel::<Outcome<T>>();
        self.send_write(f, move |out| {
            let _ = tx.send(out);
        })?;
        settle(rx.await.map_err(|_| ()))
    }

    /// [`Db::write`] for a caller that is not async (a start-up step): blocks until durable.
    pub(crate) fn write_blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (tx, rx) = mpsc::sync_channel::<Outcome<T>>(1);
        self.send_write(f, move |out| {
            let _ = tx.send(out);
        })?;
        settle(rx.recv().map_err(|_| ()))
    }

    fn send_write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        reply: impl FnOnce(Outcome<T>) + Send + 'static,
    ) -> Result<(), StoreError> {
        let job: WriteJob = Box::new(move |conn| {
            let out = match conn {
                Ok(conn) => catch_unwind(AssertUnwindSafe(|| f(conn))),
                Err(e) => Ok(Err(not_written(e))),
            };
            let ok = matches!(out, Ok(Ok(_)));
            let answer: Answer = Box::new(move |commit_failed| {
                let out = match (out, commit_failed) {
                    (Ok(Ok(_)), Some(e)) => Ok(Err(not_written(e))),
                    (out, _) => out,
                };
                reply(out);
            });
            (ok, answer)
        });
        self.writes.send(job).map_err(|_| stopped())
    }

    /// How many batches (commits) the writer has run.
    #[cfg(test)]
    pub(crate) fn batches(&self) -> u64 {
        self.batches.load(Ordering::Relaxed)
    }

    /// Run `f` on a reading connection.
    pub(crate) async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let Some(reads) = &self.reads else {
            return self.write(f).await;
        };
        let (tx, rx) = oneshot::channel::<Outcome<T>>();
        let job: ReadJob = Box::new(move |conn| {
            let _ = tx.send(catch_unwind(AssertUnwindSafe(|| f(conn))));
        });
        reads.send(job).map_err(|_| stopped())?;
        settle(rx.await.map_err(|_| ()))
    }
}

fn settle<T>(received: Result<Outcome<T>, ()>) -> Result<T, StoreError> {
    match received {
        Ok(Ok(result)) => result,
        Ok(Err(panic)) => resume_unwind(panic),
        Err(_) => Err(stopped()),
    }
}

fn stopped() -> StoreError {
    StoreError::Unavailable("the database's connection thread stopped".into())
}

fn write_loop(conn: Connection, jobs: mpsc::Receiver<WriteJob>, batches: &AtomicU64) {
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run_batch(&conn, batch);
        batches.fetch_add(1, Ordering::Relaxed);
    }
}

/// One transaction for the whole batch, one savepoint per write, one commit; then the answers.
fn run_batch(conn: &Connection, batch: Vec<WriteJob>) {
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        for job in batch {
            let (_, answer) = job(Err(&e));
            answer(None);
        }
        return;
    }
    let mut answers = Vec::with_capacity(batch.len());
    let mut failed = None;
    for job in batch {
        if let Some(e) = &failed {
            answers.push(job(Err(e)).1);
            continue;
        }
        if let Err(e) = conn.execute_batch("SAVEPOINT w") {
            answers.push(job(Err(&e)).1);
            failed = Some(e);
            continue;
        }
        let (ok, answer) = job(Ok(conn));
        answers.push(answer);
        let settled = if ok {
            conn.execute_batch("RELEASE w")
        } else {
            conn.execute_batch("ROLLBACK TO w; RELEASE w")
        };
        if let Err(e) = settled {
            failed = Some(e);
        }
    }
    let outcome = match failed {
        Some(e) => Err(e),
        None => conn.execute_batch("COMMIT"),
    };
    if outcome.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    let failed = outcome.as_ref().err();
    for answer in answers {
        answer(failed);
    }
}

fn not_written(e: &rusqlite::Error) -> StoreError {
    StoreError::Unavailable(format!("the database could not commit the write: {e}").into())
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

/// Run `f`, a few reads that must agree with each other, inside one savepoint: they see one
/// snapshot of the database, whether on a reader's connection or inside the writer's batch.
pub(crate) fn snapshot<T>(
    conn: &Connection,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    conn.execute_batch("SAVEPOINT snapshot")
        .map_err(crate::error::unavailable)?;
    let out = f();
    let _ = conn.execute_batch("RELEASE snapshot");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn file_db(name: &str) -> (Arc<Db>, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("store-db-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "wal").unwrap();
        conn.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
            .unwrap();
        let reader = Connection::open(&path).unwrap();
        (Arc::new(Db::start(conn, vec![reader])), dir)
    }

    fn insert(k: i64) -> impl FnOnce(&Connection) -> Result<(), StoreError> + Send + 'static {
        move |conn| {
            conn.execute("INSERT INTO t (k, v) VALUES (?1, 'x')", [k])
                .map_err(crate::error::unavailable)?;
            Ok(())
        }
    }

    /// Writers waiting together share commits, and one failing write (a taken key) is rolled
    /// back alone: the others of its batch are stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writes_share_commits_and_a_failing_one_fails_alone() {
        let (db, dir) = file_db("batch");
        db.write(insert(7)).await.unwrap();
        let before = db.batches();
        // Hold the writer busy so the writes below queue up behind it.
        let busy = db.write(|_| {
            std::thread::sleep(Duration::from_millis(200));
            Ok(())
        });
        let mut tasks = Vec::new();
        for k in 100..200 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move { db.write(insert(k)).await }));
        }
        let db2 = db.clone();
        let taken = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            db2.write(insert(7)).await
        });
        busy.await.unwrap();
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        assert!(taken.await.unwrap().is_err(), "key 7 was taken");
        let batches = db.batches() - before;
        assert!(batches < 20, "101 writes in {batches} commits");
        let stored: i64 = db
            .read(|c| {
                c.query_row("SELECT COUNT(*) FROM t", [], |r| r.get(0))
                    .map_err(crate::error::unavailable)
            })
            .await
            .unwrap();
        assert_eq!(stored, 101, "key 7 once and every one of 100..200");
        drop(db);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A panicking write rolls back its own changes, is resumed in its caller, and the writer
    /// goes on serving.
    #[tokio::test]
    async fn a_panicking_write_is_rolled_back_and_the_writer_goes_on() {
        let (db, dir) = file_db("panic");
        let db2 = db.clone();
        let panicked = tokio::spawn(async move {
            db2.write(|c| {
                c.execute("INSERT INTO t (k, v) VALUES (1, 'x')", [])
                    .unwrap();
                panic!("boom");
                #[allow(unreachable_code)]
                Ok(())
            })
            .await
        })
        .await;
        assert!(panicked.is_err(), "the panic reached the caller");
        db.write(insert(2)).await.unwrap();
        let keys: Vec<i64> = db
            .read(|c| {
                let mut s = c.prepare("SELECT k FROM t ORDER BY k").unwrap();
                let keys = s.query_map([], |r| r.get(0)).unwrap();
                Ok(keys.map(Result::unwrap).collect())
            })
            .await
            .unwrap();
        assert_eq!(keys, vec![2], "the panicking write left nothing");
        drop(db);
        let _ = std::fs::remove_dir_all(dir);
    }
}
