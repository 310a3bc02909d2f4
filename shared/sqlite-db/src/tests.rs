use super::*;
use std::time::Duration;

/// A file database with one table, in a fresh directory (removed by the caller).
fn file_db(name: &str) -> (Arc<Db>, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("sqlite-db-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = Db::open(dir.join("t.db")).unwrap();
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
    let (db, dir) = file_db("batch");
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
    let _ = std::fs::remove_dir_all(dir);
}

/// A panicking write rolls back its own changes, is resumed in its caller, and the writer goes
/// on serving.
#[tokio::test]
async fn a_panicking_write_is_rolled_back_and_the_writer_goes_on() {
    let (db, dir) = file_db("panic");
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
    let _ = std::fs::remove_dir_all(dir);
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
    let again = Db::open(dir.join("t.db")).unwrap();
    assert_eq!(keys(&again).await, vec![5]);
    drop(again);
    let _ = std::fs::remove_dir_all(dir);
}

/// A batch whose commit fails answers every write of it with the failure, and leaves none of
/// them in the file. The commit is made to fail by a deferred foreign key that the whole batch
/// leaves broken (SQLite checks those at COMMIT, not at the statement).
#[tokio::test]
async fn a_failed_commit_fails_every_write_of_its_batch() {
    let (db, dir) = file_db("commit");
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
    let innocent = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        db2.write(insert(3)).await
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
    db.write(insert(4)).await.unwrap().unwrap();
    assert_eq!(
        keys(&db).await,
        vec![4],
        "the writer goes on after a failed commit"
    );
    drop(db);
    let _ = std::fs::remove_dir_all(dir);
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

/// A plain write commits with NORMAL, a durable one with FULL, and a batch that carries a
/// durable write among plain ones commits FULL for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_batch_commits_full_when_any_write_in_it_is_durable() {
    let (db, dir) = file_db("strength");
    assert_eq!(db.write(synchronous).await.unwrap().unwrap(), 1, "plain");
    assert_eq!(
        db.write_durable(synchronous).await.unwrap().unwrap(),
        2,
        "durable"
    );
    assert_eq!(
        db.write(synchronous).await.unwrap().unwrap(),
        1,
        "plain again"
    );
    // Hold the writer so a plain and a durable write share the next batch.
    let busy = db.write(|_| {
        std::thread::sleep(Duration::from_millis(200));
        Ok::<_, rusqlite::Error>(())
    });
    let (d1, d2) = (db.clone(), db.clone());
    let plain = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        d1.write(synchronous).await
    });
    let durable = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        d2.write_durable(synchronous).await
    });
    busy.await.unwrap().unwrap();
    assert_eq!(
        plain.await.unwrap().unwrap().unwrap(),
        2,
        "the plain write rode a FULL commit"
    );
    assert_eq!(durable.await.unwrap().unwrap().unwrap(), 2);
    drop(db);
    let _ = std::fs::remove_dir_all(dir);
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
            commits: 2
        }
    );
    drop(db);

    let conn = Connection::open(dir.join("t.db")).unwrap();
    let no_readers = Db::start(conn, Vec::new());
    assert_eq!(keys(&no_readers).await, [1, 2]);
    assert_eq!(
        no_readers.calls(),
        Calls {
            writes: 1,
            reads: 0,
            commits: 1
        }
    );
    drop(no_readers);
    let _ = std::fs::remove_dir_all(&dir);
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
    let (file, dir) = file_db("reprepare");
    file.exclusive(|c| c.execute_batch(SCHEMA))
        .unwrap()
        .unwrap();
    assert_eq!(file.write(check).await.unwrap().unwrap(), [0, 0], "writer");
    for _ in 0..READERS {
        assert_eq!(file.read(check).await.unwrap().unwrap(), [0, 0], "a reader");
    }
    drop(file);
    let _ = std::fs::remove_dir_all(dir);
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
