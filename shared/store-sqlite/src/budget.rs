//! `BudgetLedger`: one row per bucket (`scope`, window kind, window start). A reservation is one
//! `IMMEDIATE` transaction that reads every bucket, refuses if any would pass its cap, and adds
//! to all of them otherwise; the connection mutex and the write lock make it atomic against
//! this process and any other writer of the file.

use crate::SqliteStore;
use crate::error::unavailable;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::{Adjustment, BucketKey, BucketUsage, BudgetLedger, Charge, Reserve, StoreError};

const ADD: &str = "INSERT INTO budget_buckets (scope, win, start_ms, used, expires_at_ms)
     VALUES (?1, ?2, ?3, MAX(?4, 0), ?5)
     ON CONFLICT (scope, win, start_ms) DO UPDATE SET
         used = MAX(budget_buckets.used + ?4, 0),
         expires_at_ms = MAX(budget_buckets.expires_at_ms, excluded.expires_at_ms)";

fn used(conn: &Connection, bucket: &BucketKey) -> Result<u64, StoreError> {
    let used: Option<i64> = conn
        .prepare_cached(
            "SELECT used FROM budget_buckets WHERE scope = ?1 AND win = ?2 AND start_ms = ?3",
        )
        .map_err(unavailable)?
        .query_row(params![bucket.scope, bucket.window, bucket.start_ms], |r| {
            r.get(0)
        })
        .optional()
        .map_err(unavailable)?;
    Ok(used.unwrap_or(0).max(0) as u64)
}

pub(crate) fn add(
    conn: &Connection,
    bucket: &BucketKey,
    delta: i64,
    expires_at_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(ADD)
        .map_err(unavailable)?
        .execute(params![
            bucket.scope,
            bucket.window,
            bucket.start_ms,
            delta,
            expires_at_ms
        ])
        .map_err(unavailable)?;
    Ok(())
}

/// Add every charge, or none when any would take its bucket past its cap (then nothing is
/// written, and the first such bucket is reported).
pub(crate) fn reserve(conn: &Connection, charges: &[Charge]) -> Result<Reserve, StoreError> {
    for c in charges {
        let Some(limit) = c.limit else { continue };
        let used = used(conn, &c.bucket)?;
        if used.saturating_add(c.amount) > limit {
            return Ok(Reserve::Tripped {
                bucket: c.bucket.clone(),
                used,
                limit,
            });
        }
    }
    for c in charges {
        add(conn, &c.bucket, signed(c.amount), c.expires_at_ms)?;
    }
    Ok(Reserve::Reserved)
}

fn signed(amount: u64) -> i64 {
    i64::try_from(amount).unwrap_or(i64::MAX)
}

#[async_trait]
impl BudgetLedger for SqliteStore {
    async fn reserve(&self, charges: &[Charge]) -> Result<Reserve, StoreError> {
        let charges = charges.to_vec();
        self.db
            .write_resumable(move |conn| reserve(conn, &charges))
            .await
    }

    async fn adjust(&self, adjustments: &[Adjustment]) -> Result<(), StoreError> {
        let adjustments = adjustments.to_vec();
        self.db
            .write_resumable(move |conn| {
                let tx = conn;
                for a in &adjustments {
                    add(tx, &a.bucket, a.delta, a.expires_at_ms)?;
                }
                Ok(())
            })
            .await
    }

    async fn bucket_usage(&self, buckets: &[BucketKey]) -> Result<Vec<u64>, StoreError> {
        let buckets = buckets.to_vec();
        self.db
            .read(move |conn| buckets.iter().map(|b| used(conn, b)).collect())
            .await
    }

    async fn buckets_of_window(
        &self,
        window: &str,
        start_ms: i64,
    ) -> Result<Vec<BucketUsage>, StoreError> {
        let window = window.to_owned();
        self.db
            .read(move |conn| {
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT scope, used FROM budget_buckets WHERE win = ?1 AND start_ms = ?2
                 ORDER BY scope",
                    )
                    .map_err(unavailable)?;
                let rows = stmt
                    .query_map(params![window, start_ms], |r| {
                        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                    })
                    .map_err(unavailable)?;
                let mut out = Vec::new();
                for row in rows {
                    let (scope, used) = row.map_err(unavailable)?;
                    out.push(BucketUsage {
                        bucket: BucketKey {
                            scope,
                            window: window.to_owned(),
                            start_ms,
                        },
                        used: used.max(0) as u64,
                    });
                }
                Ok(out)
            })
            .await
    }
}
