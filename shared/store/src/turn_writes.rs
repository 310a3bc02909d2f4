//! Writes of a turn that an adapter may make as one (a DynamoDB transaction) instead of several,
//! and the reads of its start as one (a batch): the job's claim with the conversation's lease,
//! the turn's start with its first model call's reservation, a tool message with its result
//! (and the next call's reservation), an answer with its budget settlement, the turn's finish.
//! Offered through [`crate::VisibleStore::turn_writes`]; a store that does not offer them is
//! written one port call at a time by its consumer, with the same outcome when nothing fails in
//! between. Each combined write is all or nothing, so it never adds a crash point.

use crate::{Account, Adjustment, Charge, Claim, StoreError, VisibleEntry};
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

/// The start of a turn's job: its claim (as [`crate::JobClaims::claim_job`]) and its
/// conversation's lease (as [`crate::Leases::acquire_lease`]), once the job's conversation is
/// known.
#[derive(Debug, Clone, Copy)]
pub struct ClaimWithLease<'a> {
    pub job_key: &'a str,
    pub now_ms: i64,
    /// When the claim expires (as `claim_job`'s `expires_at_ms`).
    pub claim_until_ms: i64,
    pub conversation: &'a ConversationId,
    /// Who takes the lease (the job's key).
    pub holder: &'a str,
    /// When the lease lapses unless renewed.
    pub lease_until_ms: i64,
}

/// What [`TurnWrites::claim_with_lease`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimedWithLease {
    /// The job is claimed afresh (attempt 1, as [`Claim::Fresh`]) and the lease held.
    Both,
    /// Nothing written: the claim was refused as `claim_job` refuses it, with what it found
    /// ([`Claim::Done`] or [`Claim::Busy`]).
    Refused(Claim),
    /// Nothing written, for any other reason (an expired claim to take over, the lease held by
    /// another turn, a transaction conflict): claim and take the lease one by one.
    Apart,
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
    /// The conversation's current segment (as [`crate::MessageStore::messages`] gives it for
    /// the conversation's `segment`), when the store reads it with the conversation; `None`:
    /// ask it.
    pub messages: Option<Vec<Message>>,
}

/// Several writes of a turn as one.
#[async_trait]
pub trait TurnWrites: Send + Sync {
    /// Claim the job afresh and take the conversation's lease, all or nothing. Only a fresh
    /// claim is made here (a takeover's attempt number is the old claim's plus one):
    /// [`ClaimedWithLease::Apart`] whenever the two are not both taken, and then nothing is
    /// written. The default takes neither.
    async fn claim_with_lease(
        &self,
        start: &ClaimWithLease<'_>,
    ) -> Result<ClaimedWithLease, StoreError> {
        let _ = start;
        Ok(ClaimedWithLease::Apart)
    }

    /// [`TurnWrites::claim_with_lease`] and, when both are taken, the turn's start for `user`
    /// as [`TurnWrites::conversation_and_account`] reads it, under the lease just taken. A store
    /// that reads inside its write saves the read's round trip; the default claims and reads
    /// nothing (`None`: the caller reads it, under the lease, as before).
    async fn claim_with_lease_reading(
        &self,
        start: &ClaimWithLease<'_>,
        user: &UserId,
    ) -> Result<(ClaimedWithLease, Option<StartRead>), StoreError> {
        let _ = user;
        Ok((self.claim_with_lease(start).await?, None))
    }

    /// Record `finish.entry`, release the lease `finish.holder` holds and mark the job done,
    /// all or nothing (and note the next visible position with the conversation, see
    /// [`StartRead::next_visible`]). [`StoreError::Conflict`] when the entry's position is taken or the
    /// lease is no longer the holder's (lapsed, or taken by another turn), and nothing is
    /// written: the caller then makes the writes one by one, each reporting what it found.
    async fn finish_turn(&self, finish: &TurnFinish<'_>) -> Result<(), StoreError>;

    /// Start a turn as [`crate::MessageStore::start_turn`] does and add `reserve` (its first
    /// model call's budget reservation, as [`crate::BudgetLedger::reserve`]), all or nothing.
    /// `Ok(false)`: a charge would take its bucket past its cap, and nothing is written (the
    /// caller then starts the turn on its own and reserves as usual, which reads what is left).
    /// [`StoreError::Conflict`] as `start_turn` gives it, and nothing is written.
    async fn start_turn_reserving(
        &self,
        conversation: &Conversation,
        message: &Message,
        entry: &VisibleEntry,
        reserve: &[Charge],
    ) -> Result<bool, StoreError>;

    /// Record the result of tool call `tool_use_id` asked at `asked_at`, append `message`
    /// (the tool message that carries it) and add `reserve` (the next model call's budget
    /// reservation, as [`crate::BudgetLedger::reserve`]; may be empty), all or nothing (as
    /// [`crate::ToolResults::put_tool_result`], [`crate::MessageStore::append_message`] and
    /// `reserve`). `Ok(false)`: a charge would take its bucket past its cap, and nothing is
    /// written (the caller then writes the two on their own and reserves as usual, which reads
    /// what is left). [`StoreError::Conflict`] when the result is recorded already or the
    /// message's position is taken, and nothing is written: the caller then makes the writes
    /// one by one.
    async fn append_with_tool_result(
        &self,
        message: &Message,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
        reserve: &[Charge],
    ) -> Result<bool, StoreError>;

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
