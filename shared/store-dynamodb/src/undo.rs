//! Undo: the rows to revert come from the user's undo stack. The top of a conversation's stack
//! is its newest stack entry (`keys::STACK`) whose action still has rows to undo there; the
//! top anywhere is the newest row on the stack, read down the log in growing pages; either
//! way, the rows of the top's action come from the action's index (`keys::ACTION`), so an undo
//! reads what it reverts and not the user's whole log. Rows written before the entries existed
//! (below the head's `stack_from`) are read as they used to be, by a filtered query over that
//! part of the log, and an index that does not hold the row found (a row an older version
//! wrote) sends an undo anywhere to the whole log. The reverting changes, the `undone_by`
//! marks and the undo's own row go in one transaction, with the stack entries' removal when it
//! fits (see the crate docs).

use crate::DynamoStore;
use crate::action_index::WEIGHT;
use crate::audit::{
    ACTION_ID, BY_USER, CONVERSATION, Head, REVERTS, SEQ, SEQS, UNDONE_BY, audit_entry,
    refused_items,
};
use crate::error::unavailable;
use crate::item::{Item, corrupt, get_n, get_s, s};
use crate::keys::{ACT, PK, SK, action_sk, audit_pk, audit_sk, stack_prefix};
use crate::records::TRIES;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use std::collections::BTreeSet;
use store::{
    AuditEntry, StoreError, UndoOutcome, UndoRequest, UndoScope, reverting_changes, rows_to_undo,
};
use transcript::UserId;

/// The most items DynamoDB takes in one `TransactWriteItems`.
const MAX_TRANSACTION_ITEMS: usize = 100;

/// Log items read by the first request while looking for the top of the stack anywhere;
/// each further request reads twice as many, up to `LOG_PAGE_MAX`. DynamoDB bills every item
/// a page reads, matched or not, and the top is usually within the first few.
const LOG_PAGE: i32 = 4;
const LOG_PAGE_MAX: i32 = 128;

/// The filter that keeps a user's undo stack: theirs, not undone, not an undo. Its names and
/// value come with [`on_stack_names`].
const ON_STACK: &str = "#by_user = :yes AND attribute_not_exists(#undone_by) \
                        AND attribute_not_exists(#reverts)";

/// The names and value [`ON_STACK`] uses, on `query`.
fn on_stack_names(query: QueryFluentBuilder) -> QueryFluentBuilder {
    query
        .expression_attribute_names("#by_user", BY_USER)
        .expression_attribute_names("#undone_by", UNDONE_BY)
        .expression_attribute_names("#reverts", REVERTS)
        .expression_attribute_values(":yes", AttributeValue::Bool(true))
}

impl DynamoStore {
    pub(crate) async fn undo(&self, undo: &UndoRequest) -> Result<UndoOutcome, StoreError> {
        let user = &undo.user;
        for _ in 0..TRIES {
            let head = self.audit_head(user).await?;
            let prev = head.seq;
            let rows = self.undo_stack(user, &undo.scope, head).await?;
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
            // The action's count goes, and the seqs of the rows undone: its next commit counts
            // the rows left (rows from before the entries have no index).
            let indexed: Vec<u64> = rows
                .iter()
                .filter(|row| row.seq >= head.stack_from)
                .map(|row| row.seq)
                .collect();
            if !indexed.is_empty() {
                writes.push(self.index_undone(user, &action_id, &indexed)?);
            }
            // Last, so the refused items' positions above still name the changes.
            for change in &changes {
                writes.push(self.listing_write(change)?);
            }
            // The call's receipt, with the undo it records (DESIGN invariant 10).
            let receipt_at = writes.len();
            if let Some(receipt) = &undo.receipt {
                writes.push(self.receipt_put(&receipt.receipt)?);
            }
            // The undone rows' stack entries go too (rows from before the entries have none):
            // unconditional, so never the item a cancellation names. When they would take the
            // transaction past DynamoDB's 100 items, they go right after it, and a crash in
            // between leaves stale entries that `undo_stack` skips.
            let mut entries = rows
                .iter()
                .filter(|row| row.seq >= head.stack_from)
                .map(|row| self.stack_delete(row))
                .collect::<Result<Vec<_>, _>>()?;
            if writes.len() + entries.len() <= MAX_TRANSACTION_ITEMS {
                writes.append(&mut entries);
            }
            let sent = crate::transact::send(
                self.client
                    .transact_write_items()
                    .set_transact_items(Some(writes)),
            )
            .await;
            let Err(err) = sent else {
                self.remove_entries(user, entries).await;
                return Ok(UndoOutcome::Undone { action_id, changes });
            };
            let Some(refused) = refused_items(&err) else {
                return Err(unavailable(err));
            };
            let receipt_at = undo.receipt.as_ref().map(|_| receipt_at);
            match why_refused(&refused, receipt_at, changes.len()) {
                Refused::Recorded => {
                    return Err(StoreError::Conflict {
                        what: "the undo of this tool call is already recorded".into(),
                    });
                }
                Refused::ChangedSince(stale) => {
                    return Ok(UndoOutcome::ChangedSince {
                        action_id,
                        kind: changes[stale].kind.clone(),
                        id: changes[stale].id.clone(),
                    });
                }
                Refused::Nothing => return Err(unavailable(err)),
                Refused::LogMoved => {}
            }
            // The log moved (a concurrent commit or undo): read it again.
        }
        Err(StoreError::Unavailable(
            format!("audit log of {user}: too many concurrent writers").into(),
        ))
    }

    /// Stack entries an undo could not remove in its transaction, one by one; one that fails
    /// is logged and left (stale, skipped by `undo_stack`).
    async fn remove_entries(&self, user: &UserId, entries: Vec<TransactWriteItem>) {
        for entry in entries {
            let Some(delete) = entry.delete else { continue };
            let removed = self
                .client
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(delete.key))
                .send()
                .await;
            if let Err(err) = removed {
                tracing::warn!(%user, error = %unavailable(err), "an undone row's stack entry was left");
            }
        }
    }

    /// The rows the next undo in `scope` reverts, oldest first: the top of the stack in scope,
    /// then its action's rows from the action's index, through the one rule `rows_to_undo`.
    pub(crate) async fn undo_stack(
        &self,
        user: &UserId,
        scope: &UndoScope,
        head: Head,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let UndoScope::Conversation(conversation) = scope else {
            let Some(item) = self.newest_on_stack(user).await? else {
                // The whole log was read: nothing is on the stack.
                return Ok(Vec::new());
            };
            let (action, seq) = top_of(&item, user)?;
            let mut rows = if seq >= head.stack_from {
                self.rows_of_action(user, &action, scope).await?
            } else {
                self.stack_before(user, scope, head.stack_from).await?
            };
            if !rows.iter().any(|r| r.seq == seq) {
                // The index does not know the row found: an older version wrote it under an
                // action this one indexed later. The stack as it used to be read.
                tracing::warn!(%user, action, seq, "an action's index lacks a row on the stack: the whole log is read");
                rows = self.stack_before(user, scope, u64::MAX).await?;
            }
            return Ok(rows_to_undo(&rows, scope));
        };
        // The conversation's entries, newest first, in growing pages. An entry whose action has
        // nothing left to undo here is stale (an undo too large for one transaction removes its
        // entries after it, and a crash in between leaves them): the next one is read.
        let query = self
            .query()
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :stack)")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(audit_pk(user)))
            .expression_attribute_values(":stack", s(stack_prefix(Some(conversation))))
            .scan_index_forward(false)
            .consistent_read(true);
        let mut tried = BTreeSet::new();
        let mut start = None;
        let mut limit = 1;
        loop {
            let page = query
                .clone()
                .limit(limit)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            for item in page.items.unwrap_or_default() {
                let (action, _) = top_of(&item, user)?;
                if !tried.insert(action.clone()) {
                    continue;
                }
                let rows = rows_to_undo(&self.rows_of_action(user, &action, scope).await?, scope);
                if !rows.is_empty() {
                    return Ok(rows);
                }
                tracing::warn!(%user, action, "stale undo stack entry skipped");
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
            limit = (limit * 2).min(LOG_PAGE_MAX);
        }
        if head.stack_from <= 1 {
            return Ok(Vec::new());
        }
        // No entry in this conversation: the rows from before the entries, read as they used
        // to be.
        let rows = self.stack_before(user, scope, head.stack_from).await?;
        Ok(rows_to_undo(&rows, scope))
    }

    /// The newest row on the user's stack, wherever it was taken: the log newest first, in
    /// growing pages, until one is on the stack.
    async fn newest_on_stack(&self, user: &UserId) -> Result<Option<Item>, StoreError> {
        let query = self
            .query()
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :act)")
            .filter_expression(ON_STACK)
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(audit_pk(user)))
            .expression_attribute_values(":act", s(ACT))
            .scan_index_forward(false)
            .consistent_read(true);
        let query = on_stack_names(query);
        let mut start = None;
        let mut limit = LOG_PAGE;
        loop {
            let page = query
                .clone()
                .limit(limit)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(unavailable)?;
            if let Some(item) = page.items.and_then(|items| items.into_iter().next()) {
                return Ok(Some(item));
            }
            match page.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => return Ok(None),
            }
            limit = (limit * 2).min(LOG_PAGE_MAX);
        }
    }

    /// Every row of `action` its index names, newest first (an undo takes the seqs of the rows
    /// it marks out of the index; an index an older version kept names undone ones too, which
    /// `rows_to_undo` leaves out). An index with a weight and no seqs is an action undone whole:
    /// no rows. Without an index (a row written by an older version after this one started the
    /// entries), the stack in scope read from the whole log, as it used to be.
    async fn rows_of_action(
        &self,
        user: &UserId,
        action: &str,
        scope: &UndoScope,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(action_sk(action)))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        let what = format!("index of action {action} of {user}");
        if out
            .item
            .as_ref()
            .is_some_and(|item| item.contains_key(WEIGHT) && !item.contains_key(SEQS))
        {
            // Every row of it undone: an undo takes the seqs of what it marks out of the index.
            return Ok(Vec::new());
        }
        let Some(AttributeValue::Ns(seqs)) = out.item.as_ref().and_then(|item| item.get(SEQS))
        else {
            tracing::warn!(%user, action, "no index for an action on the undo stack: the whole log is read");
            return self.stack_before(user, scope, u64::MAX).await;
        };
        let keys = seqs
            .iter()
            .map(|q| {
                let seq: u64 = q.parse().map_err(|e| corrupt(&what, e))?;
                Ok(Item::from([
                    (PK.into(), s(audit_pk(user))),
                    (SK.into(), s(audit_sk(seq))),
                ]))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let mut rows = self
            .get_consistent(keys, &what)
            .await?
            .iter()
            .map(|item| audit_entry(item, user))
            .collect::<Result<Vec<_>, _>>()?;
        rows.sort_by_key(|r| std::cmp::Reverse(r.seq));
        Ok(rows)
    }

    /// The stack's rows in scope below `stack_from`, newest first, by a filtered query over
    /// that part of the log: the rows from before the entries existed (a part that no longer
    /// grows), or with `u64::MAX` the whole log.
    async fn stack_before(
        &self,
        user: &UserId,
        scope: &UndoScope,
        stack_from: u64,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let mut filter = ON_STACK.to_owned();
        let mut query = self
            .query()
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :first AND :last")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#sk", SK)
            .expression_attribute_values(":pk", s(audit_pk(user)))
            .expression_attribute_values(":first", s(audit_sk(0)))
            .expression_attribute_values(":last", s(audit_sk(stack_from.saturating_sub(1))))
            .scan_index_forward(false)
            .consistent_read(true);
        query = on_stack_names(query);
        if let UndoScope::Conversation(conversation) = scope {
            filter.push_str(" AND #conversation = :conversation");
            query = query
                .expression_attribute_names("#conversation", CONVERSATION)
                .expression_attribute_values(":conversation", s(&conversation.0));
        }
        let items = self.query_all(query.filter_expression(filter)).await?;
        items.iter().map(|item| audit_entry(item, user)).collect()
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

/// The action and seq a stack entry or an audit row names.
fn top_of(item: &Item, user: &UserId) -> Result<(String, u64), StoreError> {
    let what = format!("undo stack of {user}");
    let seq: u64 = get_n(item, SEQ, &what)?;
    Ok((get_s(item, ACTION_ID, &what)?.to_owned(), seq))
}

/// What a refused undo transaction's cancellation reasons say.
#[derive(Debug, PartialEq, Eq)]
enum Refused {
    /// The call's receipt exists: an attempt of this same call landed (and changed the
    /// records, which may be refused too): that, not a change since, is the answer.
    Recorded,
    /// The record of change `n` is no longer as the action left it.
    ChangedSince(usize),
    /// The log's head or an entry moved (a concurrent commit or undo): read it again.
    LogMoved,
    /// No item refused: the cancellation was for something else.
    Nothing,
}

/// `refused`: per item of the transaction, whether its condition failed; the first `changes`
/// items are the reverted records, `receipt_at` the receipt's put (when the undo has one).
fn why_refused(refused: &[bool], receipt_at: Option<usize>, changes: usize) -> Refused {
    if receipt_at.is_some_and(|at| refused.get(at) == Some(&true)) {
        return Refused::Recorded;
    }
    if let Some(stale) = (0..changes).find(|&i| refused.get(i) == Some(&true)) {
        return Refused::ChangedSince(stale);
    }
    if refused.iter().any(|r| *r) {
        Refused::LogMoved
    } else {
        Refused::Nothing
    }
}

#[cfg(test)]
mod refusal_tests {
    use super::*;

    /// A racing attempt of the same call landed: its records and the receipt are both
    /// refused, and the receipt decides.
    #[test]
    fn a_recorded_receipt_outranks_a_change_since() {
        assert_eq!(
            why_refused(&[true, false, true], Some(2), 1),
            Refused::Recorded
        );
        assert_eq!(
            why_refused(&[false, true, false], Some(2), 2),
            Refused::ChangedSince(1)
        );
        assert_eq!(
            why_refused(&[false, false, true], None, 2),
            Refused::LogMoved
        );
        assert_eq!(
            why_refused(&[false, false, false], Some(2), 2),
            Refused::Nothing
        );
    }
}
