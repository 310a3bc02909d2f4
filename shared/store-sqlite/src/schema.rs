//! The schema and its migrations, versioned with `PRAGMA user_version`.
//!
//! `MIGRATIONS[i]` takes a database from version `i` to `i + 1`. Migrations are only ever
//! appended; a released one is never edited. Opening applies the missing ones in order, in one
//! transaction with the version bump, so a file is either fully upgraded or left as it was.

use crate::error::unavailable;
use rusqlite::{Connection, TransactionBehavior};
use std::fmt;
use store::StoreError;

pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: conversations, the model transcript, the visible transcript.
    "CREATE TABLE conversations (
        id             TEXT    NOT NULL PRIMARY KEY,
        user_id        TEXT    NOT NULL,
        channel        TEXT    NOT NULL,
        purpose        TEXT    NOT NULL,
        status         TEXT    NOT NULL,
        prompt_version TEXT    NOT NULL,
        segment        INTEGER NOT NULL,
        turn           INTEGER NOT NULL,
        created_at_ms  INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX conversations_by_user ON conversations (user_id, created_at_ms DESC, id DESC);

    CREATE TABLE messages (
        conversation_id TEXT    NOT NULL,
        position        INTEGER NOT NULL,
        segment         INTEGER NOT NULL,
        role            TEXT    NOT NULL,
        body            TEXT    NOT NULL,
        PRIMARY KEY (conversation_id, position)
    ) STRICT;
    CREATE INDEX messages_by_segment ON messages (conversation_id, segment, position);

    CREATE TABLE visible (
        conversation_id TEXT    NOT NULL,
        position        INTEGER NOT NULL,
        body            TEXT    NOT NULL,
        PRIMARY KEY (conversation_id, position)
    ) STRICT;",
    // 2: claim records of turn jobs (running with an expiry, or done with a retention time).
    "CREATE TABLE job_claims (
        job_key       TEXT    NOT NULL PRIMARY KEY,
        status        TEXT    NOT NULL CHECK (status IN ('running', 'done')),
        expires_at_ms INTEGER NOT NULL,
        attempt       INTEGER NOT NULL,
        keep_until_ms INTEGER
    ) STRICT;",
    // 3: link codes (one-time, expiring) and the channel accounts bound to users.
    "CREATE TABLE link_codes (
        code          TEXT    NOT NULL PRIMARY KEY,
        user_id       TEXT    NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        used_at_ms    INTEGER
    ) STRICT;

    CREATE TABLE identities (
        channel     TEXT    NOT NULL,
        external_id TEXT    NOT NULL,
        user_id     TEXT    NOT NULL,
        bound_at_ms INTEGER NOT NULL,
        PRIMARY KEY (channel, external_id)
    ) STRICT;",
    // 4: owned records with their audit log (undo stack), pending confirmations, accounts, and
    // each conversation's active record.
    "CREATE TABLE records (
        kind     TEXT NOT NULL,
        id       TEXT NOT NULL,
        owner_id TEXT NOT NULL,
        body     TEXT NOT NULL,
        PRIMARY KEY (kind, id)
    ) STRICT;
    CREATE INDEX records_by_owner ON records (owner_id, kind, id);

    CREATE TABLE audit (
        user_id   TEXT    NOT NULL,
        seq       INTEGER NOT NULL,
        action_id TEXT    NOT NULL,
        actor     TEXT    NOT NULL,
        by_user   INTEGER NOT NULL,
        at_ms     INTEGER NOT NULL,
        changes   TEXT    NOT NULL,
        reverts   TEXT,
        undone_by TEXT,
        PRIMARY KEY (user_id, seq)
    ) STRICT;

    CREATE TABLE pending_confirmations (
        conversation_id   TEXT    NOT NULL,
        hash              TEXT    NOT NULL,
        created_on_action TEXT    NOT NULL,
        description       TEXT    NOT NULL,
        expires_at_ms     INTEGER NOT NULL,
        PRIMARY KEY (conversation_id, hash)
    ) STRICT;

    CREATE TABLE accounts (
        user_id      TEXT NOT NULL PRIMARY KEY,
        status       TEXT NOT NULL CHECK (status IN ('active', 'paused', 'closed')),
        display_name TEXT NOT NULL,
        time_zone    TEXT NOT NULL
    ) STRICT;

    CREATE TABLE active_records (
        conversation_id TEXT NOT NULL,
        kind            TEXT NOT NULL,
        id              TEXT NOT NULL,
        PRIMARY KEY (conversation_id, kind)
    ) STRICT;",
    // 5: budget ledger buckets (see budget.rs).
    "CREATE TABLE budget_buckets (
        scope         TEXT    NOT NULL,
        win           TEXT    NOT NULL,
        start_ms      INTEGER NOT NULL,
        used          INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL,
        PRIMARY KEY (scope, win, start_ms)
    ) STRICT;
    CREATE INDEX budget_buckets_by_window ON budget_buckets (win, start_ms, scope);",
    // 6: which channel account redeemed a link code (a retried redemption by it succeeds).
    "ALTER TABLE link_codes ADD COLUMN used_by TEXT;",
    // 7: accounts get an e-mail (unique; NULL for none, and NULLs never clash), roles
    // (`Roles`' text) and a creation time (0 for rows from before); listing orders; a user's
    // bound channel accounts.
    "ALTER TABLE accounts ADD COLUMN email TEXT;
    ALTER TABLE accounts ADD COLUMN roles TEXT NOT NULL DEFAULT 'user';
    ALTER TABLE accounts ADD COLUMN created_at_ms INTEGER NOT NULL DEFAULT 0;
    CREATE UNIQUE INDEX accounts_by_email ON accounts (email);
    CREATE INDEX accounts_in_order ON accounts (created_at_ms, user_id);
    CREATE INDEX identities_by_user ON identities (user_id, channel, external_id);",
    // 8: conversation leases (one turn at a time per conversation, across entrances).
    "CREATE TABLE conversation_leases (
        conversation_id TEXT PRIMARY KEY,
        holder TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL
    ) STRICT;",
    // 9: web sessions (by the SHA-256 of their secret) and sign-ins in progress.
    "CREATE TABLE sessions (
        id_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        csrf TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE pending_logins (
        state TEXT PRIMARY KEY,
        nonce TEXT NOT NULL,
        pkce_verifier TEXT NOT NULL,
        return_to TEXT NOT NULL,
        expires_at_ms INTEGER NOT NULL
    ) STRICT;",
    // 10: each tool call's result, written as the call finishes (a resumed turn reuses it).
    "CREATE TABLE tool_results (
        conversation_id TEXT NOT NULL,
        asked_at INTEGER NOT NULL,
        tool_use_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (conversation_id, asked_at, tool_use_id)
    ) STRICT;",
    // 11: MCP access tokens (only their SHA-256), listed per user.
    "CREATE TABLE mcp_tokens (
        id            TEXT    NOT NULL PRIMARY KEY,
        hash          TEXT    NOT NULL UNIQUE,
        user_id       TEXT    NOT NULL,
        name          TEXT    NOT NULL,
        scope         TEXT    NOT NULL,
        created_at_ms INTEGER NOT NULL,
        expires_at_ms INTEGER,
        last_used_ms  INTEGER,
        revoked_at_ms INTEGER
    ) STRICT;
    CREATE INDEX mcp_tokens_by_user ON mcp_tokens (user_id, created_at_ms, id);",
    // 12: tool-call receipts, written in the same transaction as the call's effect.
    "CREATE TABLE tool_receipts (
        call_key TEXT PRIMARY KEY,
        output TEXT NOT NULL
    ) STRICT;",
    // 13: the conversation an audit row was recorded in (NULL before, and outside any): a
    // conversation's undo reverts only its own actions. The index finds the top of one
    // conversation's undo stack; the second an action's rows.
    "ALTER TABLE audit ADD COLUMN conversation_id TEXT;
    CREATE INDEX audit_undo_stack ON audit (user_id, conversation_id, seq)
        WHERE by_user = 1 AND undone_by IS NULL AND reverts IS NULL;
    CREATE INDEX audit_by_action ON audit (user_id, action_id, seq);",
    // 14: the date after which a conversation (an unknown sender's lobby) is deleted.
    "CREATE TABLE conversation_expiry (
        conversation_id TEXT    NOT NULL PRIMARY KEY,
        expires_at_ms   INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX conversation_expiry_by_date ON conversation_expiry (expires_at_ms);",
    // 15: how far an account's assistant may reach (read, write, risky); NULL reads as the
    // default, risky.
    "ALTER TABLE accounts ADD COLUMN assistant_grant TEXT;",
    // 16: a sign-in in progress is the browser's cookie now (starting one writes nothing); a
    // verified one's state is recorded once, so a replayed callback signs nobody in.
    "DROP TABLE pending_logins;
    CREATE TABLE used_logins (
        state         TEXT    NOT NULL PRIMARY KEY,
        keep_until_ms INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX used_logins_by_date ON used_logins (keep_until_ms);",
    // 17: what an attempt that ended without finishing had sent of its reply (JSON of
    // `store::ReplySent`), for a retry after a restart.
    "ALTER TABLE job_claims ADD COLUMN reply_sent TEXT;",
    // 18: done claims by their keep, for the sweep that deletes them once past it.
    "CREATE INDEX job_claims_done_until ON job_claims (keep_until_ms) WHERE status = 'done';",
    // 19: what the undo of each action would hold, first kept as a total and the records
    // touched (replaced by 20).
    "CREATE TABLE action_sizes (
        user_id    TEXT    NOT NULL,
        action_id  TEXT    NOT NULL,
        undo_bytes INTEGER NOT NULL,
        touched    TEXT    NOT NULL,
        PRIMARY KEY (user_id, action_id)
    ) STRICT, WITHOUT ROWID;",
    // 20: what the undo of each action would hold (JSON of `store::UndoSize`); an undo deletes
    // its action's row. A count dropped here is counted again from the action's rows.
    "DROP TABLE action_sizes;
    CREATE TABLE action_sizes (
        user_id   TEXT NOT NULL,
        action_id TEXT NOT NULL,
        size      TEXT NOT NULL,
        PRIMARY KEY (user_id, action_id)
    ) STRICT, WITHOUT ROWID;",
    // 21: pending confirmations by their expiry, for the sweep that deletes them once past it
    // (an MCP question or approval belongs to no conversation that retention deletes).
    "CREATE INDEX pending_confirmations_by_expiry ON pending_confirmations (expires_at_ms);",
    // 22: link codes by their expiry, for the sweep that deletes them once past it (a used
    // code keeps who redeemed it: a channel and a phone number).
    "CREATE INDEX link_codes_by_expiry ON link_codes (expires_at_ms);",
    // 23: when the person signed out everywhere (sessions started by then are over); 0: never.
    "ALTER TABLE accounts ADD COLUMN sessions_ended_at_ms INTEGER NOT NULL DEFAULT 0;",
    // 24: after a compaction that failed for good, the segment's size at which the next is
    // tried; 0: at the threshold.
    "ALTER TABLE conversations ADD COLUMN compaction_retry_at_chars INTEGER NOT NULL DEFAULT 0;",
    // 25: budget counts and sessions by their expiry, for the sweep that deletes them once
    // past it (each active user adds counts every minute; DynamoDB deletes them by `ttl`).
    "CREATE INDEX budget_buckets_by_expiry ON budget_buckets (expires_at_ms);
    CREATE INDEX sessions_by_expiry ON sessions (expires_at_ms);",
];

/// The schema version this build writes and understands.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// The database was written by a newer build; opening it here could damage it.
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
            "database schema version {} is newer than this build knows ({}); upgrade Bridle",
            self.found, self.known
        )
    }
}

impl std::error::Error for SchemaTooNew {}

/// Bring `conn` up to `migrations.len()`. The write lock is taken before the version is read,
/// so two processes opening one file cannot both migrate it.
pub(crate) fn migrate(conn: &mut Connection, migrations: &[&str]) -> Result<(), StoreError> {
    let known = migrations.len() as u32;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(unavailable)?;
    let found: u32 = tx
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(unavailable)?;
    if found > known {
        return Err(StoreError::Unavailable(Box::new(SchemaTooNew {
            found,
            known,
        })));
    }
    if found == known {
        return Ok(());
    }
    for sql in &migrations[found as usize..] {
        tx.execute_batch(sql).map_err(unavailable)?;
    }
    tx.pragma_update(None, "user_version", known)
        .map_err(unavailable)?;
    tx.commit().map_err(unavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn version(conn: &Connection) -> u32 {
        conn.pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn an_old_database_upgrades_and_keeps_its_rows() {
        let mut conn = Connection::open_in_memory().unwrap();
        let v1 = "CREATE TABLE t (a INTEGER NOT NULL) STRICT";
        migrate(&mut conn, &[v1]).unwrap();
        assert_eq!(version(&conn), 1);
        conn.execute("INSERT INTO t (a) VALUES (7)", []).unwrap();

        migrate(&mut conn, &[v1, "ALTER TABLE t ADD COLUMN b TEXT"]).unwrap();
        assert_eq!(version(&conn), 2);
        let row: (i64, Option<String>) = conn
            .query_row("SELECT a, b FROM t", [], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap();
        assert_eq!(row, (7, None));
    }

    #[test]
    fn a_failing_migration_leaves_the_database_as_it_was() {
        let mut conn = Connection::open_in_memory().unwrap();
        let v1 = "CREATE TABLE t (a INTEGER NOT NULL) STRICT";
        migrate(&mut conn, &[v1]).unwrap();

        let broken = "CREATE TABLE u (x INTEGER); NOT SQL AT ALL";
        let err = migrate(&mut conn, &[v1, broken]).unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
        assert_eq!(version(&conn), 1);
        let u_exists: bool = conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = 'u')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(!u_exists, "the half-applied migration must roll back");
    }

    #[test]
    fn a_newer_database_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        let newer = SCHEMA_VERSION + 1;
        conn.pragma_update(None, "user_version", newer).unwrap();
        let err = migrate(&mut conn, MIGRATIONS).unwrap_err();
        let StoreError::Unavailable(source) = err else {
            panic!("expected Unavailable, got {err:?}");
        };
        let too_new = source.downcast_ref::<SchemaTooNew>().expect("SchemaTooNew");
        assert_eq!(
            *too_new,
            SchemaTooNew {
                found: newer,
                known: SCHEMA_VERSION
            }
        );
        assert_eq!(version(&conn), newer);
    }
}
