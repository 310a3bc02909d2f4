//! `Records`: rows of `records` (canonical JSON bodies, so a `before` is compared as text) and
//! the per-user `audit` log. A commit or an undo is one immediate transaction: every `before`
//! is checked and every row written under the write lock, or nothing is.

use crate::SqliteStore;
use crate::error::{corrupt, unavailable};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::{
    ActionCommit, ActorKind, AuditEntry, Change, Record, Records, StoreError, UndoOutcome,
    UndoRequest, UndoScope, canonical_json, reverting_changes, rows_to_undo,
};
use transcript::{ConversationId, UserId};

#[async_trait]
impl Records for SqliteStore {
    async fn record(&self, kind: &str, id: &str) -> Result<Option<Record>, StoreError> {
        let kind = kind.to_owned();
        let id = id.to_owned();
        self.db
            .read(move |conn| {
                let row: Option<(String, String)> = conn
                    .prepare_cached(
                        "SELECT owner_id, body FROM records WHERE kind = ?1 AND id = ?2",
                    )
                    .map_err(unavailable)?
                    .query_row(params![kind, id], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()
                    .map_err(unavailable)?;
                row.map(|(owner, body)| record(&kind, &id, owner, &body))
                    .transpose()
            })
            .await
    }

    async fn records_of(&self, owner: &UserId, kind: &str) -> Result<Vec<Record>, StoreError> {
        let owner = owner.clone();
        let kind = kind.to_owned();
        self.db
            .read(move |conn| records_of(conn, &owner, &kind))
            .await
    }

    async fn commit(&self, commit: &ActionCommit) -> Result<(), StoreError> {
        let commit = commit.clone();
        self.db
            .write(move |conn| {
                commit.validate()?;
                let tx = conn;
                // The action's limits first, as on DynamoDB, then every `before`.
                let size = if commit.weight() > 0 {
                    commit.check_weight(action_weight(tx, &commit.user, &commit.action_id)?)?;
                    Some(crate::action_sizes::with(tx, &commit, || {
                        action_rows(tx, &commit.user, &commit.action_id)
                    })?)
                } else {
                    None
                };
                if let Some(stale) = first_stale(tx, &commit.changes)? {
                    return Err(StoreError::Conflict {
                        what: format!("{}/{} changed since it was read", stale.kind, stale.id),
                    });
                }
                if let Some(size) = &size {
                    crate::action_sizes::write(tx, &commit.user, &commit.action_id, size)?;
                }
                apply(tx, &commit.changes)?;
                append_audit(tx, &audit_row(&commit, None))?;
                if let Some(receipt) = &commit.receipt {
                    crate::tool_results::put_receipt(tx, receipt)?;
                }
                Ok(())
            })
            .await
    }

    async fn undo_last(&self, undo: &UndoRequest) -> Result<UndoOutcome, StoreError> {
        let undo = undo.clone();
        self.db
            .write(move |conn| {
                let tx = conn;
                let rows = next_undo(tx, &undo.user, &undo.scope)?;
                let Some(action_id) = rows.first().map(|r| r.action_id.clone()) else {
                    return Ok(UndoOutcome::NothingToUndo);
                };
                if let Some(receipt) = &undo.receipt {
                    receipt.check(&rows)?;
                }
                let changes = reverting_changes(&rows);
                if let Some(stale) = first_stale(tx, &changes)? {
                    return Ok(UndoOutcome::ChangedSince {
                        action_id,
                        kind: stale.kind.clone(),
                        id: stale.id.clone(),
                    });
                }
                apply(tx, &changes)?;
                for row in &rows {
                    tx.prepare_cached(
                        "UPDATE audit SET undone_by = ?3 WHERE user_id = ?1 AND seq = ?2",
                    )
                    .map_err(unavailable)?
                    .execute(params![
                        undo.user.0,
                        crate::error::to_sql(row.seq, "seq")?,
                        undo.action_id
                    ])
                    .map_err(unavailable)?;
                }
                crate::action_sizes::forget(tx, &undo.user, &action_id)?;
                append_audit(tx, &undo.audit_row(0, &action_id, changes.clone()))?;
                if let Some(receipt) = &undo.receipt {
                    crate::tool_results::put_receipt(tx, &receipt.receipt)?;
                }
                Ok(UndoOutcome::Undone { action_id, changes })
            })
            .await
    }

    async fn next_undo(
        &self,
        user: &UserId,
        scope: &UndoScope,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let user = user.clone();
        let scope = scope.clone();
        self.db
            .read(move |conn| crate::db::snapshot(conn, || next_undo(conn, &user, &scope)))
            .await
    }

    async fn audit_log(&self, user: &UserId) -> Result<Vec<AuditEntry>, StoreError> {
        let user = user.clone();
        self.db
            .read(move |conn| crate::db::snapshot(conn, || audit_log(conn, &user)))
            .await
    }
}

/// `owner`'s records of `kind`, by id.
pub(crate) fn records_of(
    conn: &rusqlite::Connection,
    owner: &UserId,
    kind: &str,
) -> Result<Vec<Record>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, body FROM records WHERE owner_id = ?1 AND kind = ?2 ORDER BY id",
        )
        .map_err(unavailable)?;
    let rows = stmt
        .query_map(params![owner.0, kind], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(unavailable)?;
    let mut out = Vec::new();
    for row in rows {
        let (id, body) = row.map_err(unavailable)?;
        out.push(record(kind, &id, owner.0.clone(), &body)?);
    }
    Ok(out)
}

fn record(kind: &str, id: &str, owner: String, body: &str) -> Result<Record, StoreError> {
    let value =
        serde_json::from_str(body).map_err(|e| corrupt(format!("record {kind}/{id}"), e))?;
    Ok(Record {
        kind: kind.to_owned(),
        id: id.to_owned(),
        owner: UserId(owner),
        value,
    })
}

/// The first change whose `before` (and owner) is not what is stored.
fn first_stale<'c>(
    tx: &Connection,
    changes: &'c [Change],
) -> Result<Option<&'c Change>, StoreError> {
    for c in changes {
        let stored: Option<(String, String)> = tx
            .prepare_cached("SELECT owner_id, body FROM records WHERE kind = ?1 AND id = ?2")
            .map_err(unavailable)?
            .query_row(params![c.kind, c.id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(unavailable)?;
        let matches = match (&c.before, stored) {
            (None, None) => true,
            (Some(before), Some((owner, body))) => {
                owner == c.owner.0 && body == canonical_json(before)
            }
            _ => false,
        };
        if !matches {
            return Ok(Some(c));
        }
    }
    Ok(None)
}

fn apply(tx: &Connection, changes: &[Change]) -> Result<(), StoreError> {
    for c in changes {
        match &c.after {
            Some(after) => tx
                .prepare_cached(
                    "INSERT INTO records (kind, id, owner_id, body) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (kind, id) DO UPDATE SET owner_id = excluded.owner_id, body = excluded.body",
                )
                .map_err(unavailable)?
                .execute(params![c.kind, c.id, c.owner.0, canonical_json(after)]),
            None => tx
                .prepare_cached("DELETE FROM records WHERE kind = ?1 AND id = ?2")
                .map_err(unavailable)?
                .execute(params![c.kind, c.id]),
        }
        .map_err(unavailable)?;
    }
    Ok(())
}

fn audit_row(commit: &ActionCommit, reverts: Option<String>) -> AuditEntry {
    AuditEntry {
        seq: 0,
        action_id: commit.action_id.clone(),
        actor: commit.actor,
        user: commit.user.clone(),
        by_user: commit.by_user,
        at_ms: commit.at_ms,
        changes: commit.changes.clone(),
        reverts,
        undone_by: None,
        conversation: commit.conversation.clone(),
    }
}

/// Append `row` at the user's next sequence number (its `seq` is ignored).
fn append_audit(tx: &Connection, row: &AuditEntry) -> Result<(), StoreError> {
    let changes = serde_json::to_string(&row.changes).map_err(|e| StoreError::Invalid {
        what: format!("audit changes of {}: {e}", row.action_id),
    })?;
    tx.prepare_cached(
        "INSERT INTO audit (user_id, seq, action_id, actor, by_user, at_ms, changes, reverts,
                            conversation_id)
         VALUES (?1, (SELECT COALESCE(MAX(seq), 0) + 1 FROM audit WHERE user_id = ?1),
                 ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .map_err(unavailable)?
    .execute(params![
        row.user.0,
        row.action_id,
        row.actor.as_str(),
        row.by_user,
        row.at_ms,
        changes,
        row.reverts,
        row.conversation.as_ref().map(|c| c.0.as_str())
    ])
    .map_err(unavailable)?;
    Ok(())
}

const AUDIT_COLUMNS: &str =
    "seq, action_id, actor, by_user, at_ms, changes, reverts, undone_by, conversation_id";

fn audit_log(tx: &Connection, user: &UserId) -> Result<Vec<AuditEntry>, StoreError> {
    audit_rows(
        tx,
        user,
        &format!("SELECT {AUDIT_COLUMNS} FROM audit WHERE user_id = ?1 ORDER BY seq DESC"),
        params![user.0],
    )
}

/// The rows of a user's undo stack.
const STACK: &str = "user_id = ?1 AND by_user = 1 AND undone_by IS NULL AND reverts IS NULL";

/// The action's rows still on the user's undo stack, newest first.
fn action_rows(
    tx: &Connection,
    user: &UserId,
    action_id: &str,
) -> Result<Vec<AuditEntry>, StoreError> {
    audit_rows(
        tx,
        user,
        &format!(
            "SELECT {AUDIT_COLUMNS} FROM audit WHERE {STACK} AND action_id = ?2 ORDER BY seq DESC"
        ),
        params![user.0, action_id],
    )
}

/// The rows the next undo in `scope` reverts, oldest first: the newest stacked row in scope
/// (one indexed lookup), then the stacked rows of its action. Only the undo stack is read.
fn next_undo(
    tx: &Connection,
    user: &UserId,
    scope: &UndoScope,
) -> Result<Vec<AuditEntry>, StoreError> {
    let top: Option<String> = match scope {
        UndoScope::Anywhere => tx
            .prepare_cached(&format!(
                "SELECT action_id FROM audit WHERE {STACK} ORDER BY seq DESC LIMIT 1"
            ))
            .map_err(unavailable)?
            .query_row(params![user.0], |r| r.get(0)),
        UndoScope::Conversation(conversation) => tx
            .prepare_cached(&format!(
                "SELECT action_id FROM audit WHERE {STACK} AND conversation_id = ?2
                 ORDER BY seq DESC LIMIT 1"
            ))
            .map_err(unavailable)?
            .query_row(params![user.0, conversation.0], |r| r.get(0)),
    }
    .optional()
    .map_err(unavailable)?;
    let Some(action_id) = top else {
        return Ok(Vec::new());
    };
    let rows = action_rows(tx, user, &action_id)?;
    // The one rule for what an undo takes (scope included) stays `rows_to_undo`.
    Ok(rows_to_undo(&rows, scope))
}

fn audit_rows(
    tx: &Connection,
    user: &UserId,
    sql: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<AuditEntry>, StoreError> {
    let mut stmt = tx.prepare_cached(sql).map_err(unavailable)?;
    let rows = stmt
        .query_map(params, |r| {
            Ok((
                (
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, bool>(3)?,
                    r.get::<_, i64>(4)?,
                ),
                r.get::<_, String>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, Option<String>>(7)?,
                r.get::<_, Option<String>>(8)?,
            ))
        })
        .map_err(unavailable)?;
    let mut out = Vec::new();
    for row in rows {
        let ((seq, action_id, actor, by_user, at_ms), changes, reverts, undone_by, conversation) =
            row.map_err(unavailable)?;
        let what = || format!("audit row {}#{seq}", user.0);
        out.push(AuditEntry {
            seq: crate::error::from_sql(seq, what)?,
            actor: ActorKind::parse(&actor)
                .ok_or_else(|| corrupt(what(), format!("unknown actor {actor:?}")))?,
            changes: serde_json::from_str(&changes).map_err(|e| corrupt(what(), e))?,
            action_id,
            user: user.clone(),
            by_user,
            at_ms,
            reverts,
            undone_by,
            conversation: conversation.map(ConversationId),
        });
    }
    Ok(out)
}

/// What the action's rows on the user's stack (undone ones too) already weigh: two per change
/// and one per row (see `store::MAX_ACTION_WEIGHT`).
fn action_weight(tx: &Connection, user: &UserId, action_id: &str) -> Result<usize, StoreError> {
    let weight: i64 = tx
        .prepare_cached(
            "SELECT COALESCE(SUM(2 * json_array_length(changes) + 1), 0) FROM audit
             WHERE user_id = ?1 AND action_id = ?2 AND by_user = 1 AND reverts IS NULL",
        )
        .map_err(unavailable)?
        .query_row(params![user.0, action_id], |r| r.get(0))
        .map_err(unavailable)?;
    Ok(usize::try_from(weight).unwrap_or(usize::MAX))
}
