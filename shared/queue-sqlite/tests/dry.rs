//! After a receive that handed out every ready job, the next receive waits for a signal before
//! it looks (no write of the shared database for a look that must find nothing), and still
//! returns at once what is enqueued, acknowledged into readiness or timed out meanwhile.

mod common;

use common::{TempPath, job};
use queue::{JobQueue, QueueSettings};
use queue_sqlite::SqliteQueue;
use sqlite_db::Db;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn ids(got: &[queue::Delivery]) -> Vec<&str> {
    got.iter().map(|d| d.job.message_id.as_str()).collect()
}

#[tokio::test]
async fn a_receive_after_a_hand_out_waits_for_a_signal_and_misses_nothing() {
    let path = TempPath::new("dry");
    let db = Arc::new(Db::open(&path.0).unwrap());
    let settings = QueueSettings {
        visibility_timeout: Duration::from_millis(600),
        ..QueueSettings::default()
    };
    let q = Arc::new(SqliteQueue::on(db.clone(), settings).unwrap());
    q.enqueue(&job("A", "a1")).await.unwrap();
    q.enqueue(&job("A", "a2")).await.unwrap();
    let a1 = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&a1), ["a1"]);

    // Nothing was signalled since: the look is skipped (no write), and nothing is missed.
    let before = db.calls();
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty());
    assert_eq!(db.calls().writes, before.writes, "a look known to be empty");
    // Once only: the next receive looks again.
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty());
    assert_eq!(db.calls().writes, before.writes + 1, "the look after it");

    // A job of another group enqueued during a waiting receive comes at once.
    let b1 = q.receive(10, Duration::ZERO).await.unwrap();
    assert!(b1.is_empty());
    let waiting = tokio::spawn({
        let q = q.clone();
        async move { q.receive(10, Duration::from_secs(3)).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    let start = Instant::now();
    q.enqueue(&job("B", "b1")).await.unwrap();
    let got = waiting.await.unwrap();
    assert_eq!(ids(&got), ["b1"]);
    assert!(start.elapsed() < Duration::from_millis(500));
    q.ack(&got[0].receipt).await.unwrap();

    // Right after that hand-out (known empty again), the ack of a1 makes a2 ready: it comes.
    q.ack(&a1[0].receipt).await.unwrap();
    let a2 = q.receive(10, Duration::from_secs(3)).await.unwrap();
    assert_eq!(ids(&a2), ["a2"]);

    // Known empty after a2's hand-out, but a2 times out: a receive returns it, whether it asks
    // after the timeout or waits through it.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let again = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&again), ["a2"], "timed out before the receive asked");
    let start = Instant::now();
    let again = q.receive(10, Duration::from_secs(3)).await.unwrap();
    assert_eq!(ids(&again), ["a2"], "timed out while the receive waited");
    assert!(start.elapsed() < Duration::from_millis(1_500));

    // An ack that leaves its group empty signals nothing: a receive waiting after that
    // hand-out is not woken to look for nothing; it looks once, when its wait runs out.
    let before = db.calls();
    let waiting = tokio::spawn({
        let q = q.clone();
        async move { q.receive(10, Duration::from_millis(300)).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    q.ack(&again[0].receipt).await.unwrap();
    assert!(waiting.await.unwrap().is_empty());
    assert_eq!(
        db.calls().writes,
        before.writes + 2,
        "the ack, and one look when the wait ran out"
    );
    assert_eq!(q.depth().unwrap(), 0);
}
