//! One receive: in a single transaction, the head of each group that is not in flight, oldest
//! first, redelivered or dead-lettered as its receive count says.

use crate::error::{count, unavailable};
use crate::{SqliteQueue, millis, now_ms};
use queue::{Delivery, QueueError, QueueSettings};
use rusqlite::{Connection, OptionalExtension, Row, params};

/// What one receive found.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) deliveries: Vec<Delivery>,
    /// When the earliest in-flight head (one handed out just now included) becomes visible
    /// again, if any.
    pub(crate) next_visible_at_ms: Option<i64>,
}

/// A group's oldest job.
#[derive(Debug)]
struct Head {
    seq: i64,
    group_key: String,
    visible_at_ms: i64,
    receive_count: i64,
}

impl Head {
    fn from_row(row: &Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            seq: row.get(0)?,
            group_key: row.get(1)?,
            visible_at_ms: row.get(2)?,
            receive_count: row.get(3)?,
        })
    }
}

const HEAD_COLUMNS: &str = "seq, group_key, visible_at_ms, receive_count";

impl SqliteQueue {
    /// Up to `max` deliveries, ready now; never waits. One write of the shared database: the
    /// receipts it hands out are durable before any caller sees them.
    pub(crate) async fn deliver(&self, max: usize) -> Result<Batch, QueueError> {
        let settings = self.settings;
        self.write(move |conn| deliver(conn, &settings, max)).await
    }
}

fn deliver(conn: &Connection, settings: &QueueSettings, max: usize) -> Result<Batch, QueueError> {
    let now = now_ms();
    let mut batch = Batch::default();
    for head in heads(conn)? {
        if batch.deliveries.len() >= max {
            break;
        }
        let mut head = Some(head);
        while let Some(h) = head.take() {
            if h.visible_at_ms > now {
                let next = batch.next_visible_at_ms.get_or_insert(h.visible_at_ms);
                *next = (*next).min(h.visible_at_ms);
            } else if h.receive_count >= i64::from(settings.max_receives) {
                bury(conn, h.seq, now)?;
                head = next_in_group(conn, &h.group_key)?;
            } else if let Some(delivery) = hand_out(conn, settings, &h, now)? {
                batch.deliveries.push(delivery);
                // In flight now: visible again after the timeout, unless acknowledged.
                let back = now.saturating_add(millis(settings.visibility_timeout));
                let next = batch.next_visible_at_ms.get_or_insert(back);
                *next = (*next).min(back);
            } else {
                // A body this build cannot read (written by another build, edited by hand):
                // no worker could run it, and left at its group's head it would be read again
                // at every receive. Kept in the dead letters for the operator; the group goes
                // on.
                bury(conn, h.seq, now)?;
                head = next_in_group(conn, &h.group_key)?;
            }
        }
    }
    Ok(batch)
}

/// Stamp `head` with a fresh receipt and hide it for the visibility timeout; `None` (and an
/// error logged for the operator) when its body cannot be read.
fn hand_out(
    conn: &Connection,
    settings: &QueueSettings,
    head: &Head,
    now: i64,
) -> Result<Option<Delivery>, QueueError> {
    let receipt = uuid::Uuid::new_v4().to_string();
    let visible_at = now.saturating_add(millis(settings.visibility_timeout));
    // Its bytes, whatever they are (text that is not UTF-8 is unreadable, not an outage).
    let body: Vec<u8> = conn
        .prepare_cached(
            "UPDATE queue_jobs
             SET receipt = ?2, visible_at_ms = ?3, receive_count = receive_count + 1
             WHERE seq = ?1
             RETURNING body",
        )
        .map_err(unavailable)?
        .query_row(params![head.seq, receipt, visible_at], |row| {
            Ok(crate::body_bytes(row.get_ref(0)?))
        })
        .map_err(unavailable)?;
    let what = || format!("job {}", head.seq);
    let read = crate::decode_bytes(&body, what)
        .and_then(|job| Ok((job, count(head.receive_count + 1, what)?)));
    match read {
        Ok((job, receive_count)) => Ok(Some(Delivery {
            receipt,
            job,
            receive_count,
        })),
        Err(err) => {
            tracing::error!(error = %err, source = ?std::error::Error::source(&err), "a queued job this build cannot read is moved to the dead letters");
            Ok(None)
        }
    }
}

/// Hand out job `seq` of `group`, just enqueued at `now` (so never delivered before).
pub(crate) fn hand_out_new(
    conn: &Connection,
    settings: &QueueSettings,
    seq: i64,
    group: String,
    now: i64,
) -> Result<Delivery, QueueError> {
    let head = Head {
        seq,
        group_key: group,
        visible_at_ms: now,
        receive_count: 0,
    };
    // Its body was written just now, by this build.
    hand_out(conn, settings, &head, now)?.ok_or_else(|| {
        crate::error::corrupt(format!("job {seq}"), "unreadable just after it was written")
    })
}

/// The oldest job of every group, oldest first.
fn heads(tx: &Connection) -> Result<Vec<Head>, QueueError> {
    let mut stmt = tx
        .prepare_cached(&format!(
            "SELECT {HEAD_COLUMNS} FROM queue_jobs
             WHERE seq IN (SELECT MIN(seq) FROM queue_jobs GROUP BY group_key)
             ORDER BY seq"
        ))
        .map_err(unavailable)?;
    let rows = stmt.query_map([], Head::from_row).map_err(unavailable)?;
    rows.map(|row| row.map_err(unavailable)).collect()
}

/// The oldest job left in `group`.
fn next_in_group(tx: &Connection, group: &str) -> Result<Option<Head>, QueueError> {
    tx.prepare_cached(&format!(
        "SELECT {HEAD_COLUMNS} FROM queue_jobs WHERE group_key = ?1 ORDER BY seq LIMIT 1"
    ))
    .map_err(unavailable)?
    .query_row([group], Head::from_row)
    .optional()
    .map_err(unavailable)
}

/// Move job `seq` to the dead letters.
fn bury(tx: &Connection, seq: i64, now: i64) -> Result<(), QueueError> {
    tx.prepare_cached(
        "INSERT INTO queue_dead_letters (seq, body, receive_count, dead_at_ms)
         SELECT seq, body, receive_count, ?2 FROM queue_jobs WHERE seq = ?1",
    )
    .map_err(unavailable)?
    .execute(params![seq, now])
    .map_err(unavailable)?;
    tx.prepare_cached("DELETE FROM queue_jobs WHERE seq = ?1")
        .map_err(unavailable)?
        .execute([seq])
        .map_err(unavailable)?;
    Ok(())
}
