//! Storage ports: small, typed, async traits the engine and the functions consume.
//!
//! Adapters live in their own crates and are named after their technology (`store-sqlite`,
//! `store-dynamodb`). Every adapter runs the [`conformance`] suite (feature `test-support`), so
//! they behave the same. The transcript is append-only: a message is written once at its
//! position, and writing a taken position is a [`StoreError::Conflict`], never an overwrite.
//!
//! Depends on `transcript` only. Never on AWS, Lambda, a backend or the engine.

mod accounts;
mod active;
mod budget;
mod canonical;
mod claims;
mod confirmations;
#[cfg(feature = "test-support")]
pub mod conformance;
#[cfg(feature = "test-support")]
pub mod conformance_records;
#[cfg(feature = "test-support")]
pub mod conformance_retention;
#[cfg(feature = "test-support")]
pub mod conformance_tokens;
mod error;
mod identities;
mod leases;
mod records;
mod retention;
mod sessions;
mod tokens;
mod tool_results;
mod turn_writes;
mod undo_bytes;
mod visible;

pub use accounts::{
    Account, AccountCursor, AccountPage, AccountRole, AccountStatus, Accounts, CreateAccountError,
    Email, InvalidEmail, Roles,
};
pub use active::ActiveRecords;
pub use budget::{Adjustment, BucketKey, BucketUsage, BudgetLedger, Charge, Reserve};
pub use canonical::canonical_json;
pub use claims::{Claim, JobClaims, KEEP_ABANDONED_MS, ReplySent};
pub use confirmations::{Confirmations, Pending};
pub use error::StoreError;
pub use identities::{Binding, Identities};
pub use leases::{Lease, Leases};
pub use records::{
    ActionCommit, ActorKind, AuditEntry, Change, MAX_ACTION_WEIGHT, Receipt, Record, Records,
    UndoOutcome, UndoReceipt, UndoRequest, UndoScope, reverting_changes, rows_to_undo,
};
pub use retention::Retention;
pub use sessions::{Session, Sessions};
pub use tokens::{McpToken, TokenScope, Tokens};
pub use tool_results::ToolResults;
pub use turn_writes::{ClaimWithLease, ClaimedWithLease, StartRead, TurnFinish, TurnWrites};
pub use undo_bytes::{MAX_RECORD_BYTES, MAX_ROW_BYTES, MAX_UNDO_WRITE_BYTES, UndoSize};
pub use visible::{Button, VisibleEntry, VisibleRole};

use async_trait::async_trait;
use transcript::{Conversation, ConversationId, Message, UserId};

/// Conversations: who, where, which segment, which turn.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Create a conversation; [`StoreError::Conflict`] when the id exists.
    async fn create_conversation(&self, conversation: &Conversation) -> Result<(), StoreError>;

    async fn conversation(&self, id: &ConversationId) -> Result<Option<Conversation>, StoreError>;

    /// Replace a conversation's mutable fields (status, purpose, prompt version, segment, turn).
    /// [`StoreError::NotFound`] when it does not exist.
    async fn update_conversation(&self, conversation: &Conversation) -> Result<(), StoreError>;

    /// A user's conversations, newest first.
    async fn conversations_of(&self, user: &UserId) -> Result<Vec<Conversation>, StoreError>;

    /// A page of [`ConversationStore::conversations_of`]: at most `limit`, newest first, those
    /// after `after` in that order (a conversation's `(created_at_ms, id)`: older, or as old
    /// with a smaller id) — one bounded read however many the user has. The default reads
    /// them all; adapters read the page from an index.
    async fn conversations_page(
        &self,
        user: &UserId,
        after: Option<&(i64, ConversationId)>,
        limit: usize,
    ) -> Result<Vec<Conversation>, StoreError> {
        let all = self.conversations_of(user).await?;
        Ok(all
            .into_iter()
            .filter(|c| after.is_none_or(|(at, id)| (c.created_at_ms, &c.id) < (*at, id)))
            .take(limit)
            .collect())
    }
}

/// The model transcript: exact messages, append-only, ordered by position.
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Write `message` at its position. [`StoreError::Conflict`] when that position is taken
    /// (someone else appended first); the stored row is never changed.
    async fn append_message(&self, message: &Message) -> Result<(), StoreError>;

    /// Start a turn in one write, all or nothing: move `conversation` on (as
    /// [`ConversationStore::update_conversation`]) and append `message` and `entry` (the user's
    /// words as they were shown). [`StoreError::Conflict`] when either position is taken (or the
    /// conversation is gone), and nothing is written.
    async fn start_turn(
        &self,
        conversation: &Conversation,
        message: &Message,
        entry: &VisibleEntry,
    ) -> Result<(), StoreError>;

    /// The messages of one segment, by position.
    async fn messages(
        &self,
        conversation: &ConversationId,
        segment: u32,
    ) -> Result<Vec<Message>, StoreError>;

    /// The position the next message of this conversation takes (0 when empty).
    async fn next_position(&self, conversation: &ConversationId) -> Result<u64, StoreError>;
}

/// The visible transcript: what the user saw, as they saw it. History views render from it.
#[async_trait]
pub trait VisibleStore: Send + Sync {
    /// Append an entry at its position; [`StoreError::Conflict`] when the position is taken.
    async fn append_visible(&self, entry: &VisibleEntry) -> Result<(), StoreError>;

    /// All visible entries of a conversation, by position.
    async fn visible(&self, conversation: &ConversationId)
    -> Result<Vec<VisibleEntry>, StoreError>;

    /// The position the next visible entry takes (0 when empty).
    async fn next_visible_position(&self, conversation: &ConversationId)
    -> Result<u64, StoreError>;

    /// The entry at the highest position (`None` when empty): one bounded read, whatever the
    /// length of the transcript. A turn asks it whether its reply is already recorded (the
    /// reply of the turn in progress can only be the last entry) and where the next entry goes.
    /// The default reads the whole transcript; adapters answer from an index.
    async fn last_visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        Ok(self.visible(conversation).await?.pop())
    }

    /// The entry at the lowest position (`None` when empty): one bounded read, whatever the
    /// length of the transcript (a conversation list's preview is its first message). The
    /// default reads the whole transcript; adapters answer from an index.
    async fn first_visible(
        &self,
        conversation: &ConversationId,
    ) -> Result<Option<VisibleEntry>, StoreError> {
        Ok(self.visible(conversation).await?.into_iter().next())
    }

    /// The entries at positions `from..before`, by position: one bounded read, whatever the
    /// length of the transcript (the web chat shows a long conversation a page at a time, its
    /// newest first). Positions need not be dense; a gap is simply absent. The default reads
    /// the whole transcript; adapters read the range from an index.
    async fn visible_range(
        &self,
        conversation: &ConversationId,
        from: u64,
        before: u64,
    ) -> Result<Vec<VisibleEntry>, StoreError> {
        let mut all = self.visible(conversation).await?;
        all.retain(|e| (from..before).contains(&e.position));
        Ok(all)
    }

    /// The turn's writes this store makes as one, if it does (`None`: make them one by one).
    fn turn_writes(&self) -> Option<&dyn TurnWrites> {
        None
    }
}

/// Everything the engine and the worker need from storage, as one handle.
pub trait Store:
    ConversationStore
    + MessageStore
    + VisibleStore
    + JobClaims
    + Leases
    + Sessions
    + ToolResults
    + Identities
    + Records
    + Confirmations
    + Accounts
    + ActiveRecords
    + BudgetLedger
    + Retention
{
}
impl<
    T: ConversationStore
        + MessageStore
        + VisibleStore
        + JobClaims
        + Leases
        + Sessions
        + ToolResults
        + Identities
        + Records
        + Confirmations
        + Accounts
        + ActiveRecords
        + BudgetLedger
        + Retention,
> Store for T
{
}
