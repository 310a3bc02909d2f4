//! Audit rows and the per-user audit head as items, and the transaction pieces every
//! `Records` write shares: a record change as a conditional write, the head's bump, and which
//! items a cancelled transaction refused. Pure except [`DynamoStore::audit_head`].

use crate::DynamoStore;
use crate::error::unavailable;
use crate::item::{Item, corrupt, get_n, get_s, n, s};
use crate::keys::{
    HEAD, PK, REC, SK, audit_pk, audit_sk, listing_sk, owner_pk, record_pk, stack_sk,
};
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use store::{ActorKind, AuditEntry, Change, StoreError, canonical_json};
use transcript::UserId;

pub(crate) const KIND: &str = "kind";
pub(crate) const RID: &str = "rid";
pub(crate) const OWNER: &str = "owner";
pub(crate) const BODY: &str = "body";
pub(crate) const SEQ: &str = "seq";
pub(crate) const ACTION_ID: &str = "action_id";
/// An action's index item: the seqs of its rows (a number set).
pub(crate) const SEQS: &str = "seqs";
const ACTOR: &str = "actor";
pub(crate) const BY_USER: &str = "by_user";
const AT_MS: &str = "at_ms";
const CHANGES: &str = "changes";
pub(crate) const REVERTS: &str = "reverts";
pub(crate) const UNDONE_BY: &str = "undone_by";
/// The conversation an audit row was recorded in (absent outside any).
pub(crate) const CONVERSATION: &str = "conversation";

/// The first seq written with an undo stack entry (see `keys::STACK`). Rows before it were
/// written before the entries existed: their undo reads the log as it used to.
const STACK_FROM: &str = "stack_from";

/// A user's audit head, read consistently.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    /// The last sequence number used (0 before the first row).
    pub seq: u64,
    /// Rows from this seq on have their undo stack entries and action index.
    pub stack_from: u64,
}

/// The head as read (`None`: no row yet).
pub(crate) fn head_of(item: Option<&Item>, user: &UserId) -> Result<Head, StoreError> {
    let Some(item) = item else {
        return Ok(Head {
            seq: 0,
            stack_from: 1,
        });
    };
    let what = format!("audit head of {user}");
    let seq = get_n(item, SEQ, &what)?;
    let stack_from = match item.get(STACK_FROM) {
        Some(_) => get_n(item, STACK_FROM, &what)?,
        None => seq + 1,
    };
    Ok(Head { seq, stack_from })
}

impl DynamoStore {
    pub(crate) async fn audit_head(&self, user: &UserId) -> Result<Head, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(HEAD))
            .consistent_read(true)
            .send()
            .await
            .map_err(unavailable)?;
        head_of(out.item.as_ref(), user)
    }

    /// A row on the undo stack gets its stack entry, in the transaction that writes it (none
    /// for a row that is not on the stack). Its seq goes into its action's index there too
    /// (`DynamoStore::index_write`).
    pub(crate) fn stack_entry(
        &self,
        row: &AuditEntry,
    ) -> Result<Option<TransactWriteItem>, StoreError> {
        if !row.on_undo_stack() {
            return Ok(None);
        }
        let entry = Put::builder()
            .table_name(&self.table)
            .item(PK, s(audit_pk(&row.user)))
            .item(SK, s(stack_sk(row.conversation.as_ref(), row.seq)))
            .item(ACTION_ID, s(&row.action_id))
            .item(SEQ, n(row.seq))
            .build()
            .map_err(unavailable)?;
        Ok(Some(TransactWriteItem::builder().put(entry).build()))
    }

    /// An undone row leaves the stack: its entry goes (none for a row from before entries).
    pub(crate) fn stack_delete(&self, row: &AuditEntry) -> Result<TransactWriteItem, StoreError> {
        let delete = Delete::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(&row.user)))
            .key(SK, s(stack_sk(row.conversation.as_ref(), row.seq)))
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().delete(delete).build())
    }

    /// The head moves from `prev` to `prev + 1`, only if nobody moved it first.
    pub(crate) fn head_bump(
        &self,
        user: &UserId,
        prev: u64,
    ) -> Result<TransactWriteItem, StoreError> {
        let update = Update::builder()
            .table_name(&self.table)
            .key(PK, s(audit_pk(user)))
            .key(SK, s(HEAD))
            .update_expression("SET #seq = :next, #from = if_not_exists(#from, :next)")
            .expression_attribute_names("#seq", SEQ)
            .expression_attribute_names("#from", STACK_FROM)
            .expression_attribute_values(":next", n(prev + 1));
        let update = if prev == 0 {
            update.condition_expression("attribute_not_exists(pk)")
        } else {
            update
                .condition_expression("#seq = :prev")
                .expression_attribute_values(":prev", n(prev))
        };
        Ok(TransactWriteItem::builder()
            .update(update.build().map_err(unavailable)?)
            .build())
    }

    /// The audit row as a `Put` that must not overwrite a row.
    pub(crate) fn audit_put(&self, row: &AuditEntry) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(&self.table)
            .set_item(Some(audit_item(row)?))
            .condition_expression("attribute_not_exists(pk)")
            .build()
            .map_err(unavailable)?;
        Ok(TransactWriteItem::builder().put(put).build())
    }

    /// One record change as a conditional write: a create needs the record absent, anything
    /// else needs it to hold `before` for the same owner.
    pub(crate) fn change_write(&self, c: &Change) -> Result<TransactWriteItem, StoreError> {
        let key = |b: aws_sdk_dynamodb::types::builders::DeleteBuilder| {
            b.key(PK, s(record_pk(&c.kind, &c.id))).key(SK, s(REC))
        };
        let write = match (&c.before, &c.after) {
            (None, Some(after)) => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(record_item(c, after)))
                    .condition_expression("attribute_not_exists(pk)")
                    .build()
                    .map_err(unavailable)?,
            ),
            (Some(before), Some(after)) => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(record_item(c, after)))
                    .condition_expression("#body = :before AND #owner = :owner")
                    .expression_attribute_names("#body", BODY)
                    .expression_attribute_names("#owner", OWNER)
                    .expression_attribute_values(":before", s(canonical_json(before)))
                    .expression_attribute_values(":owner", s(&c.owner.0))
                    .build()
                    .map_err(unavailable)?,
            ),
            (Some(before), None) => TransactWriteItem::builder().delete(
                key(Delete::builder().table_name(&self.table))
                    .condition_expression("#body = :before AND #owner = :owner")
                    .expression_attribute_names("#body", BODY)
                    .expression_attribute_names("#owner", OWNER)
                    .expression_attribute_values(":before", s(canonical_json(before)))
                    .expression_attribute_values(":owner", s(&c.owner.0))
                    .build()
                    .map_err(unavailable)?,
            ),
            (None, None) => {
                return Err(StoreError::Invalid {
                    what: format!("change of {}/{} does nothing", c.kind, c.id),
                });
            }
        };
        Ok(write.build())
    }

    /// The change applied to the owner's listing. Unconditional: the record's own write carries
    /// the condition, and the transaction stands or falls as one.
    pub(crate) fn listing_write(&self, c: &Change) -> Result<TransactWriteItem, StoreError> {
        let write = match &c.after {
            Some(after) => TransactWriteItem::builder().put(
                Put::builder()
                    .table_name(&self.table)
                    .set_item(Some(listing_item(c, after)))
                    .build()
                    .map_err(unavailable)?,
            ),
            None => TransactWriteItem::builder().delete(
                Delete::builder()
                    .table_name(&self.table)
                    .key(PK, s(owner_pk(&c.owner, &c.kind)))
                    .key(SK, s(listing_sk(&c.id)))
                    .build()
                    .map_err(unavailable)?,
            ),
        };
        Ok(write.build())
    }
}

/// For a cancelled transaction: which of its items failed their condition, in request order.
/// `None` for any other error.
pub(crate) fn refused_items(err: &SdkError<TransactWriteItemsError>) -> Option<Vec<bool>> {
    match err.as_service_error()? {
        TransactWriteItemsError::TransactionCanceledException(e) => Some(
            e.cancellation_reasons()
                .iter()
                .map(|r| r.code() == Some("ConditionalCheckFailed"))
                .collect(),
        ),
        _ => None,
    }
}

pub(crate) fn record_item(c: &Change, value: &serde_json::Value) -> Item {
    record_attributes(record_pk(&c.kind, &c.id), REC.into(), c, value)
}

/// The record's copy in its owner's listing (`OWNER#<owner>#<kind>` / `REC#<id>`), written in
/// the same transaction as the record, so `records_of` is one strongly consistent `Query`.
pub(crate) fn listing_item(c: &Change, value: &serde_json::Value) -> Item {
    record_attributes(owner_pk(&c.owner, &c.kind), listing_sk(&c.id), c, value)
}

fn record_attributes(pk: String, sk: String, c: &Change, value: &serde_json::Value) -> Item {
    Item::from([
        (PK.into(), s(pk)),
        (SK.into(), s(sk)),
        (KIND.into(), s(&c.kind)),
        (RID.into(), s(&c.id)),
        (OWNER.into(), s(&c.owner.0)),
        (BODY.into(), s(canonical_json(value))),
    ])
}

fn audit_item(row: &AuditEntry) -> Result<Item, StoreError> {
    let changes = serde_json::to_string(&row.changes).map_err(|e| StoreError::Invalid {
        what: format!("audit changes of {}: {e}", row.action_id),
    })?;
    let mut item = Item::from([
        (PK.into(), s(audit_pk(&row.user))),
        (SK.into(), s(audit_sk(row.seq))),
        (SEQ.into(), n(row.seq)),
        (ACTION_ID.into(), s(&row.action_id)),
        (ACTOR.into(), s(row.actor.as_str())),
        (BY_USER.into(), AttributeValue::Bool(row.by_user)),
        (AT_MS.into(), n(row.at_ms)),
        (CHANGES.into(), s(changes)),
    ]);
    if let Some(reverts) = &row.reverts {
        item.insert(REVERTS.into(), s(reverts));
    }
    if let Some(undone_by) = &row.undone_by {
        item.insert(UNDONE_BY.into(), s(undone_by));
    }
    if let Some(conversation) = &row.conversation {
        item.insert(CONVERSATION.into(), s(&conversation.0));
    }
    Ok(item)
}

pub(crate) fn audit_entry(item: &Item, user: &UserId) -> Result<AuditEntry, StoreError> {
    let seq: u64 = get_n(item, SEQ, &format!("audit row of {user}"))?;
    let what = format!("audit row {user}#{seq}");
    let actor = get_s(item, ACTOR, &what)?;
    let optional = |name: &str| match item.get(name) {
        Some(AttributeValue::S(v)) => Some(v.clone()),
        _ => None,
    };
    Ok(AuditEntry {
        seq,
        action_id: get_s(item, ACTION_ID, &what)?.to_owned(),
        actor: ActorKind::parse(actor)
            .ok_or_else(|| corrupt(&what, format!("unknown actor {actor:?}")))?,
        user: user.clone(),
        by_user: matches!(item.get(BY_USER), Some(AttributeValue::Bool(true))),
        at_ms: get_n(item, AT_MS, &what)?,
        changes: serde_json::from_str(get_s(item, CHANGES, &what)?)
            .map_err(|e| corrupt(&what, e))?,
        reverts: optional(REVERTS),
        undone_by: optional(UNDONE_BY),
        conversation: optional(CONVERSATION).map(transcript::ConversationId),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_audit_row_round_trips_through_its_item() {
        let row = AuditEntry {
            seq: 42,
            action_id: "web#m-1".into(),
            actor: ActorKind::Public,
            user: "alice".into(),
            by_user: false,
            at_ms: -5,
            changes: vec![Change {
                kind: "event".into(),
                id: "e#1".into(),
                owner: "alice".into(),
                before: None,
                after: Some(json!({"b": 1, "a": [null]})),
            }],
            reverts: Some("a-0".into()),
            undone_by: None,
            conversation: Some("web:c-1".into()),
        };
        let item = audit_item(&row).unwrap();
        assert_eq!(item[PK], s("AUDIT#alice"));
        assert_eq!(item[SK], s("ACT#00000000000000000042"));
        assert_eq!(audit_entry(&item, &"alice".into()).unwrap(), row);
    }

    #[test]
    fn a_record_item_is_listed_under_its_owner_and_kind() {
        let c = Change {
            kind: "event".into(),
            id: "e#1".into(),
            owner: "alice".into(),
            before: None,
            after: None,
        };
        let item = record_item(&c, &json!({"z": 1, "a": 2}));
        assert_eq!(item[PK], s("REC#event#e#1"));
        assert_eq!(item[BODY], s(r#"{"a":2,"z":1}"#));
        let listed = listing_item(&c, &json!({"z": 1, "a": 2}));
        assert_eq!(listed[PK], s("OWNER#alice#event"));
        assert_eq!(listed[SK], s("REC#e#1"));
        for attr in [KIND, RID, OWNER, BODY] {
            assert_eq!(listed[attr], item[attr], "{attr}");
        }
    }
}
