//! An action's index item (`AUDIT#<user>` / `ACTION#<action id>`): the seqs of its rows, what
//! they weigh (`store::MAX_ACTION_WEIGHT`), what its undo would hold in bytes and the records
//! it touched (`store`'s `undo_bytes`). A commit on the undo stack reads it with the audit head
//! in one request, decides both limits from what it read, and writes it back in its transaction
//! on the condition that it still holds what was read; an undo moves its bytes.

use crate::DynamoStore;
use crate::audit::{Head, SEQS, head_of};
use crate::error::unavailable;
use crate::item::{Item, corrupt, n, s};
use crate::keys::{HEAD, PK, SK, action_sk, audit_pk};
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use std::collections::BTreeSet;
use store::{ActionCommit, StoreError};
use transcript::UserId;

/// What the action's rows weigh.
pub(crate) const WEIGHT: &str = "weight";
/// What the action's undo would hold, in bytes.
const UNDO_BYTES: &str = "undo_bytes";
/// The records the action touched (`store::touched_key`), a string set.
const TOUCHED: &str = "touched";

/// An action's index as a commit read it; `None` where an attribute was absent (no item yet,
/// or one an older version wrote).
#[derive(Debug, Default, Clone)]
pub(crate) struct ActionIndex {
    weight: Option<String>,
    undo_bytes: Option<String>,
    touched: BTreeSet<String>,
}

impl ActionIndex {
    fn of(item: &Item, what: &str) -> Result<Self, StoreError> {
        let number = |name: &str| match item.get(name) {
            None => Ok(None),
            Some(AttributeValue::N(v)) => Ok(Some(v.clone())),
            Some(other) => Err(corrupt(what, format!("attribute {name}: {other:?}"))),
        };
        Ok(ActionIndex {
            weight: number(WEIGHT)?,
            undo_bytes: number(UNDO_BYTES)?,
            touched: match item.get(TOUCHED) {
                Some(AttributeValue::Ss(keys)) => keys.iter().cloned().collect(),
                _ => BTreeSet::new(),
            },
        })
    }

    /// What the action's rows weigh so far.
    pub(crate) fn weight(&self) -> usize {
        self.weight
            .as_deref()
            .and_then(|w| w.parse().ok())
            .unwrap_or(0)
    }

    /// What the action's undo would hold once `commit` is in.
    pub(crate) fn undo_bytes_after(&self, commit: &ActionCommit) -> usize {
        // An undo can leave a negative total on an index an older version wrote: none.
        let earlier = self
            .undo_bytes
            .as_deref()
            .and_then(|b| b.parse().ok())
            .unwrap_or(0);
        commit.undo_bytes_after(earlier, |c| {
            self.touched.contains(&store::touched_key(&c.kind, &c.id))
        })
    }
}

impl DynamoStore {
    /// The user's audit head and the action's index, read consistently in one request.
    pub(crate) async fn head_and_index(
        &self,
        user: &UserId,
        action_id: &str,
    ) -> Result<(Head, ActionIndex), StoreError> {
        let pk = audit_pk(user);
        let key = |sk: String| Item::from([(PK.into(), s(&pk)), (SK.into(), s(sk))]);
        let items = self
            .get_consistent(
                vec![key(HEAD.into()), key(action_sk(action_id))],
                &format!("audit head and action {action_id} of {user}"),
            )
            .await?;
        let is =
            |item: &Item, sk: &str| matches!(item.get(SK), Some(AttributeValue::S(v)) if v == sk);
        let head = head_of(items.iter().find(|i| is(i, HEAD)), user)?;
        let index = match items.iter().find(|i| is(i, &action_sk(action_id))) {
            Some(item) => ActionIndex::of(item, &format!("action {action_id} of {user}"))?,
            None => ActionIndex::default(),
        };
        Ok((head, index))
    }

    /// The action's index after `seq`'s row: its weight and bytes set to what the commit
    /// decided, `seq` and the touched records added, on the condition that the index still
    /// holds what the commit read (a refusal means another commit or an undo moved it).
    pub(crate) fn index_write(
        &self,
        user: &UserId,
        commit: &ActionCommit,
        seq: u64,
        read: &ActionIndex,
        undo_bytes: usize,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(action_sk(&commit.action_id)))
            .update_expression(
                "SET #weight = :weight, #bytes = :bytes ADD #seqs :seq, #touched :keys",
            )
            .expression_attribute_names("#seqs", SEQS)
            .expression_attribute_names("#weight", WEIGHT)
            .expression_attribute_names("#bytes", UNDO_BYTES)
            .expression_attribute_names("#touched", TOUCHED)
            .expression_attribute_values(":seq", AttributeValue::Ns(vec![seq.to_string()]))
            .expression_attribute_values(":weight", n(read.weight() + commit.weight()))
            .expression_attribute_values(":bytes", n(undo_bytes))
            .expression_attribute_values(":keys", AttributeValue::Ss(commit.touched_keys()));
        let mut holds = Vec::new();
        for (name, seen, value) in [
            ("#weight", &read.weight, ":seen_weight"),
            ("#bytes", &read.undo_bytes, ":seen_bytes"),
        ] {
            match seen {
                Some(v) => {
                    holds.push(format!("{name} = {value}"));
                    update =
                        update.expression_attribute_values(value, AttributeValue::N(v.clone()));
                }
                None => holds.push(format!("attribute_not_exists({name})")),
            }
        }
        let update = update
            .condition_expression(holds.join(" AND "))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }

    /// An undo of `action_id` moves what its undo would hold by `delta` bytes
    /// (`store::undone_bytes`). Unconditional: the head's condition orders it.
    pub(crate) fn index_undone(
        &self,
        user: &UserId,
        action_id: &str,
        delta: i64,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(action_sk(action_id)))
            .update_expression("ADD #bytes :delta")
            .expression_attribute_names("#bytes", UNDO_BYTES)
            .expression_attribute_values(":delta", AttributeValue::N(delta.to_string()))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_an_older_version_wrote_reads_as_weight_only() {
        let item = Item::from([
            (WEIGHT.into(), n(9)),
            (SEQS.into(), AttributeValue::Ns(vec!["3".into()])),
        ]);
        let index = ActionIndex::of(&item, "test").unwrap();
        assert_eq!(index.weight(), 9);
        assert_eq!(index.undo_bytes, None);
        assert!(index.touched.is_empty());
    }
}
