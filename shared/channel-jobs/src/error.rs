//! Why a job did not finish, by kind: what the queue adapters and the operator's log act on.
//! Each kind keeps its cause's words (store, engine and platform errors are not `Clone`) so a
//! job's outcome stays a plain value.

use std::time::Duration;

/// Why an attempt at a job ended without finishing; the job is retried (or, after its last
/// attempt, given up). Display is the sentence for the operator's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The job came with no time left to run in.
    #[error("no time left for this job")]
    NoTime,
    /// Another attempt holds the job's claim and has not given it up.
    #[error("another worker holds this job")]
    Busy,
    /// The store failed (claim, identity, conversation, transcript, visible record).
    #[error("store failed: {0}")]
    Store(String),
    /// The turn could not run (its storage failed, or the conversation is gone).
    #[error("turn failed: {0}")]
    Turn(String),
    /// The conversation the job was answering is no longer in the store.
    #[error("the conversation {0} disappeared")]
    ConversationGone(transcript::ConversationId),
    /// The platform did not take the reply; with how long it asked to be left alone, when it
    /// said (a rate limit's `retry_after`).
    #[error("sending the reply failed: {0}")]
    Send(String, Option<Duration>),
    /// Another holder took the conversation's lease while the turn ran.
    #[error("the conversation's lease was lost to {0}")]
    LeaseLost(String),
    /// The turn ran past the job's time budget.
    #[error("turn deadline of {0:?} passed")]
    Deadline(Duration),
    /// The reply is delivered and recorded, but the claim could not be marked done.
    #[error("could not mark the job done: {0}")]
    NotMarkedDone(String),
    /// The server stopped past its grace period ([`crate::JobOptions::abandon`]).
    #[error("cut short: the server stopped before the turn finished")]
    CutShort,
    /// The queue's record could not be read as a job.
    #[error("undecodable job")]
    Undecodable,
    /// An earlier message of the same conversation failed; this one waits behind it.
    #[error("an earlier message of this conversation failed")]
    EarlierFailed,
    /// The job's task panicked.
    #[error("the job panicked")]
    Panicked,
}

/// The longest wait a platform's rate limit may ask of a job's next attempt: past it, the
/// attempts spend their receives sooner and the job ends in the dead letters, to be sent again.
pub const LONGEST_ASKED_WAIT: Duration = Duration::from_secs(15 * 60);

impl JobError {
    /// How long the next attempt should wait at least, when the platform said (at most
    /// [`LONGEST_ASKED_WAIT`]): an attempt sooner is refused again, and spends a receive.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Send(_, asked) => asked.map(|wait| wait.min(LONGEST_ASKED_WAIT)),
            _ => None,
        }
    }
}

impl From<store::StoreError> for JobError {
    fn from(e: store::StoreError) -> Self {
        Self::Store(e.to_string())
    }
}

impl From<engine::EngineError> for JobError {
    fn from(e: engine::EngineError) -> Self {
        Self::Turn(e.to_string())
    }
}

impl From<channels::SendError> for JobError {
    fn from(e: channels::SendError) -> Self {
        Self::Send(e.to_string(), e.retry_after())
    }
}
