//! The queue's tables and their migrations, versioned in a `queue_schema_version` table.
//!
//! The queue may share a file with the store, which versions its own schema with
//! `PRAGMA user_version`; the queue never reads or writes that pragma, so the two never fight.
//! Its tables are all prefixed `queue_`.
//!
//! `MIGRATIONS[i]` takes the queue's tables from version `i` to `i + 1`. Migrations are only
//! ever appended; a released one is never edited. Opening applies the missing ones in order, in
//! one transaction with the version bump, so a file is either fully upgraded or left as it was.

use crate::error::unavailable;
use queue::QueueError;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
use std::fmt;

pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the jobs, the dedupe keys seen, the dead letters.
    "CREATE TABLE queue_jobs (
        seq            INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        group_key      TEXT    NOT NULL,
        dedupe_key     TEXT    NOT NULL,
        body           TEXT    NOT NULL,
        visible_at_ms  INTEGER NOT NULL,
        receipt        TEXT    UNIQUE,
        receive_count  INTEGER NOT NULL,
        enqueued_at_ms INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX queue_jobs_by_group ON queue_jobs (group_key, seq);

    CREATE TABLE queue_dedupe (
        dedupe_key    TEXT    NOT NULL PRIMARY KEY,
        expires_at_ms INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX queue_dedupe_by_expiry ON queue_dedupe (expires_at_ms);

    CREATE TABLE queue_dead_letters (
        seq           INTEGER NOT NULL PRIMARY KEY,
        body          TEXT    NOT NULL,
        receive_count INTEGER NOT NULL,
        dead_at_ms    INTEGER NOT NULL
    ) STRICT;",
];

/// The queue schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The queue's tables were written by a newer build; opening them here could damage them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchemaTooNew {
    /// The version recorded in the file.
    pub found: u32,
    /// The newest version this build knows.
    pub known: u32,
}

impl fmt::Display for SchemaTooNew {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "queue schema version {} is newer than this build knows ({}); upgrade Bridle",
            self.found, self.known
        )
    }
}

impl std::error::Error for SchemaTooNew {}

/// Bring the queue's tables in `conn` up to `migrations.len()`. The write lock is taken before
/// the version is read, so two processes opening one file cannot both migrate it.
pub(crate) fn migrate(conn: &mut Connection, migrations: &[&str]) -> Result<(), QueueError> {
    let known = migrations.len() as u32;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS queue_schema_version (
            id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 0),
            version INTEGER NOT NULL
        ) STRICT",
    )
    .map_err(unavailable)?;
    let found: u32 = tx
        .query_row(
            "SELECT version FROM queue_schema_version WHERE id = 0",
            [],
            |row| row.get(0),
        )
        .optional()
        .map_err(unavailable)?
        .unwrap_or(0);
    if found > known {
        return Err(QueueError::Unavailable(Box::new(SchemaTooNew {
            found,
            known,
        })));
    }
    if found == known {
        return tx.commit().map_err(unavailable);
    }
    for sql in &migrations[found as usize..] {
        tx.execute_batch(sql).map_err(unavailable)?;
    }
    tx.execute(
        "INSERT INTO queue_schema_version (id, version) VALUES (0, ?1)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        [known],
    )
    .map_err(unavailable)?;
    tx.commit().map_err(unavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(conn: &Connection) -> u32 {
        conn.query_row("SELECT version FROM queue_schema_version", [], |r| r.get(0))
            .unwrap()
    }

    fn user_version(conn: &Connection) -> u32 {
        conn.pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn an_old_database_upgrades_and_keeps_its_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        let v1 = "CREATE TABLE queue_t (a INTEGER NOT NULL) STRICT";
        migrate(&mut conn, &[v1]).unwrap();
        assert_eq!(version(&conn), 1);
        conn.execute("INSERT INTO queue_t (a) VALUES (7)", [])
            .unwrap();

        migrate(&mut conn, &[v1, "ALTER TABLE queue_t ADD COLUMN b TEXT"]).unwrap();
        assert_eq!(version(&conn), 2);
        let row: (i64, Option<String>) = conn
            .query_row("SELECT a, b FROM queue_t", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!(row, (7, None));
    }

    #[test]
    fn a_failing_migration_leaves_the_database_as_it_was() {
        let mut conn = Connection::open_in_memory().unwrap();
        let v1 = "CREATE TABLE queue_t (a INTEGER NOT NULL) STRICT";
        migrate(&mut conn, &[v1]).unwrap();

        let broken = "CREATE TABLE queue_u (x INTEGER); NOT SQL AT ALL";
        let err = migrate(&mut conn, &[v1, broken]).unwrap_err();
        assert!(matches!(err, QueueError::Unavailable(_)), "{err:?}");
        assert_eq!(version(&conn), 1);
        let u_exists: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'queue_u')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!u_exists, "the half-applied migration must roll back");
    }

    #[test]
    fn a_newer_queue_schema_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn, MIGRATIONS).unwrap();
        conn.execute("UPDATE queue_schema_version SET version = 9", [])
            .unwrap();
        let err = migrate(&mut conn, MIGRATIONS).unwrap_err();
        let QueueError::Unavailable(source) = err else {
            panic!("expected Unavailable, got {err:?}");
        };
        let too_new = source.downcast_ref::<SchemaTooNew>().expect("SchemaTooNew");
        assert_eq!(
            *too_new,
            SchemaTooNew {
                found: 9,
                known: SCHEMA_VERSION
            }
        );
        assert_eq!(version(&conn), 9);
    }

    #[test]
    fn the_stores_user_version_is_left_alone() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", 3).unwrap();
        migrate(&mut conn, MIGRATIONS).unwrap();
        assert_eq!(
            user_version(&conn),
            3,
            "the queue must not touch user_version"
        );
        assert_eq!(version(&conn), SCHEMA_VERSION);

        conn.pragma_update(None, "user_version", 4).unwrap();
        migrate(&mut conn, MIGRATIONS).unwrap();
        assert_eq!(user_version(&conn), 4);
        assert_eq!(version(&conn), SCHEMA_VERSION);
    }
}
