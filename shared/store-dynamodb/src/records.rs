//! `Records` reads and commits (see the crate docs for the transaction). Undo is `undo.rs`.

use crate::DynamoStore;
use crate::action_index::ActionIndex;
use crate::audit::{BODY, OWNER, RID, audit_entry, refused_items};
use crate::error::unavailable;
use crate::item::{Item, corrupt, get_s, s};
use crate::keys::{ACT, PK, REC, SK, audit_pk, owner_pk, record_pk};
use async_trait::async_trait;
use store::{
    ActionCommit, AuditEntry, Record, Records, StoreError, UndoOutcome, UndoRequest, UndoScope,
};
use transcript::UserId;

/// How often a write is tried again when only the audit head moved under it.
pub(crate) const TRIES: usize = 8;

#[async_trait]
impl Records for DynamoStore {
    async fn record(&self, kind: &str, id: &str) -> Result<Option<Record>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(record_pk(kind, id)))
            .key(SK, s(REC))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        out.item.map(|item| record(kind, &item)).transpose()
    }

    async fn records_of(&self, owner: &UserId, kind: &str) -> Result<Vec<Record>, StoreError> {
        let items = self
            .query_all(
                self.query()
                    .key_condition_expression("#pk = :owner")
                    .expression_attribute_names("#pk", PK)
                    .expression_attribute_values(":owner", s(owner_pk(owner, kind)))
                    .consistent_read(true),
            )
            .await?;
        items.iter().map(|item| record(kind, item)).collect()
    }

    async fn commit(&self, commit: &ActionCommit) -> Result<(), StoreError> {
        commit.validate()?;
        // Alone past the limit; with the action's earlier rows, what its index holds decides.
        commit.check_weight(0)?;
        for _ in 0..TRIES {
            // On the undo stack: the action's index with the head, in one request, to decide
            // the action's limits from.
            let (head, index) = if commit.weight() > 0 {
                self.head_and_index(&commit.user, &commit.action_id).await?
            } else {
                (self.audit_head(&commit.user).await?, ActionIndex::default())
            };
            let prev = head.seq;
            let size = if commit.weight() > 0 {
                commit.check_weight(index.weight())?;
                Some(commit.undo_size(&self.undo_size(commit, &index).await?)?)
            } else {
                None
            };
            let row = AuditEntry {
                seq: prev + 1,
                action_id: commit.action_id.clone(),
                actor: commit.actor,
                user: commit.user.clone(),
                by_user: commit.by_user,
                at_ms: commit.at_ms,
                changes: commit.changes.clone(),
                reverts: None,
                undone_by: None,
                conversation: commit.conversation.clone(),
            };
            let mut writes = Vec::with_capacity(2 * commit.changes.len() + 5);
            for change in &commit.changes {
                writes.push(self.change_write(change)?);
            }
            writes.push(self.head_bump(&commit.user, prev)?);
            writes.push(self.audit_put(&row)?);
            // Last, so the refused items' positions above still name the changes.
            for change in &commit.changes {
                writes.push(self.listing_write(change)?);
            }
            // The call's receipt, with the effect it records (DESIGN invariant 10).
            let receipt_at = writes.len();
            if let Some(receipt) = &commit.receipt {
                writes.push(self.receipt_put(receipt)?);
            }
            if let (Some(entry), Some(size)) = (self.stack_entry(&row)?, &size) {
                writes.push(entry);
                writes.push(self.index_write(commit, row.seq, &index, size)?);
            }
            let sent = crate::transact::send(
                self.client
                    .transact_write_items()
                    .set_transact_items(Some(writes)),
            )
            .await;
            let Err(err) = sent else { return Ok(()) };
            let Some(refused) = refused_items(&err) else {
                return Err(unavailable(err));
            };
            if let Some(stale) = (0..commit.changes.len()).find(|&i| refused.get(i) == Some(&true))
            {
                let c = &commit.changes[stale];
                return Err(StoreError::Conflict {
                    what: format!("{}/{} changed since it was read", c.kind, c.id),
                });
            }
            if refused.get(receipt_at) == Some(&true) {
                return Err(StoreError::Conflict {
                    what: format!(
                        "the effect of call {} is already recorded",
                        receipt_call(commit)
                    ),
                });
            }
            if !refused.iter().any(|r| *r) {
                return Err(unavailable(err));
            }
            // Only the audit head or the action's index moved: another commit or an undo of
            // this user got in first. Read them again.
        }
        Err(StoreError::Unavailable(
            format!("audit log of {}: too many concurrent writers", commit.user).into(),
        ))
    }

    async fn undo_last(&self, undo: &UndoRequest) -> Result<UndoOutcome, StoreError> {
        self.undo(undo).await
    }

    async fn next_undo(
        &self,
        user: &UserId,
        scope: &UndoScope,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let head = self.audit_head(user).await?;
        self.undo_stack(user, scope, head).await
    }

    async fn audit_log(&self, user: &UserId) -> Result<Vec<AuditEntry>, StoreError> {
        let items = self
            .query_all(
                self.query()
                    .key_condition_expression("#pk = :pk AND begins_with(#sk, :act)")
                    .expression_attribute_names("#pk", PK)
                    .expression_attribute_names("#sk", SK)
                    .expression_attribute_values(":pk", s(audit_pk(user)))
                    .expression_attribute_values(":act", s(ACT))
                    .scan_index_forward(false)
                    .consistent_read(true),
            )
            .await?;
        items.iter().map(|item| audit_entry(item, user)).collect()
    }
}

fn record(kind: &str, item: &Item) -> Result<Record, StoreError> {
    let id = get_s(item, RID, &format!("record of kind {kind}"))?;
    let what = format!("record {kind}/{id}");
    Ok(Record {
        kind: kind.to_owned(),
        id: id.to_owned(),
        owner: UserId(get_s(item, OWNER, &what)?.to_owned()),
        value: serde_json::from_str(get_s(item, BODY, &what)?).map_err(|e| corrupt(&what, e))?,
    })
}

fn receipt_call(commit: &ActionCommit) -> &str {
    commit.receipt.as_ref().map_or("", |r| r.call_key.as_str())
}
