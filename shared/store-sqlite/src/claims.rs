//! `JobClaims`: one row per turn job. Claiming is a single upsert whose `WHERE` admits only a
//! missing, expired-running or expired-done row; running both in the one write makes the read that
//! explains a refusal consistent with it.

use crate::SqliteStore;
use crate::error::{corrupt, unavailable};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::{Claim, JobClaims, ReplySent, StoreError};

impl SqliteStore {
    /// Release the running claims of `job_keys`, whatever attempt holds them: for a server
    /// that owns its file alone and restarts after a crash, whose queue found these jobs in
    /// flight (`SqliteQueue::recovered`) — their holder died with the previous process, so the
    /// retry may take over at once instead of waiting for the claims to expire.
    pub fn release_claims_of_dead_process(
        &self,
        job_keys: &[String],
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let job_keys = job_keys.to_vec();
        self.db.write_blocking(move |conn| {
            let mut release = conn
                .prepare_cached(
                    "UPDATE job_claims SET expires_at_ms = ?2 - 1
                 WHERE job_key = ?1 AND status = 'running'",
                )
                .map_err(unavailable)?;
            for key in job_keys {
                release.execute(params![key, now_ms]).map_err(unavailable)?;
            }
            Ok(())
        })
    }
}

#[async_trait]
impl JobClaims for SqliteStore {
    async fn claim_job(
        &self,
        job_key: &str,
        now_ms: i64,
        expires_at_ms: i64,
    ) -> Result<Claim, StoreError> {
        let job_key = job_key.to_owned();
        self.db
            .write_resumable(move |conn| claim(conn, &job_key, now_ms, expires_at_ms))
            .await
    }

    async fn finish_job(&self, job_key: &str, keep_until_ms: i64) -> Result<(), StoreError> {
        let job_key = job_key.to_owned();
        self.db
            .write_resumable(move |conn| finish(conn, &job_key, keep_until_ms))
            .await
    }

    async fn release_job(
        &self,
        job_key: &str,
        attempt: u32,
        now_ms: i64,
        sent: Option<&ReplySent>,
    ) -> Result<(), StoreError> {
        let job_key = job_key.to_owned();
        let sent = sent
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        self.db
            .write_resumable(move |conn| {
                conn.prepare_cached(
                    "UPDATE job_claims SET expires_at_ms = ?3 - 1,
                        reply_sent = COALESCE(?4, reply_sent)
                     WHERE job_key = ?1 AND status = 'running' AND attempt = ?2",
                )
                .map_err(unavailable)?
                .execute(params![job_key, attempt, now_ms, sent])
                .map_err(unavailable)?;
                Ok(())
            })
            .await
    }

    async fn reply_sent(&self, job_key: &str) -> Result<Option<ReplySent>, StoreError> {
        let job_key = job_key.to_owned();
        let kept: Option<String> = self
            .db
            .read(move |conn| {
                conn.prepare_cached(
                    "SELECT reply_sent FROM job_claims WHERE job_key = ?1 AND status = 'running'",
                )
                .map_err(unavailable)?
                .query_row([job_key], |r| r.get(0))
                .optional()
                .map(Option::flatten)
                .map_err(unavailable)
            })
            .await?;
        kept.map(|json| {
            serde_json::from_str(&json).map_err(|e| corrupt("a job's reply sent".into(), e))
        })
        .transpose()
    }
}

/// Claim `job_key` at `now_ms` until `expires_at_ms` (see [`JobClaims::claim_job`]): one upsert
/// whose `WHERE` admits only a missing, expired-running or expired-done row.
pub(crate) fn claim(
    conn: &Connection,
    job_key: &str,
    now_ms: i64,
    expires_at_ms: i64,
) -> Result<Claim, StoreError> {
    let claimed: Option<i64> = conn
        .prepare_cached(
            "INSERT INTO job_claims (job_key, status, expires_at_ms, attempt, keep_until_ms)
             VALUES (?1, 'running', ?3, 1, NULL)
             ON CONFLICT (job_key) DO UPDATE SET
                 status = 'running',
                 expires_at_ms = excluded.expires_at_ms,
                 attempt = CASE WHEN job_claims.status = 'done' THEN 1
                                ELSE job_claims.attempt + 1 END,
                 reply_sent = CASE WHEN job_claims.status = 'done' THEN NULL
                                   ELSE job_claims.reply_sent END,
                 keep_until_ms = NULL
             WHERE (job_claims.status = 'running' AND job_claims.expires_at_ms < ?2)
                OR (job_claims.status = 'done' AND job_claims.keep_until_ms < ?2)
             RETURNING attempt",
        )
        .map_err(unavailable)?
        .query_row(params![job_key, now_ms, expires_at_ms], |r| r.get(0))
        .optional()
        .map_err(unavailable)?;
    if let Some(attempt) = claimed {
        return Ok(match attempt {
            1 => Claim::Fresh,
            n => Claim::TakenOver {
                attempt: u32::try_from(n).unwrap_or(u32::MAX),
            },
        });
    }
    let (status, expires): (String, i64) = conn
        .prepare_cached("SELECT status, expires_at_ms FROM job_claims WHERE job_key = ?1")
        .map_err(unavailable)?
        .query_row([job_key], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(unavailable)?;
    Ok(if status == "done" {
        Claim::Done
    } else {
        Claim::Busy { until_ms: expires }
    })
}

/// Mark `job_key` done, kept until `keep_until_ms` (see [`JobClaims::finish_job`]).
pub(crate) fn finish(
    conn: &Connection,
    job_key: &str,
    keep_until_ms: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO job_claims (job_key, status, expires_at_ms, attempt, keep_until_ms)
         VALUES (?1, 'done', 0, 1, ?2)
         ON CONFLICT (job_key) DO UPDATE SET status = 'done', keep_until_ms = ?2,
             reply_sent = NULL",
    )
    .map_err(unavailable)?
    .execute(params![job_key, keep_until_ms])
    .map_err(unavailable)?;
    Ok(())
}
