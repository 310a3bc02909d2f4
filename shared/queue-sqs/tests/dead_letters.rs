//! The dead-letter queue for an operator, against moto's SQS: jobs whose receives are spent are
//! listed with their jobs and moved back to the queue (one, then all), in order, to run again.

mod common;

use common::{TestQueue, ids, job};
use queue::{JobQueue, QueueSettings};
use queue_sqs::{dead_letters, redrive};
use std::time::Duration;

/// A queue whose jobs go to the dead letters after one receive, with jobs `A1`, `A2` (one
/// conversation) and `B1` (another) dead in it.
async fn three_dead_jobs() -> TestQueue {
    let q = TestQueue::new(QueueSettings {
        max_receives: 1,
        ..QueueSettings::default()
    })
    .await;
    for (group, id) in [("A", "A1"), ("A", "A2"), ("B", "B1")] {
        q.enqueue(&job(group, id)).await.unwrap();
    }
    // Each delivery is released once; the next receive finds its count spent.
    for _ in 0..3 {
        for d in q.receive(10, Duration::ZERO).await.unwrap() {
            q.release(&d.receipt).await.unwrap();
        }
    }
    assert!(q.receive(10, Duration::ZERO).await.unwrap().is_empty());
    q
}

fn dead_ids(view: &queue_sqs::DeadLetterView) -> Vec<String> {
    let mut ids: Vec<String> = view
        .messages
        .iter()
        .map(|m| m.job.as_ref().unwrap().message_id.clone())
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn dead_jobs_are_listed_and_a_look_leaves_them_in_place() {
    let q = three_dead_jobs().await;
    let view = dead_letters(&q.client, &q.dlq_url).await.unwrap();
    assert_eq!(dead_ids(&view), ["A1", "A2", "B1"]);
    assert_eq!(view.more, 0);
    assert!(view.messages.iter().all(|m| m.receive_count >= 1));
    assert!(view.messages.iter().all(|m| !m.message_id.is_empty()));
    // Looking again sees the same: the look showed them again at once.
    let again = dead_letters(&q.client, &q.dlq_url).await.unwrap();
    assert_eq!(dead_ids(&again), ["A1", "A2", "B1"]);
}

#[tokio::test]
async fn one_dead_job_then_all_go_back_to_the_queue_in_order() {
    let q = three_dead_jobs().await;
    let view = dead_letters(&q.client, &q.dlq_url).await.unwrap();
    let b1 = view
        .messages
        .iter()
        .find(|m| m.job.as_ref().unwrap().message_id == "B1")
        .unwrap();

    let moved = redrive(&q.client, &q.dlq_url, &q.queue_url, Some(&b1.message_id))
        .await
        .unwrap();
    assert_eq!(moved, 1);
    let left = dead_letters(&q.client, &q.dlq_url).await.unwrap();
    assert_eq!(dead_ids(&left), ["A1", "A2"]);
    let back = q.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(ids(&back), ["B1"]);
    assert_eq!(
        back[0].receive_count, 1,
        "a fresh message: counted from one"
    );
    q.ack(&back[0].receipt).await.unwrap();

    let unknown = redrive(&q.client, &q.dlq_url, &q.queue_url, Some("no-such-id"))
        .await
        .unwrap();
    assert_eq!(unknown, 0);

    let all = redrive(&q.client, &q.dlq_url, &q.queue_url, None)
        .await
        .unwrap();
    assert_eq!(all, 2);
    assert!(
        dead_letters(&q.client, &q.dlq_url)
            .await
            .unwrap()
            .messages
            .is_empty()
    );
    let mut order = Vec::new();
    for _ in 0..2 {
        let got = q.receive(10, Duration::ZERO).await.unwrap();
        order.extend(ids(&got).into_iter().map(str::to_owned));
        for d in got {
            q.ack(&d.receipt).await.unwrap();
        }
    }
    assert_eq!(order, ["A1", "A2"], "the conversation's order is kept");
}
