//! What the port does not cover: sharing a file with the store, schema versions, dedupe
//! expiry, rows this build cannot read.

mod common;

use common::{TempPath, ids, job};
use queue::{Enqueued, JobQueue, QueueError, QueueSettings};
use queue_sqlite::{SCHEMA_VERSION, SchemaTooNew, SqliteQueue};
use rusqlite::Connection;
use std::time::Duration;

fn user_version(conn: &Connection) -> u32 {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_file_shared_with_the_store_keeps_the_stores_schema() {
    let tmp = TempPath::new("shared");
    {
        let conn = Connection::open(&tmp.0).unwrap();
        conn.execute_batch(
            "CREATE TABLE conversations (id TEXT PRIMARY KEY);
             INSERT INTO conversations VALUES ('conv-a');
             PRAGMA user_version = 7;",
        )
        .unwrap();
    }
    for _ in 0..2 {
        let q = SqliteQueue::open(&tmp.0, QueueSettings::default()).unwrap();
        q.enqueue(&job("A", "a1")).await.unwrap();
    }

    let conn = Connection::open(&tmp.0).unwrap();
    assert_eq!(
        user_version(&conn),
        7,
        "the store's version must be untouched"
    );
    let queue_version: u32 = conn
        .query_row("SELECT version FROM queue_schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(queue_version, SCHEMA_VERSION);
    let conversations: i64 = conn
        .query_row("SELECT COUNT(*) FROM conversations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(conversations, 1);
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn queue_tables_from_a_newer_build_are_refused_and_left_alone() {
    let tmp = TempPath::new("newer");
    drop(SqliteQueue::open(&tmp.0, QueueSettings::default()).unwrap());
    let newer = SCHEMA_VERSION + 1;
    Connection::open(&tmp.0)
        .unwrap()
        .execute("UPDATE queue_schema_version SET version = ?1", [newer])
        .unwrap();

    let err = SqliteQueue::open(&tmp.0, QueueSettings::default()).unwrap_err();
    let QueueError::Unavailable(source) = &err else {
        panic!("expected Unavailable, got {err:?}");
    };
    assert_eq!(
        source.downcast_ref::<SchemaTooNew>(),
        Some(&SchemaTooNew {
            found: newer,
            known: SCHEMA_VERSION
        })
    );
    assert!(
        source.to_string().contains("newer than this build"),
        "{source}"
    );
}

#[tokio::test]
async fn a_dedupe_key_is_forgotten_after_the_window() {
    let window = Duration::from_millis(200);
    let q = SqliteQueue::open_in_memory(QueueSettings {
        dedupe_window: window,
        ..QueueSettings::default()
    })
    .unwrap();
    let a1 = job("A", "a1");
    assert_eq!(q.enqueue(&a1).await.unwrap(), Enqueued::Accepted);
    assert_eq!(q.enqueue(&a1).await.unwrap(), Enqueued::Duplicate);

    tokio::time::sleep(window + Duration::from_millis(100)).await;
    assert_eq!(
        q.enqueue(&a1).await.unwrap(),
        Enqueued::Accepted,
        "past the window, the same key is a new job"
    );
    assert_eq!(q.depth().unwrap(), 2);
}

/// A job whose body cannot be read is not run, nor does it stop the queue: the receive that
/// finds it moves it to the dead letters, where it is named unreadable (never lost); once the
/// operator mends the row, putting it back delivers it, with a fresh receive count.
#[tokio::test]
async fn an_undecodable_job_is_dead_lettered_and_mended_by_hand() {
    let tmp = TempPath::new("corrupt");
    let q = SqliteQueue::open(&tmp.0, QueueSettings::default()).unwrap();
    q.enqueue(&job("A", "a1")).await.unwrap();
    Connection::open(&tmp.0)
        .unwrap()
        .execute("UPDATE queue_jobs SET body = '{not json'", [])
        .unwrap();

    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(q.depth().unwrap(), 0);
    assert_eq!(q.unreadable_dead_letters().unwrap(), [1]);

    Connection::open(&tmp.0)
        .unwrap()
        .execute(
            "UPDATE queue_dead_letters SET body = ?1",
            [serde_json::to_string(&job("A", "a1")).unwrap()],
        )
        .unwrap();
    assert_eq!(q.retry_dead(Some(1)).unwrap(), 1);
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a1"]);
    assert_eq!(got[0].receive_count, 1, "a fresh receive count");
}

/// An enqueue wakes a waiting receive at its commit: the job is handed out while the enqueue's
/// sync is still running, and the enqueue itself is answered only once that sync is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_receive_gets_the_job_before_its_enqueue_is_durable() {
    let tmp = TempPath::new("woken-at-commit");
    let writer = Connection::open(&tmp.0).unwrap();
    writer
        .pragma_update_and_check(None, "journal_mode", "wal", |_| Ok(()))
        .unwrap();
    let reader = Connection::open(&tmp.0).unwrap();
    // Each sync waits for the test to let it through.
    let (let_through, gate) = std::sync::mpsc::channel::<()>();
    let sync = move || gate.recv().map_err(std::io::Error::other);
    let db = std::sync::Arc::new(sqlite_db::Db::start_syncing_with(
        writer,
        vec![reader],
        sync,
    ));
    let q = std::sync::Arc::new(SqliteQueue::on(db.clone(), QueueSettings::default()).unwrap());

    let waiting = tokio::spawn({
        let q = q.clone();
        async move { q.receive(1, Duration::from_secs(5)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut enqueue = tokio::spawn({
        let q = q.clone();
        async move { q.enqueue(&job("A", "a1")).await }
    });
    let got = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("handed out with the sync held")
        .unwrap()
        .unwrap();
    assert_eq!(ids(&got), ["a1"]);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut enqueue)
            .await
            .is_err(),
        "the enqueue is not acknowledged before its sync"
    );
    let_through.send(()).unwrap();
    assert_eq!(enqueue.await.unwrap().unwrap(), Enqueued::Accepted);

    // A duplicate wakes nobody: the receive waiting (it looked once and found the group in
    // flight) does not look again.
    let waiting = tokio::spawn({
        let q = q.clone();
        async move { q.receive(1, Duration::from_millis(400)).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = db.calls().writes;
    let_through.send(()).unwrap();
    assert_eq!(
        q.enqueue(&job("A", "a1")).await.unwrap(),
        Enqueued::Duplicate
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(db.calls().writes - before, 1, "the enqueue's write alone");
    assert!(waiting.await.unwrap().unwrap().is_empty());
}
