//! `TurnWrites` on SQLite: each combined write is one closure on the writer thread — one
//! savepoint in its group commit, so all or nothing — and the start's read is one closure on a
//! reader, in one snapshot. What it saves here is not I/O (a group commit carries many writes
//! anyway) but round trips: every port call is a hand-off to the database's thread and back, and
//! those wake-ups, not SQL, are most of a local turn's CPU.

use crate::SqliteStore;
use crate::db::snapshot;
use crate::error::unavailable;
use crate::{accounts, budget, claims, conversations, leases, messages, tool_results, visible};
use async_trait::async_trait;
use rusqlite::Connection;
use store::{
    Adjustment, Charge, Claim, ClaimWithLease, ClaimedWithLease, Lease, Reserve, StartRead,
    StoreError, TurnFinish, TurnWrites, VisibleEntry,
};
use transcript::{Conversation, ConversationId, Message, Part, UserId};

#[async_trait]
impl TurnWrites for SqliteStore {
    async fn claim_with_lease(
        &self,
        start: &ClaimWithLease<'_>,
    ) -> Result<ClaimedWithLease, StoreError> {
        Ok(self.claim_reading(start, None).await?.0)
    }

    /// The read is made on the writer's connection inside the claim's own transaction, so
    /// nothing can come between the lease and it, and the turn's start costs no round trip of
    /// its own.
    async fn claim_with_lease_reading(
        &self,
        start: &ClaimWithLease<'_>,
        user: &UserId,
    ) -> Result<(ClaimedWithLease, Option<StartRead>), StoreError> {
        self.claim_reading(start, Some(user.clone())).await
    }

    async fn finish_turn(&self, finish: &TurnFinish<'_>) -> Result<(), StoreError> {
        let entry = visible::Row::of(finish.entry)?;
        let (conversation, holder, job_key, keep_until) = (
            finish.conversation.clone(),
            finish.holder.to_owned(),
            finish.job_key.to_owned(),
            finish.keep_until_ms,
        );
        // The reply went out before this record: its sync is begun, not awaited (see
        // `Db::write_then_sync`). An `Err` rolls all three back.
        self.db
            .write_then_sync(move |conn| {
                entry.insert(conn)?;
                if !leases::release(conn, &conversation, &holder)? {
                    return Err(StoreError::Conflict {
                        what: format!("the lease of {conversation} (not {holder}'s)"),
                    });
                }
                claims::finish(conn, &job_key, keep_until)
            })
            .await
    }

    async fn start_turn_reserving(
        &self,
        conversation: &Conversation,
        message: &Message,
        entry: &VisibleEntry,
        reserve: &[Charge],
    ) -> Result<bool, StoreError> {
        let start = messages::Start::of(conversation, message, entry)?;
        let charges = reserve.to_vec();
        self.db
            .write_resumable(move |conn| {
                // The caps first: a refusal has written nothing yet.
                if let Reserve::Tripped { .. } = budget::reserve(conn, &charges)? {
                    return Ok(false);
                }
                start.write(conn)?;
                Ok(true)
            })
            .await
    }

    async fn append_with_tool_result(
        &self,
        message: &Message,
        asked_at: u64,
        tool_use_id: &str,
        result: &Part,
        reserve: &[Charge],
    ) -> Result<bool, StoreError> {
        let recorded =
            tool_results::Row::of(&message.conversation_id, asked_at, tool_use_id, result)?;
        let message = messages::Row::of(message)?;
        let charges = reserve.to_vec();
        self.db
            .write_resumable(move |conn| {
                // The caps first: a refusal has written nothing yet.
                if let Reserve::Tripped { .. } = budget::reserve(conn, &charges)? {
                    return Ok(false);
                }
                recorded.insert(conn)?;
                message.insert(conn)?;
                Ok(true)
            })
            .await
    }

    async fn append_message_adjusting(
        &self,
        message: &Message,
        adjustments: &[Adjustment],
    ) -> Result<(), StoreError> {
        let message = messages::Row::of(message)?;
        let adjustments = adjustments.to_vec();
        self.db
            .write_resumable(move |conn| {
                message.insert(conn)?;
                for a in &adjustments {
                    budget::add(conn, &a.bucket, a.delta, a.expires_at_ms)?;
                }
                Ok(())
            })
            .await
    }

    async fn conversation_and_account(
        &self,
        id: &ConversationId,
        user: &UserId,
    ) -> Result<StartRead, StoreError> {
        let (id, user) = (id.clone(), user.clone());
        self.db
            .read(move |conn| snapshot(conn, || start_read(conn, &id, &user)))
            .await
    }
}

impl SqliteStore {
    /// The job's claim with its conversation's lease, one closure on the writer; with `user`,
    /// once both are taken, the turn's start read in the same transaction.
    async fn claim_reading(
        &self,
        start: &ClaimWithLease<'_>,
        user: Option<UserId>,
    ) -> Result<(ClaimedWithLease, Option<StartRead>), StoreError> {
        let (job_key, conversation, holder) = (
            start.job_key.to_owned(),
            start.conversation.clone(),
            start.holder.to_owned(),
        );
        let (now, claim_until, lease_until) =
            (start.now_ms, start.claim_until_ms, start.lease_until_ms);
        self.db
            .write_resumable(move |conn| {
                let claimed = undone_unless(
                    conn,
                    |conn| {
                        Ok(match claims::claim(conn, &job_key, now, claim_until)? {
                            // Refused: the upsert wrote nothing.
                            found @ (Claim::Done | Claim::Busy { .. }) => {
                                ClaimedWithLease::Refused(found)
                            }
                            Claim::Fresh => {
                                match leases::acquire(
                                    conn,
                                    &conversation,
                                    &holder,
                                    now,
                                    lease_until,
                                )? {
                                    Lease::Held => ClaimedWithLease::Both,
                                    Lease::Busy { .. } => ClaimedWithLease::Apart,
                                }
                            }
                            // A takeover is made one by one: undone below.
                            Claim::TakenOver { .. } => ClaimedWithLease::Apart,
                        })
                    },
                    |done| *done != ClaimedWithLease::Apart,
                )?;
                let read = match (claimed, user) {
                    (ClaimedWithLease::Both, Some(user)) => {
                        Some(start_read(conn, &conversation, &user)?)
                    }
                    _ => None,
                };
                Ok((claimed, read))
            })
            .await
    }
}

/// The turn's start as `conn` sees it: the conversation and, when it exists, its next visible
/// position (exact here, read in the same snapshot or transaction, not a hint) and current
/// segment; and `user`'s account.
fn start_read(
    conn: &Connection,
    id: &ConversationId,
    user: &UserId,
) -> Result<StartRead, StoreError> {
    let conversation = conversations::read(conn, id)?;
    let (next_visible, messages) = match &conversation {
        Some(c) => (
            Some(visible::next_position(conn, id)?),
            Some(messages::segment_of(conn, id, c.segment)?),
        ),
        None => (None, None),
    };
    Ok(StartRead {
        conversation,
        account: accounts::read(conn, user)?,
        next_visible,
        messages,
    })
}

/// Run `f` inside a savepoint of its own and keep what it wrote only if `keep` says so of its
/// outcome (an `Err` keeps nothing either): a combined write that answers "not taken" without
/// failing the caller's write.
fn undone_unless<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    keep: impl FnOnce(&T) -> bool,
) -> Result<T, StoreError> {
    sqlite_db::exec(conn, "SAVEPOINT combined").map_err(unavailable)?;
    let out = f(conn);
    if !matches!(&out, Ok(done) if keep(done)) {
        sqlite_db::exec(conn, "ROLLBACK TO combined").map_err(unavailable)?;
    }
    sqlite_db::exec(conn, "RELEASE combined").map_err(unavailable)?;
    out
}
