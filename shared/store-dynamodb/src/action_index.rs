//! An action's index item (`AUDIT#<user>` / `AIDX#<action id>`): the seqs of its rows, what
//! they weigh (`store::MAX_ACTION_WEIGHT`) and what its undo would hold (`store::UndoSize`:
//! `undo_bytes`; `touched`, a map from each record the action touched to the bytes of the
//! value it last wrote; `row_bytes`). A commit on the undo stack reads it with the audit head in one
//! `BatchGetItem`, decides both limits from what it read, and writes it back in its transaction
//! on the condition that it still holds the weight and bytes that were read. The two reads are
//! not one snapshot; the conditions make them safe: every writer of an index (a commit, which
//! adds at least 3 to its weight, or an undo) also moves the head, so a commit that read either
//! before another's write is refused and reads them again. An undo removes the count, and the
//! action's next commit counts afresh from its rows (as for an index an older version wrote).

use crate::DynamoStore;
use crate::audit::{Head, SEQS, head_of};
use crate::error::unavailable;
use crate::item::{Item, corrupt, n, s};
use crate::keys::{HEAD, PK, SK, action_sk, audit_pk};
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use std::collections::HashMap;
use store::{ActionCommit, StoreError, UndoScope, UndoSize};
use transcript::UserId;

/// What the action's rows weigh.
const WEIGHT: &str = "weight";
/// What the action's undo would hold, in bytes.
const UNDO_BYTES: &str = "undo_bytes";
/// The records the action touched, each with the bytes of the value it last wrote.
const TOUCHED: &str = "touched";
/// What the action's rows hold together.
const ROW_BYTES: &str = "row_bytes";

/// An action's index as a commit read it: the weight and bytes as stored (`None` where absent:
/// no item yet, an older version's, or one an undo took the count from), and the count.
#[derive(Debug, Default, Clone)]
pub(crate) struct ActionIndex {
    weight: Option<String>,
    undo_bytes: Option<String>,
    size: Option<UndoSize>,
}

impl ActionIndex {
    fn of(item: &Item, what: &str) -> Result<Self, StoreError> {
        let number = |name: &str| match item.get(name) {
            None => Ok(None),
            Some(AttributeValue::N(v)) => Ok(Some(v.clone())),
            Some(other) => Err(corrupt(what, format!("attribute {name}: {other:?}"))),
        };
        let (weight, undo_bytes) = (number(WEIGHT)?, number(UNDO_BYTES)?);
        let size = match (&undo_bytes, item.get(TOUCHED)) {
            (None, _) => None,
            (Some(bytes), Some(AttributeValue::M(touched))) => Some(UndoSize {
                bytes: bytes.parse().map_err(|e| corrupt(what, e))?,
                rows: number(ROW_BYTES)?
                    .ok_or_else(|| corrupt(what, format!("no {ROW_BYTES}")))?
                    .parse()
                    .map_err(|e| corrupt(what, e))?,
                last: touched
                    .iter()
                    .map(|(key, v)| match v {
                        AttributeValue::N(b) => {
                            Ok((key.clone(), b.parse().map_err(|e| corrupt(what, e))?))
                        }
                        other => Err(corrupt(
                            what,
                            format!("attribute {TOUCHED}.{key}: {other:?}"),
                        )),
                    })
                    .collect::<Result<_, StoreError>>()?,
            }),
            (Some(_), other) => {
                return Err(corrupt(what, format!("attribute {TOUCHED}: {other:?}")));
            }
        };
        Ok(ActionIndex {
            weight,
            undo_bytes,
            size,
        })
    }

    /// What the action's rows weigh so far.
    pub(crate) fn weight(&self) -> usize {
        self.weight
            .as_deref()
            .and_then(|w| w.parse().ok())
            .unwrap_or(0)
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

    /// What the action's undo holds before `commit`: as its index read, or counted afresh from
    /// its rows when the index has rows but no count.
    pub(crate) async fn undo_size(
        &self,
        commit: &ActionCommit,
        index: &ActionIndex,
    ) -> Result<UndoSize, StoreError> {
        match (&index.size, &index.weight) {
            (Some(size), _) => Ok(size.clone()),
            (None, None) => Ok(UndoSize::default()),
            (None, Some(_)) => {
                let rows = self
                    .rows_of_action(&commit.user, &commit.action_id, &UndoScope::Anywhere)
                    .await?;
                Ok(UndoSize::of_rows(&commit.action_id, &rows))
            }
        }
    }

    /// The action's index after `seq`'s row: its weight and count set to what the commit
    /// decided and `seq` added, on the condition that the index still holds the weight and
    /// bytes the commit read (a refusal means another commit or an undo moved it).
    pub(crate) fn index_write(
        &self,
        commit: &ActionCommit,
        seq: u64,
        read: &ActionIndex,
        size: &UndoSize,
    ) -> Result<TransactWriteItem, StoreError> {
        let touched: HashMap<String, AttributeValue> = size
            .last
            .iter()
            .map(|(key, bytes)| (key.clone(), n(bytes)))
            .collect();
        let mut update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(&commit.user)))
            .key(SK, s(action_sk(&commit.action_id)))
            .update_expression(
                "SET #weight = :weight, #bytes = :bytes, #touched = :touched, #rows = :rows \
                 ADD #seqs :seq",
            )
            .expression_attribute_names("#rows", ROW_BYTES)
            .expression_attribute_values(":rows", n(size.rows))
            .expression_attribute_names("#seqs", SEQS)
            .expression_attribute_names("#weight", WEIGHT)
            .expression_attribute_names("#bytes", UNDO_BYTES)
            .expression_attribute_names("#touched", TOUCHED)
            .expression_attribute_values(":seq", AttributeValue::Ns(vec![seq.to_string()]))
            .expression_attribute_values(":weight", n(read.weight() + commit.weight()))
            .expression_attribute_values(":bytes", n(size.bytes))
            .expression_attribute_values(":touched", AttributeValue::M(touched));
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

    /// An undo of `action_id` takes its count away (see the module docs). Unconditional: the
    /// head's condition orders it.
    pub(crate) fn index_uncounted(
        &self,
        user: &UserId,
        action_id: &str,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(action_sk(action_id)))
            .update_expression("REMOVE #bytes, #touched, #rows")
            .expression_attribute_names("#bytes", UNDO_BYTES)
            .expression_attribute_names("#touched", TOUCHED)
            .expression_attribute_names("#rows", ROW_BYTES)
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_without_a_count_reads_as_weight_only_and_a_wrong_count_as_corrupt() {
        let item = Item::from([
            (WEIGHT.into(), n(9)),
            (SEQS.into(), AttributeValue::Ns(vec!["3".into()])),
        ]);
        let index = ActionIndex::of(&item, "test").unwrap();
        assert_eq!(index.weight(), 9);
        assert!(index.size.is_none());
        let wrong = Item::from([
            (UNDO_BYTES.into(), n(9)),
            (TOUCHED.into(), AttributeValue::Ss(vec!["event#e1".into()])),
        ]);
        assert!(matches!(
            ActionIndex::of(&wrong, "test"),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
