//! What the undo of each action would hold (`action_sizes`, migration 20): the action's
//! `store::UndoSize`, read and written inside the commit's (or the undo's) transaction. See
//! `store`'s `undo_bytes`.

use crate::error::{corrupt, unavailable};
use rusqlite::{Connection, OptionalExtension, params};
use store::{ActionCommit, AuditEntry, StoreError, UndoSize};
use transcript::UserId;

/// The action's count with `commit` in, or [`StoreError::TooLarge`] past the limit. An action
/// with rows but no count (begun by an older version) is counted afresh from its rows.
pub(crate) fn with(
    tx: &Connection,
    commit: &ActionCommit,
    rows_of: impl FnOnce() -> Result<Vec<AuditEntry>, StoreError>,
) -> Result<UndoSize, StoreError> {
    let earlier = match read(tx, &commit.user, &commit.action_id)? {
        Some(size) => size,
        None => UndoSize::of_rows(&commit.action_id, &rows_of()?),
    };
    commit.undo_size(&earlier)
}

/// Keep `size` as the action's count.
pub(crate) fn write(
    tx: &Connection,
    user: &UserId,
    action_id: &str,
    size: &UndoSize,
) -> Result<(), StoreError> {
    let size = serde_json::to_string(size).map_err(|e| StoreError::Invalid {
        what: format!("the count of action {action_id}: {e}"),
    })?;
    tx.prepare_cached(
        "INSERT INTO action_sizes (user_id, action_id, size) VALUES (?1, ?2, ?3)
         ON CONFLICT (user_id, action_id) DO UPDATE SET size = excluded.size",
    )
    .map_err(unavailable)?
    .execute(params![user.0, action_id, size])
    .map_err(unavailable)?;
    Ok(())
}

/// An undo reverted rows of `action_id`: its count goes, and its next commit counts afresh from
/// the rows left on the stack (see `store`'s `undo_bytes`).
pub(crate) fn forget(tx: &Connection, user: &UserId, action_id: &str) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM action_sizes WHERE user_id = ?1 AND action_id = ?2")
        .map_err(unavailable)?
        .execute(params![user.0, action_id])
        .map_err(unavailable)?;
    Ok(())
}

fn read(tx: &Connection, user: &UserId, action_id: &str) -> Result<Option<UndoSize>, StoreError> {
    let size: Option<String> = tx
        .prepare_cached("SELECT size FROM action_sizes WHERE user_id = ?1 AND action_id = ?2")
        .map_err(unavailable)?
        .query_row(params![user.0, action_id], |r| r.get(0))
        .optional()
        .map_err(unavailable)?;
    size.map(|size| {
        serde_json::from_str(&size)
            .map_err(|e| corrupt(format!("the count of action {user}/{action_id}"), e))
    })
    .transpose()
}
