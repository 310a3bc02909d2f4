//! Undo: the rows to revert come from the user's undo stack (their audit partition, filtered
//! to the rows an undo in the request's scope may take); the reverting changes, the `undone_by`
//! marks and the undo's own row go in one transaction (see the crate docs).

use crate::DynamoStore;
use crate::audit::{BY_USER, CONVERSATION, REVERTS, UNDONE_BY, audit_entry, refused_items};
use crate::error::unavailable;
use crate::item::s;
use crate::keys::{ACT, PK, SK, audit_pk, audit_sk};
use crate::records::TRIES;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use store::{
    AuditEntry, StoreError, UndoOutcome, UndoRequest, UndoScope, reverting_changes, rows_to_undo,
};
use transcript::UserId;

impl DynamoStore {
    pub(crate) async fn undo(&self, undo: &UndoRequest) -> Result<UndoOutcome, StoreError> {
        let user = &undo.user;
        for _ in 0..TRIES {
            let prev = self.audit_head(user).await?;
            let rows = self.undo_stack(user, &undo.scope).await?;
            let Some(action_id) = rows.first().map(|r| r.action_id.clone()) else {
                return Ok(UndoOutcome::NothingToUndo);
            };
            if let Some(receipt) = &undo.receipt {
                receipt.check(&rows)?;
            }
            let changes = reverting_changes(&rows);
            let mut writes = Vec::with_capacity(2 * changes.len() + rows.len() + 2);
            for change in &changes {
                writes.push(self.change_write(change)?);
            }
            for row in &rows {
                writes.push(self.mark_undone(user, row.seq, &undo.action_id)?);
            }
            writes.push(self.head_bump(user, prev)?);
            writes.push(self.audit_put(&undo.audit_row(prev + 1, &action_id, changes.clone()))?);
            // Last, so the refused items' positions above still name the changes.
            for change in &changes {
                writes.push(self.listing_write(change)?);
            }
            // The call's receipt, with the undo it records (DESIGN invariant 10).
            let receipt_at = writes.len();
            if let Some(receipt) = &undo.receipt {
                writes.push(self.receipt_put(&receipt.receipt)?);
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
            if refused.get(receipt_at) == Some(&true) {
                return Err(StoreError::Conflict {
                    what: "the undo of this tool call is already recorded".into(),
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

    /// The rows the next undo in `scope` reverts, oldest first. The query's filter keeps only
    /// the user's undo stack (in the conversation, for a conversation's undo), so undone rows,
    /// undos and other parties' rows never leave the table.
    pub(crate) async fn undo_stack(
        &self,
        user: &UserId,
        scope: &UndoScope,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let mut filter = "#by_user = :yes AND attribute_not_exists(#undone_by) \
                          AND attribute_not_exists(#reverts)"
            .to_owned();
        let mut query = self
            .query()
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :act)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_names("#by_user", BY_USER)
            .expression_attribute_names("#undone_by", UNDONE_BY)
            .expression_attribute_names("#reverts", REVERTS)
            .expression_attribute_values(":pk", s(audit_pk(user)))
            .expression_attribute_values(":act", s(ACT))
            .expression_attribute_values(":yes", AttributeValue::Bool(true))
            .scan_index_forward(false)
            .consistent_read(true);
        if let UndoScope::Conversation(conversation) = scope {
            filter.push_str(" AND #conversation = :conversation");
            query = query
                .expression_attribute_names("#conversation", CONVERSATION)
                .expression_attribute_values(":conversation", s(&conversation.0));
        }
        let items = self.query_all(query.filter_expression(filter)).await?;
        let rows = items
            .iter()
            .map(|item| audit_entry(item, user))
            .collect::<Result<Vec<_>, _>>()?;
        // The one rule for what an undo takes (scope included) stays `rows_to_undo`.
        Ok(rows_to_undo(&rows, scope))
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
