use super::*;
use std::time::Duration;

/// A fresh directory for one test's database, removed when dropped (pass or fail).
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("sqlite-db-{name}-"))
        .tempdir()
        .unwrap()
}

/// A file database with one table, in a fresh directory (removed when the directory drops).
fn file_db(name: &str) -> (Arc<Db>, tempfile::TempDir) {
    let dir = temp_dir(name);
    let db = Db::open(dir.path().join("t.db")).unwrap();
    db.exclusive(|c| c.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        .unwrap()
        .unwrap();
    (Arc::new(db), dir)
}

fn insert(k: i64) -> impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static {
    move |conn| {
        conn.execute("INSERT INTO t (k, v) VALUES (?1, 'x')", [k])?;
        Ok(())
    }
}

async fn keys(db: &Db) -> Vec<i64> {
    db.read(|c| {
        let mut s = c.prepare("SELECT k FROM t ORDER BY k")?;
        let keys = s.query_map([], |r| r.get(0))?;
        keys.collect::<rusqlite::Result<Vec<i64>>>()
    })
    .await
    .unwrap()
    .unwrap()
}

/// Writers waiting together share commits, and one failing write (a taken key) is rolled back
/// alone: the others of its batch are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writes_share_commits_and_a_failing_one_fails_alone() {
    let (db, _dir) = file_db("batch");
    db.write(insert(7)).await.unwrap().unwrap();
    let before = db.batches();
    // Hold the writer busy so the writes below queue up behind it.
    let busy = db.write(|_| {
        std::thread::sleep(Duration::from_millis(200));
        Ok::<_, rusqlite::Error>(())
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
    busy.await.unwrap().unwrap();
    for t in tasks {
        t.await.unwrap().unwrap().unwrap();
    }
    let taken = taken.await.unwrap().unwrap();
    assert!(taken.is_err(), "key 7 was taken");
    let batches = db.batches() - before;
    assert!(batches < 20, "102 writes in {batches} commits");
    let stored = keys(&db).await;
    assert_eq!(stored.len(), 101, "key 7 once and every one of 100..200");
    drop(db);
}

/// A panicking write rolls back its own changes, is resumed in its caller, and the writer goes
/// on serving.
#[tokio::test]
async fn a_panicking_write_is_rolled_back_and_the_writer_goes_on() {
    let (db, _dir) = file_db("panic");
    let db2 = db.clone();
    let panicked = tokio::spawn(async move {
        db2.write(|c| {
            c.execute("INSERT INTO t (k, v) VALUES (1, 'x')", [])?;
            panic!("boom");
            #[allow(unreachable_code)]
            Ok::<_, rusqlite::Error>(())
        })
        .await
    })
    .await;
    assert!(panicked.is_err(), "the panic reached the caller");
    db.write(insert(2)).await.unwrap().unwrap();
    assert_eq!(keys(&db).await, vec![2], "the panicking write left nothing");
    drop(db);
}

/// A write acknowledged to its caller is in the file: a second process-like open (a fresh
/// `Db` on the same path after the first is dropped) reads it, and so does a reader of the
/// first while it is still open.
#[tokio::test]
async fn an_acknowledged_write_is_in_the_file() {
    let (db, dir) = file_db("durable");
    db.write(insert(5)).await.unwrap().unwrap();
    assert_eq!(
        keys(&db).await,
        vec![5],
        "a reader sees the acknowledged write"
    );
    drop(db);
    let again = Db::open(dir.path().join("t.db")).unwrap();
    assert_eq!(keys(&again).await, vec![5]);
    drop(again);
}

/// A batch whose commit fails answers every write of it with the failure, and leaves none of
/// them in the file. The commit is made to fail by a deferred foreign key that the whole batch
/// leaves broken (SQLite checks those at COMMIT, not at the statement).
#[tokio::test]
async fn a_failed_commit_fails_every_write_of_its_batch() {
    let (db, _dir) = file_db("commit");
    db.exclusive(|c| {
        c.execute_batch(
            "CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (id INTEGER PRIMARY KEY,
                 parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED);",
        )
    })
    .unwrap()
    .unwrap();
    let busy = db.write(|_| {
        std::thread::sleep(Duration::from_millis(150));
        Ok::<_, rusqlite::Error>(())
    });
    let db1 = db.clone();
    let orphan = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        db1.write(|c| c.execute("INSERT INTO child (id, parent) VALUES (1, 99)", []))
            .await
    });
    let db2 = db.clone();
    let announced = Arc::new(AtomicU64::new(0));
    let counted = announced.clone();
    let innocent = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let at_commit = move |_: &()| {
            counted.fetch_add(1, Ordering::SeqCst);
        };
        db2.write_durable_and(insert(3), at_commit).await
    });
    busy.await.unwrap().unwrap();
    let orphan = orphan.await.unwrap();
    let innocent = innocent.await.unwrap();
    assert!(
        orphan.is_err(),
        "the broken batch did not commit: {orphan:?}"
    );
    assert!(
        innocent.is_err(),
        "a write in the same batch is not acknowledged: {innocent:?}"
    );
    assert!(
        keys(&db).await.is_empty(),
        "nothing of the batch is in the file"
    );
    assert_eq!(announced.load(Ordering::SeqCst), 0, "no commit announced");
    db.write(insert(4)).await.unwrap().unwrap();
    assert_eq!(
        keys(&db).await,
        vec![4],
        "the writer goes on after a failed commit"
    );
    drop(db);
}

/// An exclusive job waits for the batch before it and runs alone, with its own transaction.
#[tokio::test]
async fn exclusive_runs_alone_with_its_own_transaction() {
    let db = Arc::new(Db::open_in_memory().unwrap());
    db.exclusive(|c| {
        let tx = c.transaction()?;
        tx.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")?;
        tx.execute("INSERT INTO t (k, v) VALUES (1, 'x')", [])?;
        tx.commit()
    })
    .unwrap()
    .unwrap();
    db.write(insert(2)).await.unwrap().unwrap();
    assert_eq!(
        keys(&db).await,
        vec![1, 2],
        "in memory, reads go to the writer"
    );
}

/// In memory, closures run on the caller's thread, each write in its own transaction: a failing
/// write and a panicking one leave nothing, and the connection goes on serving.
#[tokio::test]
async fn in_memory_writes_are_their_own_transactions() {
    let db = Arc::new(Db::open_in_memory().unwrap());
    db.exclusive(|c| c.execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"))
        .unwrap()
        .unwrap();
    db.write(insert(1)).await.unwrap().unwrap();
    let failed = db
        .write(|c| {
            c.execute("INSERT INTO t (k, v) VALUES (2, 'x')", [])?;
            c.execute("INSERT INTO t (k, v) VALUES (1, 'again')", [])
        })
        .await
        .unwrap();
    assert!(failed.is_err(), "key 1 was taken");
    let db2 = db.clone();
    let panicked = tokio::spawn(async move {
        db2.write(|c| {
            c.execute("INSERT INTO t (k, v) VALUES (3, 'x')", [])?;
            panic!("boom");
            #[allow(unreachable_code)]
            Ok::<_, rusqlite::Error>(())
        })
        .await
    })
    .await;
    assert!(panicked.is_err(), "the panic reached the caller");
    db.write_blocking(insert(4)).unwrap().unwrap();
    assert_eq!(
        keys(&db).await,
        vec![1, 4],
        "only the whole writes are stored"
    );
}

/// `synchronous` as a write sees it inside its batch: 2 is FULL (fsync before the answer),
/// 1 is NORMAL.
fn synchronous(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "synchronous", |r| r.get(0))
}

/// A file in WAL mode commits every batch with NORMAL (no sync inside the writer), and only a
/// durable write makes the syncer sync the WAL; migrations (`exclusive`) run with FULL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_durable_writes_sync_and_the_writer_never_does() {
    let (db, _dir) = file_db("strength");
    let synced = db.calls().syncs;
    assert_eq!(db.write(synchronous).await.unwrap().unwrap(), 1, "plain");
    assert_eq!(db.calls().syncs, synced, "a plain write syncs nothing");
    assert_eq!(
        db.write_durable(synchronous).await.unwrap().unwrap(),
        1,
        "durable: the commit is NORMAL, the syncer makes it durable"
    );
    assert_eq!(
        db.calls().syncs,
        synced + 1,
        "one sync for the durable write"
    );
    assert_eq!(db.exclusive(|c| synchronous(c)).unwrap().unwrap(), 2);
    assert_eq!(
        db.write(synchronous).await.unwrap().unwrap(),
        1,
        "NORMAL again"
    );
    drop(db);
}

/// A file database on `sync` as its syncer (a test's stand-in for syncing the WAL).
fn syncing_db(name: &str, sync: SyncFn) -> (Arc<Db>, tempfile::TempDir) {
    syncing_db_in(temp_dir(name), sync)
}

/// [`syncing_db`] in `dir`.
fn syncing_db_in(dir: tempfile::TempDir, sync: SyncFn) -> (Arc<Db>, tempfile::TempDir) {
    let path = dir.path().join("t.db");
    let writer = Connection::open(&path).unwrap();
    writer
        .pragma_update_and_check(None, "journal_mode", "wal", |_| Ok(()))
        .unwrap();
    writer
        .execute_batch("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)")
        .unwrap();
    let readers = vec![reader(&path).unwrap()];
    (Arc::new(Db::start_with(writer, readers, Some(sync))), dir)
}

/// A gate the test opens: each sync waits for one permit, and says what it found committed.
fn gated_sync(path: std::path::PathBuf) -> (SyncFn, mpsc::Sender<()>, mpsc::Receiver<Vec<i64>>) {
    let (open, permits) = mpsc::channel::<()>();
    let (seen, found) = mpsc::channel::<Vec<i64>>();
    let sync: SyncFn = Box::new(move || {
        let conn = Connection::open(&path).map_err(std::io::Error::other)?;
        let mut s = conn
            .prepare("SELECT k FROM t ORDER BY k")
            .map_err(std::io::Error::other)?;
        let keys = s
            .query_map([], |r| r.get(0))
            .and_then(|keys| keys.collect::<rusqlite::Result<Vec<i64>>>())
            .map_err(std::io::Error::other)?;
        let _ = seen.send(keys);
        permits.recv().map_err(std::io::Error::other)
    });
    (sync, open, found)
}

/// [`syncing_db`] on [`gated_sync`]: the database, its directory, the gate and what each sync
/// found.
fn gated_db(
    name: &str,
) -> (
    Arc<Db>,
    tempfile::TempDir,
    mpsc::Sender<()>,
    mpsc::Receiver<Vec<i64>>,
) {
    let dir = temp_dir(name);
    let (sync, open, found) = gated_sync(dir.path().join("t.db"));
    let (db, dir) = syncing_db_in(dir, sync);
    (db, dir, open, found)
}

/// A durable write is answered only once a sync that began after its commit is done; a plain
/// write beside it is answered at its commit, and readers see both committed meanwhile.
/// Durable writes that wait together share one sync.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_write_is_answered_after_a_sync_that_follows_its_commit() {
    let (db, _dir, open, found) = gated_db("gated");
    let d = db.clone();
    let mut durable = tokio::spawn(async move { d.write_durable(insert(1)).await });
    // The sync has begun, after the commit: it found the row.
    let seen = tokio::task::spawn_blocking(move || found.recv().map(|k| (k, found)))
        .await
        .unwrap()
        .unwrap();
    let (first_seen, found) = seen;
    assert_eq!(first_seen, [1]);
    db.write(insert(2)).await.unwrap().unwrap();
    assert_eq!(
        keys(&db).await,
        [1, 2],
        "both committed, one not yet durable"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut durable)
            .await
            .is_err(),
        "not answered while its sync runs"
    );
    // Three more durable writes wait for the running sync, then share the next one.
    let more: Vec<_> = (3..6)
        .map(|k| {
            let d = db.clone();
            tokio::spawn(async move { d.write_durable(insert(k)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    open.send(()).unwrap();
    durable.await.unwrap().unwrap().unwrap();
    let second = tokio::task::spawn_blocking(move || found.recv().unwrap())
        .await
        .unwrap();
    assert_eq!(
        second,
        [1, 2, 3, 4, 5],
        "the second sync began after their commits"
    );
    open.send(()).unwrap();
    for write in more {
        write.await.unwrap().unwrap().unwrap();
    }
    assert_eq!(db.calls().syncs, 2, "four durable writes, two syncs");
    drop(db);
}

/// A durable write that announces its commit does so before its sync is done, and readers see
/// the row by then; its answer still waits for the sync. A write that failed announces nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_write_announces_its_commit_before_its_sync() {
    let (db, _dir, open, found) = gated_db("announced");
    let (announce, announced) = tokio::sync::mpsc::unbounded_channel();
    let d = db.clone();
    let mut durable = tokio::spawn(async move {
        let write = |c: &Connection| insert(1)(c).map(|()| "one".to_owned());
        let at_commit = move |v: &String| announce.send(v.clone()).unwrap();
        d.write_durable_and(write, at_commit).await
    });
    let mut announced = announced;
    let value = tokio::time::timeout(Duration::from_secs(5), announced.recv())
        .await
        .expect("announced with the sync still closed");
    assert_eq!(value.as_deref(), Some("one"));
    assert_eq!(
        keys(&db).await,
        [1],
        "readers see the row at its announcement"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut durable)
            .await
            .is_err(),
        "not answered while its sync runs"
    );
    assert_eq!(
        found.recv().unwrap(),
        [1],
        "the sync began after the commit"
    );
    open.send(()).unwrap();
    assert_eq!(durable.await.unwrap().unwrap().unwrap(), "one");

    // A closure that fails is rolled back and announces nothing (its answer still waits for
    // a sync, let through here).
    open.send(()).unwrap();
    let (announce, mut announced) = tokio::sync::mpsc::unbounded_channel();
    let at_commit = move |_: &()| announce.send(()).unwrap();
    let taken = db.write_durable_and(insert(1), at_commit).await.unwrap();
    assert!(taken.is_err(), "key 1 is taken");
    assert!(
        announced.recv().await.is_none(),
        "the hook was dropped uncalled"
    );
    drop(db);
}

/// A syncer whose first sync fails with EIO and whose later ones succeed, and how many it tried.
fn first_sync_fails() -> (SyncFn, Arc<AtomicU64>) {
    let tries = Arc::new(AtomicU64::new(0));
    let counted = tries.clone();
    let sync: SyncFn = Box::new(move || {
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            Err(std::io::Error::other("EIO"))
        } else {
            Ok(())
        }
    });
    (sync, tries)
}

/// A write that begins a sync is answered at its commit, while the sync it asked for has not
/// even finished: that sync began after the commit (it found the row), and a failed one still
/// refuses every durable write after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_begins_a_sync_is_answered_before_it() {
    let (db, _dir, open, found) = gated_db("then-sync");
    tokio::time::timeout(Duration::from_secs(5), db.write_then_sync(insert(1)))
        .await
        .expect("answered with the sync still closed")
        .unwrap()
        .unwrap();
    let found = tokio::task::spawn_blocking(move || {
        let first = found.recv().unwrap();
        (first, found)
    });
    let (first, found) = found.await.unwrap();
    assert_eq!(first, [1], "a sync began after its commit");
    assert_eq!(db.calls().syncs, 0, "and has not finished");
    // The gate opened for that sync and the next: a durable write after it is answered after a
    // sync of its own.
    open.send(()).unwrap();
    open.send(()).unwrap();
    db.write_durable(insert(2)).await.unwrap().unwrap();
    assert_eq!(db.calls().syncs, 2);
    assert_eq!(found.recv().unwrap(), [1, 2]);
    drop(db);

    // A failed sync, begun by such a write, refuses the durable writes after it, though the
    // write itself was answered with success at its commit.
    let (sync, tries) = first_sync_fails();
    let (db, _dir) = syncing_db("then-sync-fails", sync);
    db.write_then_sync(insert(1)).await.unwrap().unwrap();
    let begun = async {
        while tries.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), begun)
        .await
        .expect("the write began a sync");
    assert!(db.write_durable(insert(2)).await.is_err());
    assert_eq!(tries.load(Ordering::SeqCst), 1, "no sync trusted after it");
    drop(db);
}

/// A failed sync fails the durable writes it was for (committed already), and every durable
/// write after it, refused before its commit, even if a later sync would succeed (the kernel
/// may have dropped what it could not write); the database says it is broken; plain writes go
/// on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_fails_its_durable_writes_and_every_one_after() {
    let (sync, tries) = first_sync_fails();
    let (db, _dir) = syncing_db("sync-fails", sync);
    let failure = db.write_durable(insert(1)).await.unwrap_err().to_string();
    assert!(
        failure.contains("could not be synced") && failure.contains("EIO"),
        "{failure}"
    );
    assert!(db.broken().is_some_and(|why| why.contains("EIO")));
    db.write(insert(2)).await.unwrap().unwrap();
    assert!(
        db.write_durable(insert(3)).await.is_err(),
        "still refused after"
    );
    assert_eq!(
        tries.load(Ordering::SeqCst),
        1,
        "no sync is trusted after a failed one"
    );
    // The write whose sync failed had committed; one after is refused before it commits (a
    // tool's effect committed and reported as not done would be done again).
    assert_eq!(keys(&db).await, [1, 2]);
    drop(db);
}

/// `calls` counts each write and each read sent, and the commits that carried the writes; a
/// read on a database without readers runs on the writer and counts as a write.
#[tokio::test]
async fn calls_count_writes_reads_and_commits() {
    let (db, dir) = file_db("calls");
    assert_eq!(db.calls(), Calls::default());
    db.write(insert(1)).await.unwrap().unwrap();
    db.write_durable(insert(2)).await.unwrap().unwrap();
    assert_eq!(keys(&db).await, [1, 2]);
    let blocking =
        db.read_blocking(|c| c.query_row("SELECT count(*) FROM t", [], |r| r.get::<_, i64>(0)));
    assert_eq!(blocking.unwrap().unwrap(), 2);
    assert_eq!(
        db.calls(),
        Calls {
            writes: 2,
            reads: 2,
            commits: 2,
            syncs: 1
        }
    );
    drop(db);

    let conn = Connection::open(dir.path().join("t.db")).unwrap();
    let no_readers = Db::start(conn, Vec::new());
    assert_eq!(keys(&no_readers).await, [1, 2]);
    assert_eq!(
        no_readers.calls(),
        Calls {
            writes: 1,
            reads: 0,
            commits: 1,
            syncs: 0
        }
    );
    drop(no_readers);
}

/// How often `sql`, run five times from the statement cache with a new value bound each time,
/// was parsed and planned again after its first preparation.
fn reprepared(conn: &Connection, sql: &str) -> rusqlite::Result<i32> {
    for i in 0..5 {
        let mut stmt = conn.prepare_cached(sql)?;
        let n = stmt.parameter_count();
        let values: Vec<i64> = (0..n as i64).map(|p| i * 10 + p).collect();
        let rows = stmt.query_map(rusqlite::params_from_iter(values), |_| Ok(()))?;
        rows.collect::<rusqlite::Result<Vec<()>>>()?;
    }
    let stmt = conn.prepare_cached(sql)?;
    Ok(stmt.get_status(rusqlite::StatementStatus::RePrepare))
}

/// A cached statement stays prepared whatever is bound to it, on the writer, the readers and
/// an in-memory database: no query is parsed and planned on every use (as SQLite with STAT4
/// does for a plan that could depend on a bound value, unless told it may not).
#[tokio::test]
async fn cached_statements_are_not_prepared_again_for_new_values() {
    const SCHEMA: &str = "CREATE TABLE m (c INTEGER, p INTEGER, s INTEGER, PRIMARY KEY (c, p));
        CREATE INDEX m_by_segment ON m (c, s, p);
        INSERT INTO m VALUES (1, 1, 0), (1, 2, 0), (2, 1, 1);";
    const QUERIES: [&str; 2] = [
        "SELECT MAX(p) FROM m WHERE c = ?1",
        "SELECT p FROM m WHERE c = ?1 AND s = ?2 ORDER BY p",
    ];
    let check = |conn: &Connection| -> rusqlite::Result<Vec<i32>> {
        QUERIES.iter().map(|q| reprepared(conn, q)).collect()
    };
    let (file, _dir) = file_db("reprepare");
    file.exclusive(|c| c.execute_batch(SCHEMA))
        .unwrap()
        .unwrap();
    assert_eq!(file.write(check).await.unwrap().unwrap(), [0, 0], "writer");
    for _ in 0..READERS {
        assert_eq!(file.read(check).await.unwrap().unwrap(), [0, 0], "a reader");
    }
    drop(file);
    let memory = Db::open_in_memory().unwrap();
    memory
        .exclusive(|c| c.execute_batch(SCHEMA))
        .unwrap()
        .unwrap();
    assert_eq!(
        memory.read(check).await.unwrap().unwrap(),
        [0, 0],
        "in memory"
    );
}
