//! An enqueue that finds a receive waiting hands its job over in its own write, when FIFO
//! allows it (nothing else of its group queued or in flight); a job handed over is delivered
//! like any other: acknowledged by its receipt, and after a crash delivered again.

mod common;

use common::{TempPath, ids, job};
use queue::{JobQueue, QueueSettings};
use queue_sqlite::SqliteQueue;
use sqlite_db::Db;
use std::sync::Arc;
use std::time::Duration;

fn queue_on(path: &TempPath) -> (Arc<Db>, Arc<SqliteQueue>) {
    let db = Arc::new(Db::open(&path.0).unwrap());
    let q = Arc::new(SqliteQueue::on(db.clone(), QueueSettings::default()).unwrap());
    (db, q)
}

/// A receive of up to 10 jobs, waiting up to `wait`, started now and waiting once this returns.
async fn waiting_receive(
    q: &Arc<SqliteQueue>,
    wait: Duration,
) -> tokio::task::JoinHandle<Vec<queue::Delivery>> {
    let handle = tokio::spawn({
        let q = q.clone();
        async move { q.receive(10, wait).await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    handle
}

#[tokio::test]
async fn a_waiting_receive_is_handed_the_job_in_the_enqueues_own_write() {
    let path = TempPath::new("handover");
    let (db, q) = queue_on(&path);
    // The first receive looks (one write) and finds nothing.
    let waiting = waiting_receive(&q, Duration::from_secs(5)).await;
    let before = db.calls().writes;
    q.enqueue(&job("A", "a1")).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("handed over at once")
        .unwrap();
    assert_eq!(ids(&got), ["a1"]);
    assert_eq!(got[0].receive_count, 1);
    assert_eq!(
        db.calls().writes - before,
        1,
        "the enqueue's write alone: the receive wrote nothing"
    );
    // In flight like any delivered job: not delivered again, then acknowledged by its receipt.
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty());
    q.ack(&got[0].receipt).await.unwrap();
    assert_eq!(q.depth().unwrap(), 0);
}

#[tokio::test]
async fn a_job_behind_another_of_its_group_is_not_handed_over() {
    let path = TempPath::new("handover-fifo");
    let (_db, q) = queue_on(&path);
    q.enqueue(&job("A", "a1")).await.unwrap();
    let a1 = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&a1), ["a1"]);
    // a1 is in flight: a2, of the same conversation, waits for it; b1 of another goes at once.
    let waiting = waiting_receive(&q, Duration::from_millis(300)).await;
    q.enqueue(&job("A", "a2")).await.unwrap();
    assert!(
        waiting.await.unwrap().is_empty(),
        "a2 is not handed over while a1 is in flight"
    );
    let waiting = waiting_receive(&q, Duration::from_secs(5)).await;
    q.enqueue(&job("B", "b1")).await.unwrap();
    assert_eq!(ids(&waiting.await.unwrap()), ["b1"]);
    q.ack(&a1[0].receipt).await.unwrap();
    assert_eq!(ids(&q.receive(10, Duration::ZERO).await.unwrap()), ["a2"]);
}

#[tokio::test]
async fn a_job_handed_over_to_a_process_that_died_is_delivered_again_on_restart() {
    let path = TempPath::new("handover-crash");
    {
        let (_db, q) = queue_on(&path);
        let waiting = waiting_receive(&q, Duration::from_secs(5)).await;
        q.enqueue(&job("A", "a1")).await.unwrap();
        assert_eq!(ids(&waiting.await.unwrap()), ["a1"]);
        // The process dies with a1 handed over and not acknowledged.
    }
    let (_db, q) = queue_on(&path);
    assert_eq!(q.recovered(), ["web#a1"]);
    let again = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&again), ["a1"]);
    assert_eq!(again[0].receive_count, 2, "its receive count is kept");
}

#[tokio::test]
async fn a_receive_that_gave_up_as_its_job_came_leaves_it_for_the_next() {
    let path = TempPath::new("handover-left");
    let (_db, q) = queue_on(&path);
    // Receives that stop waiting again and again while jobs are enqueued: whatever was handed
    // to one that had left is taken by a later one; nothing is lost or delivered twice.
    let mut seen = Vec::new();
    for i in 0..40 {
        let waiting = tokio::spawn({
            let q = q.clone();
            async move { q.receive(10, Duration::from_millis(1)).await.unwrap() }
        });
        let group = format!("g{i}");
        q.enqueue(&job(&group, &format!("m{i}"))).await.unwrap();
        for d in waiting.await.unwrap() {
            seen.push(d.job.message_id.clone());
            q.ack(&d.receipt).await.unwrap();
        }
    }
    loop {
        let got = q.receive(10, Duration::from_millis(100)).await.unwrap();
        if got.is_empty() {
            break;
        }
        for d in got {
            seen.push(d.job.message_id.clone());
            q.ack(&d.receipt).await.unwrap();
        }
    }
    seen.sort();
    let mut want: Vec<String> = (0..40).map(|i| format!("m{i}")).collect();
    want.sort();
    assert_eq!(seen, want);
    assert_eq!(q.depth().unwrap(), 0);
}
