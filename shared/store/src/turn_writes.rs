//! Writes of a turn that an adapter may make as one (a DynamoDB transaction) instead of several,
//! and the reads of its start as one (a batch).
//! Offered through [`crate::VisibleStore::turn_writes`]; a store that does not offer them is
//! written one port call at a time by its consumer, with the same outcome when nothing fails in
//! between. Each combined write is all or nothing, so it never adds a crash point.

use crate::{Account, Adjustment, StoreError, VisibleEntry};
use async_trait::async_trait;
use transcript::{Conversation, ConversationId, Message, Part, UserId};

/// The end of a turn's job: the reply as the user saw it, the conversation's lease given up and
/// the job's claim marked done (as [`crate::VisibleStore::append_visible`],
/// [`crate::Leases::release_lease`] and [`crate::JobClaims::finish_job`]).
#[derive(Debug, Clone, Copy)]
pub struct TurnFinish<'a> {
    pub entry: &'a VisibleEntry,
    pub conversation: &'a ConversationId,
    /// Who holds the conversation's lease (and the job's key).
    pub holder: &'a str,
    pub job_key: &'a str,
    pub keep_until_ms: i64,
}

/// What [`TurnWrites::conversation_and_account`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct StartRead {
    pub conversation: Option<Conversation>,
    pub account: Option<Account>,
    /// Where the next visible entry goes, as far as the conversation's record knows: never
    /// past [`crate::VisibleStore::next_visible_position`], possibly behind it (an entry
    /// written on its own does not move it), so a taken position means asking that. `None`:
    /// ask it.
    pub next_visible: Option<u64>,
}

/// Several writes of a turn as one.
#[async_trait]
pub trait TurnWrites: Send + Sync {
    /// Record `finish.entry`, release the lease `finish.holder` holds and mark the job done,
    /// all or nothing (and note the next visible position with the conversation, see
    /// [`StartRead::next_visible`]). [`StoreError::Conflict`] when the entry's position is taken or the
    /// lease is no longer the holder's (lapsed, or taken by another turn), and nothing is
    /// written: the caller then makes the writes one by one, each reporting what it found.
    async fn finish_turn(&self, finish: &TurnFinish<'_>) -> Result<(), StoreError>;

    /// Record the result of tool call `tool_use_id` asked at `asked_at` and append `message`
    /// (the tool message that carries it), all or nothing (as
    /// [`crate::ToolResults::put_tool_result`] then [`crate::MessageStore::append_message`]).
    /// [`StoreError::Conflict`] when the result is recorded already or the message's position
    /// is taken, and nothing is written: the caller then makes the two writes one by one.
    async fn append_with_tool_result(
        &self,
        message: &Message,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
    ) -> Result<(), StoreError>;

    /// Append `message` (a model call's answer) and apply `adjustments` (that call's budget
    /// reservation settled, as [`crate::BudgetLedger::adjust`]), all or nothing.
    /// [`StoreError::Conflict`] when the message's position is taken, and nothing is written:
    /// the caller then settles and appends one by one.
    async fn append_message_adjusting(
        &self,
        message: &Message,
        adjustments: &[Adjustment],
    ) -> Result<(), StoreError>;

    /// The conversation `id` and `user`'s account, read together and as strongly consistent
    /// as [`crate::ConversationStore::conversation`] and [`crate::Accounts::account`] each.
    async fn conversation_and_account(
        &self,
        id: &ConversationId,
        user: &UserId,
    ) -> Result<StartRead, StoreError>;
}
