//! `JobQueue`: enqueue with dedupe, the long poll around [`SqliteQueue::deliver`], ack and
//! release.

use crate::Dry;
use crate::deliver::{Batch, hand_out_new};
use crate::error::unavailable;
use crate::{SqliteQueue, millis, now_ms};
use async_trait::async_trait;
use queue::{Delivery, Enqueued, JobQueue, QueueError, TurnJob};
use rusqlite::{OptionalExtension, params};
use std::pin::pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A waiting receive and the job an enqueue handed out to it.
type Handed = (oneshot::Sender<Delivery>, Delivery);

/// The longest a long poll sleeps without looking at the table again: a guard against a clock
/// that jumped, since new work is signalled and timeouts are computed.
const RECHECK: Duration = Duration::from_secs(5);

#[async_trait]
impl JobQueue for SqliteQueue {
    async fn enqueue(&self, job: &TurnJob) -> Result<Enqueued, QueueError> {
        let body = serde_json::to_string(job).map_err(|e| QueueError::Rejected {
            reason: format!("the job does not encode as JSON: {e}"),
        })?;
        self.enqueue_now(job, body).await
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        if max == 0 {
            return Ok(Vec::new());
        }
        let deadline = Instant::now().checked_add(wait);
        loop {
            // Jobs handed over to a receive that had stopped waiting.
            let stashed = self.handover.stashed(max);
            if !stashed.is_empty() {
                return Ok(stashed);
            }
            // Registered before looking, so a signal sent while we look is not missed.
            let mut signalled = pin!(self.work.ready.notified());
            signalled.as_mut().enable();
            let seen = self.work.changes.load(Ordering::SeqCst);
            // Known empty (the last hand-out took every ready job and nothing was signalled
            // since): wait for a signal first. Taken once, so a nap that ends unsignalled looks.
            let dry =
                self.dry.lock().unwrap().take().filter(|d| {
                    d.at == seen && d.next_visible_at_ms.is_none_or(|at| at > now_ms())
                });
            let batch = match dry {
                Some(dry) => Batch {
                    deliveries: Vec::new(),
                    next_visible_at_ms: dry.next_visible_at_ms,
                },
                None => self.deliver(max).await?,
            };
            if !batch.deliveries.is_empty() && batch.deliveries.len() < max {
                *self.dry.lock().unwrap() = Some(Dry {
                    at: seen,
                    next_visible_at_ms: batch.next_visible_at_ms,
                });
            }
            let now = Instant::now();
            if !batch.deliveries.is_empty() || deadline.is_some_and(|d| d <= now) {
                return Ok(batch.deliveries);
            }
            let mut nap = RECHECK;
            if let Some(deadline) = deadline {
                nap = nap.min(deadline - now);
            }
            if let Some(at) = batch.next_visible_at_ms {
                let until = u64::try_from(at.saturating_sub(now_ms())).unwrap_or(0);
                nap = nap.min(Duration::from_millis(until.max(1)));
            }
            // Wait for a signal, a job handed over by its enqueue, or the nap's end. A job
            // handed over as something else woke the wait is taken all the same (dropped with
            // the line's place, it would stay in flight with nobody working on it).
            let mut waiting = self.handover.wait();
            let handed = tokio::select! {
                biased;
                handed = &mut waiting.job => handed.ok(),
                _ = signalled => waiting.job.try_recv().ok(),
                _ = tokio::time::sleep(nap) => waiting.job.try_recv().ok(),
            };
            if let Some(delivery) = handed {
                // Nothing was signalled for it: unless something else was, the next receive
                // need not look either, until a job in flight (this one included) becomes
                // visible again.
                let back = now_ms().saturating_add(millis(self.settings.visibility_timeout));
                *self.dry.lock().unwrap() = Some(Dry {
                    at: seen,
                    next_visible_at_ms: Some(
                        batch.next_visible_at_ms.map_or(back, |at| at.min(back)),
                    ),
                });
                return Ok(vec![delivery]);
            }
        }
    }

    async fn ack(&self, receipt: &str) -> Result<(), QueueError> {
        let receipt = receipt.to_owned();
        // Whether the job was there, and whether its group has another waiting (which it held
        // back, so it may be ready now).
        let (deleted, more) = self
            .write(move |conn| {
                let group: Option<String> = conn
                    .prepare_cached("DELETE FROM queue_jobs WHERE receipt = ?1 RETURNING group_key")
                    .map_err(unavailable)?
                    .query_row([receipt], |row| row.get(0))
                    .optional()
                    .map_err(unavailable)?;
                let Some(group) = group else {
                    return Ok((false, false));
                };
                let more: bool = conn
                    .prepare_cached("SELECT EXISTS (SELECT 1 FROM queue_jobs WHERE group_key = ?1)")
                    .map_err(unavailable)?
                    .query_row([group], |row| row.get(0))
                    .map_err(unavailable)?;
                Ok((true, more))
            })
            .await?;
        if !deleted {
            return Err(QueueError::StaleReceipt);
        }
        if more {
            self.signal();
        }
        Ok(())
    }

    async fn release_after(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        let (receipt, at) = (receipt.to_owned(), now_ms() + delay.as_millis() as i64);
        let released = self
            .write(move |conn| {
                conn.prepare_cached(
                    "UPDATE queue_jobs SET receipt = NULL, visible_at_ms = ?2 WHERE receipt = ?1",
                )
                .map_err(unavailable)?
                .execute(params![receipt, at])
                .map_err(unavailable)
            })
            .await?;
        if released == 0 {
            return Err(QueueError::StaleReceipt);
        }
        self.signal();
        Ok(())
    }

    async fn put_back(&self, receipt: &str) -> Result<(), QueueError> {
        let receipt = receipt.to_owned();
        let put_back = self
            .write(move |conn| {
                conn.prepare_cached(
                    "UPDATE queue_jobs SET receipt = NULL, visible_at_ms = ?2,
                         receive_count = MAX(receive_count - 1, 0)
                     WHERE receipt = ?1",
                )
                .map_err(unavailable)?
                .execute(params![receipt, now_ms()])
                .map_err(unavailable)
            })
            .await?;
        if put_back == 0 {
            return Err(QueueError::StaleReceipt);
        }
        self.signal();
        Ok(())
    }
}

impl SqliteQueue {
    /// Queue `job` (encoded as `body`) unless its dedupe key is remembered; remember it for the
    /// dedupe window from now. Forgets expired keys on the way. One write of the shared
    /// database, acknowledged only once it survives power loss: the caller tells a client (the
    /// `queued` event, a webhook's 200). A waiting receive is woken at the commit, so the turn
    /// runs while the sync does (a job handed out before its enqueue is durable is the window
    /// `sqlite-db`'s docs describe: a power loss loses it with nothing acknowledged).
    async fn enqueue_now(&self, job: &TurnJob, body: String) -> Result<Enqueued, QueueError> {
        let now = now_ms();
        let (group, dedupe_key) = (job.group(), job.dedupe_key());
        let expires = now.saturating_add(millis(self.settings.dedupe_window));
        let (work, handover, settings) = (self.work.clone(), self.handover.clone(), self.settings);
        // A waiting receive taken out of the line, and the job handed out to it, for the commit.
        let handed: Arc<Mutex<Option<Handed>>> = Arc::default();
        let to_give = handed.clone();
        let at_commit = {
            let handover = handover.clone();
            move |outcome: &Enqueued| match to_give.lock().unwrap().take() {
                Some((waiter, delivery)) => handover.give(waiter, delivery, &work),
                None if *outcome == Enqueued::Accepted => work.signal(),
                None => {}
            }
        };
        self.write_durable_and(at_commit, move |tx| {
            tx.prepare_cached("DELETE FROM queue_dedupe WHERE expires_at_ms <= ?1")
                .map_err(unavailable)?
                .execute([now])
                .map_err(unavailable)?;
            let fresh = tx
                .prepare_cached(
                    "INSERT INTO queue_dedupe (dedupe_key, expires_at_ms) VALUES (?1, ?2)
                     ON CONFLICT (dedupe_key) DO NOTHING",
                )
                .map_err(unavailable)?
                .execute(params![dedupe_key, expires])
                .map_err(unavailable)?;
            if fresh == 0 {
                return Ok(Enqueued::Duplicate);
            }
            tx.prepare_cached(
                "INSERT INTO queue_jobs
                    (group_key, dedupe_key, body, visible_at_ms, receipt, receive_count, enqueued_at_ms)
                 VALUES (?1, ?2, ?3, ?4, NULL, 0, ?4)",
            )
            .map_err(unavailable)?
            .execute(params![group, dedupe_key, body, now])
            .map_err(unavailable)?;
            let seq = tx.last_insert_rowid();
            if handover.anyone_waiting()
                && alone_in_group(tx, &group, seq)?
                && let Some(waiter) = handover.take_waiter()
            {
                let delivery = hand_out_new(tx, &settings, seq, group, now)?;
                *handed.lock().unwrap() = Some((waiter, delivery));
            }
            Ok(Enqueued::Accepted)
        })
        .await
    }
}

/// Whether job `seq` is the only one of `group`: its head, with nothing of it in flight.
fn alone_in_group(tx: &rusqlite::Connection, group: &str, seq: i64) -> Result<bool, QueueError> {
    tx.prepare_cached(
        "SELECT NOT EXISTS (SELECT 1 FROM queue_jobs WHERE group_key = ?1 AND seq <> ?2)",
    )
    .map_err(unavailable)?
    .query_row(params![group, seq], |row| row.get(0))
    .map_err(unavailable)
}
