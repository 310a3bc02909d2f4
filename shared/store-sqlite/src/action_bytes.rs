//! What the undo of each action would hold (`action_sizes`, migration 19): the running total
//! `store::ActionCommit::undo_bytes_after` keeps, and the records the action touched, read
//! and written inside the commit's (or the undo's) transaction. See `store`'s `undo_bytes`.

use crate::error::{corrupt, unavailable};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::BTreeSet;
use store::{ActionCommit, StoreError};
use transcript::UserId;

/// [`StoreError::TooLarge`] when `commit` would take what its action's undo holds past
/// `store::MAX_ROW_BYTES`; else the action's new total and touched records, written.
pub(crate) fn count(tx: &Connection, commit: &ActionCommit) -> Result<(), StoreError> {
    let (earlier, mut touched) = read(tx, &commit.user, &commit.action_id)?;
    let total = commit.undo_bytes_after(earlier, |c| {
        touched.contains(&store::touched_key(&c.kind, &c.id))
    });
    commit.check_undo_bytes(total)?;
    touched.extend(commit.touched_keys());
    let touched = serde_json::to_string(&touched).map_err(|e| StoreError::Invalid {
        what: format!("touched records of {}: {e}", commit.action_id),
    })?;
    tx.prepare_cached(
        "INSERT INTO action_sizes (user_id, action_id, undo_bytes, touched) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id, action_id) DO UPDATE SET undo_bytes = excluded.undo_bytes,
             touched = excluded.touched",
    )
    .map_err(unavailable)?
    .execute(params![
        commit.user.0,
        commit.action_id,
        crate::error::to_sql(total as u64, "undo_bytes")?,
        touched
    ])
    .map_err(unavailable)?;
    Ok(())
}

/// An undo of `action_id` moved its records by `delta` bytes (`store::undone_bytes`).
pub(crate) fn undone(
    tx: &Connection,
    user: &UserId,
    action_id: &str,
    delta: i64,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE action_sizes SET undo_bytes = max(0, undo_bytes + ?3)
         WHERE user_id = ?1 AND action_id = ?2",
    )
    .map_err(unavailable)?
    .execute(params![user.0, action_id, delta])
    .map_err(unavailable)?;
    Ok(())
}

/// The action's total and touched records (none before its first commit).
fn read(
    tx: &Connection,
    user: &UserId,
    action_id: &str,
) -> Result<(usize, BTreeSet<String>), StoreError> {
    let row: Option<(i64, String)> = tx
        .prepare_cached(
            "SELECT undo_bytes, touched FROM action_sizes WHERE user_id = ?1 AND action_id = ?2",
        )
        .map_err(unavailable)?
        .query_row(params![user.0, action_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(unavailable)?;
    let Some((bytes, touched)) = row else {
        return Ok((0, BTreeSet::new()));
    };
    let what = || format!("action sizes of {user}/{action_id}");
    let touched = serde_json::from_str(&touched).map_err(|e| corrupt(what(), e))?;
    Ok((usize::try_from(bytes).unwrap_or(0), touched))
}
