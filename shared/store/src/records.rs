//! `Records`: the generic, owned-record store a product domain sits on, with its audit log and
//! undo stack.
//!
//! A record is a JSON value stored under `(kind, id)` and owned by one user. Every write is an
//! [`ActionCommit`]: several record changes plus one audit row, applied atomically. Changes are
//! optimistic: each [`Change::before`] must equal what is stored (compared as
//! [`canonical_json`](crate::canonical_json)), else the whole commit is
//! [`StoreError::Conflict`] and nothing is written.
//!
//! Undo ([`Records::undo_last`]) reverts the newest action still on a user's undo stack, within
//! an [`UndoScope`]: the audit rows that the user initiated (`by_user`), that are not undone yet,
//! that are not themselves undos and, for [`UndoScope::Conversation`], that were recorded in
//! that conversation. All rows of that action id are reverted together, in one atomic write,
//! each record conditioned on still holding what the action left there. The undo's own row
//! names who undid (its actor) and where.

use crate::StoreError;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use transcript::{ConversationId, UserId};

/// One stored record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub kind: String,
    pub id: String,
    pub owner: UserId,
    pub value: Value,
}

/// One record change of a commit: `None` before = create, `None` after = delete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub kind: String,
    pub id: String,
    pub owner: UserId,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Who made an action, for the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// The user directly (a button, a form of their own).
    User,
    /// The model, on the user's behalf.
    Agent,
    /// An MCP client, on the user's behalf.
    Mcp,
    /// Someone else through a public entry point (a registration form).
    Public,
}

impl ActorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::User => "user",
            ActorKind::Agent => "agent",
            ActorKind::Mcp => "mcp",
            ActorKind::Public => "public",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "user" => ActorKind::User,
            "agent" => ActorKind::Agent,
            "mcp" => ActorKind::Mcp,
            "public" => ActorKind::Public,
            _ => return None,
        })
    }
}

/// The most the commits of one action on the user's undo stack may weigh together: two per
/// change and one per commit ([`ActionCommit::weight`]). One undo reverts a whole action in one
/// atomic write, and DynamoDB takes at most 100 items in one: two per record reverted, one per
/// row and four more (the head, the undo's row, the action's index, a receipt). What the action
/// writes is limited in bytes too (`undo_bytes.rs`: [`MAX_RECORD_BYTES`](crate::MAX_RECORD_BYTES),
/// [`MAX_ROW_BYTES`](crate::MAX_ROW_BYTES)). Past it a commit is
/// [`StoreError::TooLarge`] and writes nothing, so a turn (however a model chains its calls)
/// can never make itself too big to undo, or block the undos behind it. The next action starts
/// afresh. Commits of other parties (not on the stack) are not counted.
pub const MAX_ACTION_WEIGHT: usize = 96;

/// One atomic write: the changes and the audit row that records them.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionCommit {
    /// The request's action id (one user turn); several commits may share it.
    pub action_id: String,
    pub actor: ActorKind,
    /// Whose audit log (and undo stack) the row goes to: the owner of the records.
    pub user: UserId,
    /// Initiated by `user` (themselves or their agent): on their undo stack. `false` for other
    /// parties, e.g. a public registration form.
    pub by_user: bool,
    pub at_ms: i64,
    pub changes: Vec<Change>,
    /// When a model's tool call makes this write: the call's receipt, written in the same
    /// transaction (DESIGN invariant 10), so the effect and the record that it happened are
    /// one. A second commit with the same receipt key is [`StoreError::Conflict`].
    pub receipt: Option<Receipt>,
    /// The conversation the action was taken in (`None` outside any: a form, a setup script).
    /// A conversation's undo reverts only its own actions.
    pub conversation: Option<ConversationId>,
}

/// The record that a tool call's effect was committed: the call's key
/// ([`ToolResults::receipt`](crate::ToolResults::receipt) reads it back) and the output the
/// tool returns for it, so a resumed turn answers the call without running it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Receipt {
    /// The tool call's key: conversation, the asking message's position and the call's id.
    pub call_key: String,
    /// The tool's output, as its handler returns it (before the runner shapes it).
    pub output: Value,
}

impl ActionCommit {
    /// What this commit adds to its action's weight (see [`MAX_ACTION_WEIGHT`]): two per change
    /// and one for its row; nothing for a commit not on the user's undo stack.
    pub fn weight(&self) -> usize {
        if self.by_user {
            2 * self.changes.len() + 1
        } else {
            0
        }
    }

    /// [`StoreError::TooLarge`] when this commit would take its action, which already weighs
    /// `earlier`, past [`MAX_ACTION_WEIGHT`].
    pub fn check_weight(&self, earlier: usize) -> Result<(), StoreError> {
        if self.weight() == 0 || earlier + self.weight() <= MAX_ACTION_WEIGHT {
            return Ok(());
        }
        Err(StoreError::TooLarge {
            what: format!(
                "action {} would change more than one undo can take back ({} + {} > {MAX_ACTION_WEIGHT})",
                self.action_id,
                earlier,
                self.weight()
            ),
        })
    }

    /// What every adapter refuses before touching storage: no change, a change from nothing to
    /// nothing, or two changes of one record ([`StoreError::Invalid`]); a record or a row past
    /// its size ([`ActionCommit::check_bytes`], [`StoreError::TooLarge`]).
    pub fn validate(&self) -> Result<(), StoreError> {
        let invalid = |what: String| Err(StoreError::Invalid { what });
        if self.changes.is_empty() {
            return invalid(format!("action {} has no changes", self.action_id));
        }
        let mut seen = std::collections::BTreeSet::new();
        for c in &self.changes {
            if c.before.is_none() && c.after.is_none() {
                return invalid(format!("change of {}/{} does nothing", c.kind, c.id));
            }
            if !seen.insert((c.kind.as_str(), c.id.as_str())) {
                return invalid(format!(
                    "{}/{} is changed twice in one commit",
                    c.kind, c.id
                ));
            }
        }
        self.check_bytes()
    }
}

/// One row of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Per-user sequence number, from 1, in commit order.
    pub seq: u64,
    pub action_id: String,
    pub actor: ActorKind,
    pub user: UserId,
    pub by_user: bool,
    pub at_ms: i64,
    pub changes: Vec<Change>,
    /// For an undo's own row: the action id it reverted (never on the undo stack itself).
    pub reverts: Option<String>,
    /// Set once the row was reverted: the undo's action id.
    pub undone_by: Option<String>,
    /// The conversation the action was taken in, if any.
    pub conversation: Option<ConversationId>,
}

impl AuditEntry {
    /// On the user's undo stack: theirs, not undone, not an undo.
    pub fn on_undo_stack(&self) -> bool {
        self.by_user && self.undone_by.is_none() && self.reverts.is_none()
    }

    /// On the user's undo stack and within `scope`.
    pub fn undoable_in(&self, scope: &UndoScope) -> bool {
        self.on_undo_stack()
            && match scope {
                UndoScope::Anywhere => true,
                UndoScope::Conversation(id) => self.conversation.as_ref() == Some(id),
            }
    }
}

/// Which of a user's actions an undo may revert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoScope {
    /// Only actions taken in this conversation: what the assistant's `undo` may reach.
    Conversation(ConversationId),
    /// Any of the user's own actions, wherever they were taken: only on the user's explicit
    /// request in the web app.
    Anywhere,
}

/// One undo: whose stack, how far it reaches, and the undo's own audit row (who undid, in which
/// request and conversation, when).
#[derive(Debug, Clone, PartialEq)]
pub struct UndoRequest {
    pub user: UserId,
    pub scope: UndoScope,
    /// The undo's own action id: the reverted rows are marked `undone_by` it.
    pub action_id: String,
    /// Who undid: the user, their agent or an MCP client.
    pub actor: ActorKind,
    /// Where the undo was asked for (`None` outside a conversation).
    pub conversation: Option<ConversationId>,
    pub at_ms: i64,
    /// When a model's tool call undoes: the call's receipt, written with the undo only if it
    /// reverts exactly the audit rows the receipt's answer describes.
    pub receipt: Option<UndoReceipt>,
}

/// A tool call's receipt for an undo (DESIGN invariant 10). The caller reads the rows the undo
/// would revert ([`Records::next_undo`]) and words its answer for them; the undo writes the
/// receipt in its transaction if the top of the stack is still those rows, and otherwise is
/// [`StoreError::Conflict`] with nothing written (the stack moved under it: what it would
/// revert now is not what the answer describes, nor what was judged before; the planner then
/// undoes nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct UndoReceipt {
    /// The `seq`s of the rows the answer describes, oldest first.
    pub rows: Vec<u64>,
    pub receipt: Receipt,
}

impl UndoReceipt {
    /// [`StoreError::Conflict`] unless `rows` (what the undo is about to revert) are the ones
    /// this receipt's answer describes.
    pub fn check(&self, rows: &[AuditEntry]) -> Result<(), StoreError> {
        if rows.iter().map(|r| r.seq).eq(self.rows.iter().copied()) {
            return Ok(());
        }
        Err(StoreError::Conflict {
            what: format!("the undo stack moved under call {}", self.receipt.call_key),
        })
    }
}

impl UndoRequest {
    /// The undo's own audit row for `changes`, reverting `reverted` (its `seq` is the caller's).
    pub fn audit_row(&self, seq: u64, reverted: &str, changes: Vec<Change>) -> AuditEntry {
        AuditEntry {
            seq,
            action_id: self.action_id.clone(),
            actor: self.actor,
            user: self.user.clone(),
            by_user: true,
            at_ms: self.at_ms,
            changes,
            reverts: Some(reverted.to_owned()),
            undone_by: None,
            conversation: self.conversation.clone(),
        }
    }
}

/// What [`Records::undo_last`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoOutcome {
    /// The action was reverted; `changes` are the reverting changes that were written.
    Undone {
        action_id: String,
        changes: Vec<Change>,
    },
    /// The user's undo stack is empty.
    NothingToUndo,
    /// A record of the newest action changed since (a later edit by someone else): nothing was
    /// reverted. The stack is unchanged.
    ChangedSince {
        action_id: String,
        kind: String,
        id: String,
    },
}

/// Owned records, their audit log and undo. See the module docs.
#[async_trait]
pub trait Records: Send + Sync {
    /// The record `(kind, id)`, whoever owns it. Gating by owner is the caller's job.
    async fn record(&self, kind: &str, id: &str) -> Result<Option<Record>, StoreError>;

    /// The records of `kind` owned by `owner`, by id.
    async fn records_of(&self, owner: &UserId, kind: &str) -> Result<Vec<Record>, StoreError>;

    /// Apply every change and append the audit row, atomically. [`StoreError::Conflict`] when a
    /// `before` does not match the stored record (or its owner), [`StoreError::Invalid`] when
    /// the commit breaks [`ActionCommit::validate`], [`StoreError::TooLarge`] past a limit
    /// (checked first: [`MAX_ACTION_WEIGHT`], `undo_bytes.rs`); in each case nothing is written.
    async fn commit(&self, commit: &ActionCommit) -> Result<(), StoreError>;

    /// Revert the newest action on the user's undo stack within the request's scope (see the
    /// module docs), mark its rows undone by the request's action id and append the undo's own
    /// audit row (its actor and conversation), atomically.
    async fn undo_last(&self, undo: &UndoRequest) -> Result<UndoOutcome, StoreError>;

    /// The rows the next [`Records::undo_last`] in `scope` would revert, oldest first (empty:
    /// nothing to undo). Reads the user's undo stack, not the whole log (an adapter may fall
    /// back to the log for rows written before it kept a stack).
    async fn next_undo(
        &self,
        user: &UserId,
        scope: &UndoScope,
    ) -> Result<Vec<AuditEntry>, StoreError>;

    /// The user's audit log, newest first.
    async fn audit_log(&self, user: &UserId) -> Result<Vec<AuditEntry>, StoreError>;
}

/// The reverting changes for the rows of one action (oldest first): per record, from what the
/// action's last change left back to what its first change found. Records the action created
/// and deleted again are left out. Ordered by kind and id.
pub fn reverting_changes(rows: &[AuditEntry]) -> Vec<Change> {
    let mut net: BTreeMap<(String, String), Change> = BTreeMap::new();
    for row in rows {
        for c in &row.changes {
            net.entry((c.kind.clone(), c.id.clone()))
                .and_modify(|n| n.after = c.after.clone())
                .or_insert_with(|| c.clone());
        }
    }
    net.into_values()
        .filter(|c| c.before.is_some() || c.after.is_some())
        .map(|c| Change {
            before: c.after,
            after: c.before,
            ..c
        })
        .collect()
}

/// The rows an undo in `scope` reverts, given (a part of) a user's audit log newest first: the
/// newest row on the undo stack within the scope and every other such row of its action, oldest
/// first.
pub fn rows_to_undo(log_newest_first: &[AuditEntry], scope: &UndoScope) -> Vec<AuditEntry> {
    let Some(top) = log_newest_first.iter().find(|e| e.undoable_in(scope)) else {
        return Vec::new();
    };
    let mut rows: Vec<AuditEntry> = log_newest_first
        .iter()
        .filter(|e| e.undoable_in(scope) && e.action_id == top.action_id)
        .cloned()
        .collect();
    rows.reverse();
    rows
}
