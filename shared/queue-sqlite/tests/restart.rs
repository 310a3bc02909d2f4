//! The queue file across a process kill (the queue dropped without any goodbye) and a reopen:
//! jobs, their order, receive counts, dead letters and dedupe keys are all kept.

mod common;

use common::{TempPath, full_job, ids, job};
use queue::{DeadLetter, Enqueued, JobQueue, QueueError, QueueSettings};
use queue_sqlite::SqliteQueue;
use std::time::Duration;

fn open(tmp: &TempPath, settings: QueueSettings) -> SqliteQueue {
    SqliteQueue::open(&tmp.0, settings).unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test]
async fn queued_jobs_are_delivered_in_order_after_a_restart() {
    let tmp = TempPath::new("restart-queued");
    {
        let q = open(&tmp, QueueSettings::default());
        for j in [job("A", "a1"), job("B", "b1"), job("A", "a2")] {
            assert_eq!(q.enqueue(&j).await.unwrap(), Enqueued::Accepted);
        }
    }

    let q = open(&tmp, QueueSettings::default());
    assert_eq!(q.depth().unwrap(), 3);
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a1", "b1"]);
    assert!(got.iter().all(|d| d.receive_count == 1), "{got:?}");
    for d in &got {
        q.ack(&d.receipt).await.unwrap();
    }
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a2"]);
    q.ack(&got[0].receipt).await.unwrap();
    assert_eq!(q.depth().unwrap(), 0);
}

#[tokio::test]
async fn an_in_flight_job_comes_back_first_after_a_restart() {
    let tmp = TempPath::new("restart-in-flight");
    let old_receipt = {
        let q = open(&tmp, QueueSettings::default());
        for j in [job("A", "a1"), job("A", "a2"), job("B", "b1")] {
            q.enqueue(&j).await.unwrap();
        }
        let got = q.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(ids(&got), ["a1"]);
        got[0].receipt.clone()
    };

    // The 15-minute visibility timeout is not waited out: the holder died with the process.
    let q = open(&tmp, QueueSettings::default());
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(
        ids(&got),
        ["a1", "b1"],
        "the in-flight job first in its group"
    );
    assert_eq!(got[0].receive_count, 2, "the lost delivery still counts");
    assert_eq!(got[1].receive_count, 1);
    let err = q.ack(&old_receipt).await.unwrap_err();
    assert!(matches!(err, QueueError::StaleReceipt), "{err:?}");

    q.ack(&got[0].receipt).await.unwrap();
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a2"]);
}

/// The operator's `bridle jobs dead` / `retry` open the queue beside the running server: its
/// jobs in flight stay with their worker, whose ack still counts, and are not delivered again.
#[tokio::test]
async fn the_queue_opened_beside_a_running_one_leaves_its_jobs_in_flight_alone() {
    let tmp = TempPath::new("beside-running");
    let q = open(&tmp, QueueSettings::default());
    for j in [job("A", "a1"), job("A", "a2"), job("B", "b1")] {
        q.enqueue(&j).await.unwrap();
    }
    let got = q.receive(1, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a1"]);
    let in_flight = got[0].receipt.clone();

    let beside = SqliteQueue::open_beside(&tmp.0, QueueSettings::default()).unwrap();
    assert_eq!(beside.dead_letters().unwrap(), Vec::<DeadLetter>::new());
    assert_eq!(beside.retry_dead(None).unwrap(), 0);
    drop(beside);

    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["b1"], "a1 is still in flight; its group waits");
    q.ack(&in_flight)
        .await
        .expect("the worker's ack of its job in flight still counts");
    q.ack(&got[0].receipt).await.unwrap();
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a2"]);
}

#[tokio::test]
async fn a_job_that_kills_the_process_every_time_is_dead_lettered() {
    let tmp = TempPath::new("restart-poison");
    let settings = QueueSettings {
        max_receives: 2,
        ..QueueSettings::default()
    };
    let poison = full_job("A", "a1");
    {
        let q = open(&tmp, settings);
        q.enqueue(&poison).await.unwrap();
        q.enqueue(&job("A", "a2")).await.unwrap();
    }
    for attempt in 1..=2 {
        let q = open(&tmp, settings);
        let got = q.receive(10, Duration::ZERO).await.unwrap();
        assert_eq!(ids(&got), ["a1"]);
        assert_eq!(got[0].receive_count, attempt);
    }

    let before = now_ms();
    let q = open(&tmp, settings);
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    let after = now_ms();
    assert_eq!(ids(&got), ["a2"], "the poison job must not stop its group");
    let dead = q.dead_letters().unwrap();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert!(
        (before..=after).contains(&dead[0].dead_at_ms),
        "dead_at_ms {} not in {before}..={after}",
        dead[0].dead_at_ms
    );
    assert_eq!(
        dead[0],
        DeadLetter {
            seq: dead[0].seq,
            job: poison,
            receive_count: 2,
            dead_at_ms: dead[0].dead_at_ms
        }
    );
}

#[tokio::test]
async fn dead_letters_are_listed_after_max_receives_and_kept_across_a_restart() {
    let tmp = TempPath::new("restart-dead-letters");
    let settings = QueueSettings {
        max_receives: 3,
        ..QueueSettings::default()
    };
    let q = open(&tmp, settings);
    assert_eq!(q.dead_letters().unwrap(), []);
    for j in [full_job("A", "a1"), job("A", "a2"), job("B", "b1")] {
        q.enqueue(&j).await.unwrap();
    }
    for round in 1..=3 {
        let got = q.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(ids(&got), ["a1"]);
        assert_eq!(got[0].receive_count, round);
        q.release(&got[0].receipt).await.unwrap();
    }
    assert_eq!(
        q.dead_letters().unwrap(),
        [],
        "not dead until the next receive"
    );

    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a2", "b1"]);
    let dead = q.dead_letters().unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].job, full_job("A", "a1"));
    assert_eq!(dead[0].receive_count, 3);
    assert_eq!(q.depth().unwrap(), 2, "a2 and b1, in flight");
    drop(q);

    let q = open(&tmp, settings);
    assert_eq!(q.dead_letters().unwrap(), dead);
    assert_eq!(q.depth().unwrap(), 2);
}

#[tokio::test]
async fn dedupe_keys_survive_a_restart() {
    let tmp = TempPath::new("restart-dedupe");
    {
        let q = open(&tmp, QueueSettings::default());
        q.enqueue(&job("A", "done")).await.unwrap();
        q.enqueue(&job("B", "queued")).await.unwrap();
        let got = q.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(ids(&got), ["done"]);
        q.ack(&got[0].receipt).await.unwrap();
    }

    let q = open(&tmp, QueueSettings::default());
    for j in [job("A", "done"), job("B", "queued")] {
        assert_eq!(
            q.enqueue(&j).await.unwrap(),
            Enqueued::Duplicate,
            "{} was seen before the restart",
            j.message_id
        );
    }
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["queued"], "one delivery only");
    q.ack(&got[0].receipt).await.unwrap();
    assert_eq!(q.depth().unwrap(), 0);
}

/// A queued job whose body this build cannot read (written by another build, edited by hand)
/// stops nothing: the receive that finds it moves it to the dead letters and hands out the next
/// job of its group and every other group's head. The dead letters say it cannot be read, and
/// putting them all back leaves it where it is.
#[tokio::test]
async fn an_unreadable_job_is_dead_lettered_and_stops_nothing() {
    let tmp = TempPath::new("restart-unreadable");
    {
        let q = open(&tmp, QueueSettings::default());
        for j in [
            job("A", "a1"),
            job("A", "a2"),
            job("B", "b1"),
            job("C", "c1"),
        ] {
            q.enqueue(&j).await.unwrap();
        }
    }
    let conn = rusqlite::Connection::open(&tmp.0).unwrap();
    let edited = conn
        .execute(
            "UPDATE queue_jobs SET body = '{\"not\": \"a job\"}'
             WHERE seq = (SELECT MIN(seq) FROM queue_jobs)",
            [],
        )
        .unwrap();
    assert_eq!(edited, 1);
    // And one whose text is not even UTF-8.
    let edited = conn
        .execute(
            "UPDATE queue_jobs SET body = CAST(x'ff7b' AS TEXT)
             WHERE seq = (SELECT MAX(seq) FROM queue_jobs)",
            [],
        )
        .unwrap();
    assert_eq!(edited, 1);
    drop(conn);

    let q = open(&tmp, QueueSettings::default());
    let got = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&got), ["a2", "b1"], "the group and the others go on");
    assert_eq!(q.dead_letters().unwrap(), []);
    let unreadable = q.unreadable_dead_letters().unwrap();
    assert_eq!(unreadable.len(), 2, "{unreadable:?}");
    assert_eq!(q.retry_dead(None).unwrap(), 0, "nothing that could run");
    assert_eq!(q.unreadable_dead_letters().unwrap(), unreadable, "kept");
    for seq in unreadable {
        let asked = q.retry_dead(Some(seq)).unwrap_err().to_string();
        assert!(asked.contains("corrupt"), "{asked}");
    }
}
