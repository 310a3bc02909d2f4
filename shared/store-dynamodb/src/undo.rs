//! Undo: the rows to revert come from the user's audit partition; the reverting changes, the
//! `undone_by` marks and the undo's own row go in one transaction (see the crate docs).

use crate::DynamoStore;
use crate::audit::{UNDONE_BY, refused_items};
use crate::error::unavailable;
use crate::item::s;
use crate::keys::{PK, SK, audit_pk, audit_sk};
use crate::records::TRIES;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};
use store::{
    ActorKind, AuditEntry, Records, StoreError, UndoOutcome, reverting_changes, rows_to_undo,
};
use transcript::UserId;

impl DynamoStore {
    pub(crate) async fn undo(
        &self,
        user: &UserId,
        undo_action_id: &str,
        now_ms: i64,
    ) -> Result<UndoOutcome, StoreError> {
        for _ in 0..TRIES {
            let prev = self.audit_head(user).await?;
            let rows = rows_to_undo(&self.audit_log(user).await?);
            let Some(action_id) = rows.first().map(|r| r.action_id.clone()) else {
                return Ok(UndoOutcome::NothingToUndo);
            };
            let changes = reverting_changes(&rows);
            let mut writes = Vec::with_capacity(2 * changes.len() + rows.len() + 2);
            for change in &changes {
                writes.push(self.change_write(change)?);
            }
            for row in &rows {
                writes.push(self.mark_undone(user, row.seq, undo_action_id)?);
            }
            writes.push(self.head_bump(user, prev)?);
            writes.push(self.audit_put(&AuditEntry {
                seq: prev + 1,
                action_id: undo_action_id.to_owned(),
                actor: ActorKind::User,
                user: user.clone(),
                by_user: true,
                at_ms: now_ms,
                changes: changes.clone(),
                reverts: Some(action_id.clone()),
                undone_by: None,
            })?);
            // Last, so the refused items' positions above still name the changes.
            for change in &changes {
                writes.push(self.listing_write(change)?);
            }
            let sent = self
                .client
                .transact_write_items()
                .set_transact_items(Some(writes))
                .send()
                .await;
            let Err(err) = sent else {
                return Ok(UndoOutcome::Undone { action_id, changes });
            };
            let Some(refused) = refused_items(&err) else {
                return Err(unavailable(err));
            };
            if let Some(stale) = (0..changes.len()).find(|&i| refused.get(i) == Some(&true)) {
                return Ok(UndoOutcome::ChangedSince {
                    action_id,
                    kind: changes[stale].kind.clone(),
                    id: changes[stale].id.clone(),
                });
            }
            if !refused.iter().any(|r| *r) {
                return Err(unavailable(err));
            }
            // The log moved (a concurrent commit or undo): read it again.
        }
        Err(StoreError::Unavailable(
            format!("audit log of {user}: too many concurrent writers").into(),
        ))
    }

    /// Mark an audit row undone, only if nothing undid it first.
    fn mark_undone(
        &self,
        user: &UserId,
        seq: u64,
        undo_action_id: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(audit_sk(seq)))
            .update_expression("SET #undone = :undo")
            .condition_expression("attribute_exists(pk) AND attribute_not_exists(#undone)")
            .expression_attribute_names("#undone", UNDONE_BY)
            .expression_attribute_values(":undo", s(undo_action_id))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}
