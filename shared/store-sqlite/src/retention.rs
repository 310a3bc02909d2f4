//! `Retention`: a conversation's date in `conversation_expiry`; past it, one transaction deletes
//! the conversation's row, messages, visible entries, tool results, pending confirmations and
//! active records, and the date itself. A refresh that finds the date passed deletes first, so
//! old words are never kept past their date by a late refresh. The sweep also deletes done job
//! claims past their keep (`CLAIMS_GONE`), expired pending confirmations (`PENDING_GONE`:
//! their descriptions name people, and an MCP token's questions and approvals belong to no
//! conversation) and expired link codes (`CODES_GONE`: a used one names who redeemed it, a
//! channel and a phone number), expired budget counts and sessions: `CLAIMS_PER_SWEEP` rows of a
//! table a write, up to `ROUNDS_PER_SWEEP` writes a sweep.

use crate::SqliteStore;
use crate::error::unavailable;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::{Retention, StoreError};
use transcript::ConversationId;

/// Every table holding a conversation's data, by its conversation column.
const CONVERSATION_TABLES: &[(&str, &str)] = &[
    ("messages", "conversation_id"),
    ("visible", "conversation_id"),
    ("tool_results", "conversation_id"),
    ("pending_confirmations", "conversation_id"),
    ("active_records", "conversation_id"),
    ("conversation_expiry", "conversation_id"),
    ("conversations", "id"),
];

/// The claims the sweep deletes: done ones past their keep (a delivery then claims afresh,
/// as it would have anyway), over the partial index `job_claims_done_until` (migration 18).
/// Running claims stay: the local queue keeps a dead letter until it is retried, whenever.
const CLAIMS_GONE: &str = "status = 'done' AND keep_until_ms < ?1";

/// The most rows of a table one round of a sweep deletes (it holds the writer meanwhile).
const CLAIMS_PER_SWEEP: i64 = 10_000;

/// The most rounds of [`CLAIMS_PER_SWEEP`] one sweep deletes of a table (the next sweep goes on
/// with the rest).
const ROUNDS_PER_SWEEP: usize = 10;

/// The pending confirmations the sweep deletes: expired ones, which count as absent already
/// (`store::Confirmations`), over the index `pending_confirmations_by_expiry` (migration 21).
const PENDING_GONE: &str = "expires_at_ms <= ?1";

/// The link codes the sweep deletes: expired ones, which no message can redeem any more (nor
/// is a code's redemption read after it expired), over the index `link_codes_by_expiry`
/// (migration 22). DynamoDB deletes them by their `ttl`.
const CODES_GONE: &str = "expires_at_ms <= ?1";

/// What the sweep deletes besides expired conversations, at most [`CLAIMS_PER_SWEEP`] rows of
/// each a time: the table, the column a row is picked by, which rows are gone, and the index
/// that finds them.
const SWEPT: &[(&str, &str, &str, &str)] = &[
    (
        "job_claims",
        "job_key",
        CLAIMS_GONE,
        "job_claims_done_until",
    ),
    (
        "pending_confirmations",
        "rowid",
        PENDING_GONE,
        "pending_confirmations_by_expiry",
    ),
    ("link_codes", "code", CODES_GONE, "link_codes_by_expiry"),
    // Budget counts past their window (a minute's, an hour's, a day's of the 30) and sessions
    // past their end: each read as absent already.
    (
        "budget_buckets",
        "rowid",
        EXPIRED,
        "budget_buckets_by_expiry",
    ),
    ("sessions", "id_hash", EXPIRED, "sessions_by_expiry"),
];

/// Rows whose `expires_at_ms` has passed.
const EXPIRED: &str = "expires_at_ms <= ?1";

fn delete_conversation(tx: &Connection, id: &str) -> Result<(), StoreError> {
    for (table, column) in CONVERSATION_TABLES {
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE {column} = ?1"))
            .map_err(unavailable)?
            .execute([id])
            .map_err(unavailable)?;
    }
    Ok(())
}

#[async_trait]
impl Retention for SqliteStore {
    async fn expire_conversation(
        &self,
        conversation: &ConversationId,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let conversation = conversation.clone();
        self.db
            .write(move |conn| {
                let tx = conn;
                let current: Option<i64> = tx
                    .prepare_cached(
                        "SELECT expires_at_ms FROM conversation_expiry WHERE conversation_id = ?1",
                    )
                    .map_err(unavailable)?
                    .query_row([&conversation.0], |r| r.get(0))
                    .optional()
                    .map_err(unavailable)?;
                if current.is_some_and(|date| date <= now_ms) {
                    delete_conversation(tx, &conversation.0)?;
                }
                tx.prepare_cached(
            "INSERT INTO conversation_expiry (conversation_id, expires_at_ms) VALUES (?1, ?2)
             ON CONFLICT (conversation_id) DO UPDATE SET expires_at_ms = excluded.expires_at_ms",
        )
        .map_err(unavailable)?
        .execute(params![conversation.0, until_ms])
        .map_err(unavailable)?;
                Ok(())
            })
            .await
    }

    async fn sweep_expired(&self, now_ms: i64) -> Result<u64, StoreError> {
        let conversations = self
            .db
            .write(move |conn| {
                let tx = conn;
                let expired: Vec<String> = tx
                    .prepare_cached(
                        "SELECT conversation_id FROM conversation_expiry WHERE expires_at_ms <= ?1",
                    )
                    .map_err(unavailable)?
                    .query_map([now_ms], |r| r.get(0))
                    .map_err(unavailable)?
                    .collect::<Result<_, _>>()
                    .map_err(unavailable)?;
                for id in &expired {
                    delete_conversation(tx, id)?;
                }
                Ok(expired.len() as u64)
            })
            .await?;
        // Each round its own write, so the writer goes on between them: budget counts come
        // every minute for each active user, more than one round an hour on a busy server.
        for (table, key, gone, _) in SWEPT {
            for _ in 0..ROUNDS_PER_SWEEP {
                let deleted = self
                    .db
                    .write(move |conn| {
                        conn.prepare_cached(&format!(
                            "DELETE FROM {table} WHERE {key} IN
                             (SELECT {key} FROM {table} WHERE {gone} LIMIT ?2)"
                        ))
                        .map_err(unavailable)?
                        .execute(params![now_ms, CLAIMS_PER_SWEEP])
                        .map_err(unavailable)
                    })
                    .await?;
                if (deleted as i64) < CLAIMS_PER_SWEEP {
                    break;
                }
            }
        }
        Ok(conversations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use store::{Claim, JobClaims};

    /// Each table the sweep deletes from is read by its index (done claims, expired pending
    /// confirmations, expired link codes), not scanned whole.
    #[test]
    fn the_sweep_reads_what_is_gone_by_its_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn, crate::schema::MIGRATIONS).unwrap();
        for (table, key, gone, index) in SWEPT {
            let plan: String = conn
                .query_row(
                    &format!("EXPLAIN QUERY PLAN SELECT {key} FROM {table} WHERE {gone}"),
                    [1],
                    |r| r.get(3),
                )
                .unwrap();
            assert!(plan.contains(index), "{table}: {plan}");
        }
    }

    /// Expired pending confirmations go with the sweep, whatever they belong to; live ones stay.
    #[tokio::test]
    async fn the_sweep_deletes_expired_confirmations_and_keeps_live_ones() {
        use store::{Confirmations, Pending};
        let store = SqliteStore::open_in_memory().unwrap();
        let pending = |conversation: &str, expires_at_ms| Pending {
            conversation: conversation.into(),
            hash: "h1".into(),
            created_on_action: "a1".into(),
            description: "Withdraw Dana Lee from Spring Open".into(),
            expires_at_ms,
        };
        store
            .put_pending(&pending("mcp:tok_1:approved", 1_000))
            .await
            .unwrap();
        store
            .put_pending(&pending("mcp:tok_1", 5_000))
            .await
            .unwrap();
        store.sweep_expired(2_000).await.unwrap();
        let rows: i64 = store
            .db
            .read(|conn| {
                conn.query_row("SELECT count(*) FROM pending_confirmations", [], |r| {
                    r.get(0)
                })
                .map_err(unavailable)
            })
            .await
            .unwrap();
        assert_eq!(rows, 1, "the expired one is gone");
        let live = store
            .read_pending(&"mcp:tok_1".into(), "h1", 2_000)
            .await
            .unwrap();
        assert_eq!(live, Some(pending("mcp:tok_1", 5_000)));
    }

    /// Budget counts past their window and sessions past their end go with the sweep (each
    /// active user adds counts every minute); live ones stay and still count.
    #[tokio::test]
    async fn the_sweep_deletes_expired_budget_counts_and_sessions_and_keeps_live_ones() {
        use store::{BucketKey, BudgetLedger, Charge, Session, Sessions};
        let store = SqliteStore::open_in_memory().unwrap();
        let bucket = |scope: &str| BucketKey {
            scope: scope.into(),
            window: "1m".into(),
            start_ms: 0,
        };
        for (scope, expires_at_ms) in [("old", 1_000), ("live", 9_000)] {
            store
                .reserve(&[Charge {
                    bucket: bucket(scope),
                    amount: 7,
                    limit: None,
                    expires_at_ms,
                }])
                .await
                .unwrap();
        }
        for (id, expires_at_ms) in [("old-session", 1_000), ("live-session", 9_000)] {
            store
                .put_session(&Session {
                    id_hash: id.into(),
                    user: "ana".into(),
                    csrf: "c".into(),
                    created_at_ms: 0,
                    expires_at_ms,
                })
                .await
                .unwrap();
        }
        store.sweep_expired(2_000).await.unwrap();
        let count = |table: &'static str| {
            let store = &store;
            async move {
                store
                    .db
                    .read(move |conn| {
                        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
                            r.get::<_, i64>(0)
                        })
                        .map_err(unavailable)
                    })
                    .await
                    .unwrap()
            }
        };
        assert_eq!(
            count("budget_buckets").await,
            1,
            "the expired count is gone"
        );
        assert_eq!(count("sessions").await, 1, "the expired session is gone");
        assert_eq!(store.bucket_usage(&[bucket("live")]).await.unwrap(), [7]);
        assert!(
            store
                .session("live-session", 2_000)
                .await
                .unwrap()
                .is_some()
        );
    }

    /// Expired link codes go with the sweep, used or not (a used one names who redeemed it);
    /// a live one stays and still links.
    #[tokio::test]
    async fn the_sweep_deletes_expired_link_codes_and_keeps_live_ones() {
        use store::Identities;
        let store = SqliteStore::open_in_memory().unwrap();
        let ana = transcript::UserId::from("ana");
        for (code, expires) in [
            ("OLDUSED1", 1_000),
            ("OLDFREE1", 1_500),
            ("LIVECODE", 9_000),
        ] {
            store
                .create_link_code(code, &ana, 0, expires)
                .await
                .unwrap();
        }
        assert!(
            store
                .consume_link_code("OLDUSED1", "whatsapp:+4915550001", 500)
                .await
                .unwrap()
                .is_some()
        );
        store.sweep_expired(2_000).await.unwrap();
        let left: Vec<String> = store
            .db
            .read(|conn| {
                conn.prepare("SELECT code FROM link_codes ORDER BY code")
                    .map_err(unavailable)?
                    .query_map([], |r| r.get(0))
                    .map_err(unavailable)?
                    .collect::<Result<_, _>>()
                    .map_err(unavailable)
            })
            .await
            .unwrap();
        assert_eq!(left, ["LIVECODE"]);
        assert_eq!(
            store
                .consume_link_code("LIVECODE", "whatsapp:+4915550002", 2_500)
                .await
                .unwrap(),
            Some(ana)
        );
    }

    /// Done claims past their keep are deleted by the sweep, and only those: one still kept
    /// stays, and so does a running one however old (its job may be a dead letter someone
    /// retries later, which must resume as a retry).
    #[tokio::test]
    async fn the_sweep_deletes_done_claims_past_their_keep_and_nothing_else() {
        let store = SqliteStore::open_in_memory().unwrap();
        let t0 = 1_000_000;
        for key in ["done-old", "done-kept", "abandoned"] {
            assert_eq!(
                store.claim_job(key, t0, t0 + 60_000).await.unwrap(),
                Claim::Fresh
            );
        }
        let now = t0 + 365 * 24 * 3_600_000;
        store.finish_job("done-old", now - 1).await.unwrap();
        store.finish_job("done-kept", now + 1).await.unwrap();
        store.sweep_expired(now).await.unwrap();
        let left: Vec<String> = store
            .db
            .read(|conn| {
                conn.prepare("SELECT job_key FROM job_claims ORDER BY job_key")
                    .map_err(unavailable)?
                    .query_map([], |r| r.get(0))
                    .map_err(unavailable)?
                    .collect::<Result<_, _>>()
                    .map_err(unavailable)
            })
            .await
            .unwrap();
        assert_eq!(left, ["abandoned", "done-kept"]);
        assert_eq!(
            store.claim_job("abandoned", now, now + 1).await.unwrap(),
            Claim::TakenOver { attempt: 2 }
        );
        assert_eq!(
            store.claim_job("done-old", now, now + 1).await.unwrap(),
            Claim::Fresh
        );
    }
}
