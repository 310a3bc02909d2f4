//! An action's index item (`AUDIT#<user>` / `AIDX#<action id>`): the seqs of its rows, what
//! they weigh (`store::MAX_ACTION_WEIGHT`) and what its undo would hold (`store::UndoSize`:
//! `undo_bytes`, `last` — a map from each record the action touched to the bytes of the
//! value it last wrote — `row_bytes`, and `counted_weight`, the weight it was kept at: an
//! older version's commit during a deploy moves the weight without counting, and the count is
//! then made again). A commit on the undo stack reads it with the audit
//! head in one `BatchGetItem`, decides both limits from what it read, and writes it back in
//! its transaction on the condition that it still holds the weight and bytes that were read.
//! The two reads are not one snapshot; the conditions make them safe: every writer of an index
//! (a commit, which adds at least 3 to its weight, or an undo, which removes its bytes) also
//! moves the head, so a commit that read either before another's write is refused and reads
//! them again. An undo removes the count and its rows' seqs, and the action's next commit
//! counts afresh from the rows left (as for an index an older version wrote).

use crate::DynamoStore;
use crate::audit::{Head, SEQS, audit_entry, head_of};
use crate::error::unavailable;
use crate::item::{Item, corrupt, n, s};
use crate::keys::{HEAD, PK, SK, action_sk, audit_pk, audit_sk};
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use std::collections::{BTreeMap, HashMap};
use store::{ActionCommit, StoreError, UndoSize};
use transcript::UserId;

/// What the action's rows weigh.
pub(crate) const WEIGHT: &str = "weight";
/// What the action's undo would hold, in bytes.
const UNDO_BYTES: &str = "undo_bytes";
/// The records the action touched, each with the bytes of the value it last wrote.
const LAST: &str = "last";
/// What the action's rows hold together.
const ROW_BYTES: &str = "row_bytes";
/// The weight the count was kept at: an index whose weight moved since (an older version's
/// commit, during a deploy, adds its row without counting it) is counted again.
const COUNTED_WEIGHT: &str = "counted_weight";

/// An action's index as a commit read it: whether there is one, its seqs, the weight and bytes
/// as stored (`None` where absent: no item yet, an older version's, or one an undo took the
/// count from), and the count when it is whole.
#[derive(Debug, Default, Clone)]
pub(crate) struct ActionIndex {
    exists: bool,
    seqs: Vec<u64>,
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
        let seqs = match item.get(SEQS) {
            Some(AttributeValue::Ns(seqs)) => seqs
                .iter()
                .map(|q| q.parse().map_err(|e| corrupt(what, e)))
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let (weight, undo_bytes) = (number(WEIGHT)?, number(UNDO_BYTES)?);
        let whole = weight.is_some() && number(COUNTED_WEIGHT)? == weight;
        Ok(ActionIndex {
            exists: true,
            seqs,
            size: count(item, undo_bytes.as_deref(), number(ROW_BYTES)?.as_deref())
                .filter(|_| whole),
            weight,
            undo_bytes,
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

/// The count, when the item holds one whole in this version's shape; else `None`, and it is
/// counted again from the rows.
fn count(item: &Item, bytes: Option<&str>, row_bytes: Option<&str>) -> Option<UndoSize> {
    let Some(AttributeValue::M(last)) = item.get(LAST) else {
        return None;
    };
    let last = last
        .iter()
        .map(|(key, v)| match v {
            AttributeValue::N(b) => b.parse().ok().map(|b| (key.clone(), b)),
            _ => None,
        })
        .collect::<Option<BTreeMap<_, _>>>()?;
    Some(UndoSize {
        bytes: bytes?.parse().ok()?,
        last,
        row_bytes: row_bytes?.parse().ok()?,
    })
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
    /// its rows (those its index names) when the index has no count.
    pub(crate) async fn undo_size(
        &self,
        commit: &ActionCommit,
        index: &ActionIndex,
    ) -> Result<UndoSize, StoreError> {
        if let Some(size) = &index.size {
            return Ok(size.clone());
        }
        if !index.exists || index.seqs.is_empty() {
            return Ok(UndoSize::default());
        }
        let user = &commit.user;
        let keys = index
            .seqs
            .iter()
            .map(|seq| {
                Item::from([
                    (PK.into(), s(audit_pk(user))),
                    (SK.into(), s(audit_sk(*seq))),
                ])
            })
            .collect();
        let rows = self
            .get_consistent(
                keys,
                &format!("rows of action {} of {user}", commit.action_id),
            )
            .await?
            .iter()
            .map(|item| audit_entry(item, user))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(UndoSize::of_rows(&commit.action_id, &rows))
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
        let last: HashMap<String, AttributeValue> = size
            .last
            .iter()
            .map(|(key, bytes)| (key.clone(), n(bytes)))
            .collect();
        let mut update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(&commit.user)))
            .key(SK, s(action_sk(&commit.action_id)))
            .update_expression(
                "SET #weight = :weight, #counted = :weight, #bytes = :bytes, #last = :last, \
                 #rows = :rows ADD #seqs :seq",
            )
            .expression_attribute_names("#counted", COUNTED_WEIGHT)
            .expression_attribute_names("#rows", ROW_BYTES)
            .expression_attribute_values(":rows", n(size.row_bytes))
            .expression_attribute_names("#seqs", SEQS)
            .expression_attribute_names("#weight", WEIGHT)
            .expression_attribute_names("#bytes", UNDO_BYTES)
            .expression_attribute_names("#last", LAST)
            .expression_attribute_values(":seq", AttributeValue::Ns(vec![seq.to_string()]))
            .expression_attribute_values(":weight", n(read.weight() + commit.weight()))
            .expression_attribute_values(":bytes", n(size.bytes))
            .expression_attribute_values(":last", AttributeValue::M(last));
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

    /// An undo of `action_id` takes its count away, and the seqs of the rows it marked undone
    /// (see the module docs). Unconditional: the head's condition orders it.
    pub(crate) fn index_undone(
        &self,
        user: &UserId,
        action_id: &str,
        undone: &[u64],
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(action_sk(action_id)))
            .update_expression("REMOVE #bytes, #last, #rows, #counted DELETE #seqs :undone")
            .expression_attribute_names("#counted", COUNTED_WEIGHT)
            .expression_attribute_names("#bytes", UNDO_BYTES)
            .expression_attribute_names("#last", LAST)
            .expression_attribute_names("#rows", ROW_BYTES)
            .expression_attribute_names("#seqs", SEQS)
            .expression_attribute_values(
                ":undone",
                AttributeValue::Ns(undone.iter().map(u64::to_string).collect()),
            )
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().update(update).build())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_without_a_whole_count_is_counted_again() {
        let item = Item::from([
            (WEIGHT.into(), n(9)),
            (
                SEQS.into(),
                AttributeValue::Ns(vec!["3".into(), "5".into()]),
            ),
        ]);
        let index = ActionIndex::of(&item, "test").unwrap();
        assert_eq!((index.weight(), index.seqs.len()), (9, 2));
        assert!(index.exists && index.size.is_none());
        // An earlier shape of the count (the records as a string set): counted again too.
        let earlier = Item::from([
            (UNDO_BYTES.into(), n(9)),
            (
                "touched".into(),
                AttributeValue::Ss(vec!["event#e1".into()]),
            ),
        ]);
        assert!(ActionIndex::of(&earlier, "test").unwrap().size.is_none());
        let whole = Item::from([
            (WEIGHT.into(), n(6)),
            (COUNTED_WEIGHT.into(), n(6)),
            (UNDO_BYTES.into(), n(90)),
            (ROW_BYTES.into(), n(120)),
            (
                LAST.into(),
                AttributeValue::M(HashMap::from([("event#e1".into(), n(40))])),
            ),
        ]);
        let size = ActionIndex::of(&whole, "test").unwrap().size.unwrap();
        assert_eq!(
            (size.bytes, size.row_bytes, size.last["event#e1"]),
            (90, 120, 40)
        );
        // An older version's commit moved the weight without counting: counted again.
        let mut moved = whole.clone();
        moved.insert(WEIGHT.into(), n(9));
        assert!(ActionIndex::of(&moved, "test").unwrap().size.is_none());
        let wrong = Item::from([(WEIGHT.into(), s("nine"))]);
        assert!(matches!(
            ActionIndex::of(&wrong, "test"),
            Err(StoreError::Corrupt { .. })
        ));
    }
}
