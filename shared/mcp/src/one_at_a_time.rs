//! An owner's tokens' changing calls take turns. The confirmation policy judges a call against the
//! records as they are when it reads them, and `undo` reverts whatever tops the token's stack
//! when it writes: two changing calls racing through one token could each be judged against a
//! state the other is about to change (ten `undo`s at once, each judged against the harmless
//! top action, would revert the actions under it too, unpublishing an event with no one's yes).
//! A chat's turns take turns by their conversation's lease; a token's calls do too, and so do
//! the calls of all the tokens of one owner (`mcp-owner:<user>`, [`owner_turn`]): one token's
//! change judged harmless (a rename of a draft) could otherwise run after another token made it
//! risky (published the event) between the judgement and the run. The lease is held from the
//! policy's judgement until the call has run. Reads do not wait.
//!
//! A call waits its turn for up to [`WAIT`] (an AI client may send several calls at once), trying
//! the lease again at growing intervals; then it is refused with a sentence, nothing done. The
//! lease lasts [`HOLD`] and is renewed every [`RENEW_EVERY`] while the call runs (a judgement
//! that waited for a plan's slot, then a run that waited again, can outlast one hold; its turn
//! lapsing mid-call would let the token's next change be judged against a state about to
//! change). A client that leaves does not cut its call short (rmcp runs the handler
//! in a task of its own: the call runs to its end and gives the turn back then, so the next is
//! judged after its write; `tests/one_at_a_time.rs` pins it); a call cut short otherwise (a
//! panic) gives it back from a task, and a process that died leaves it to lapse.

use engine::Clock;
use std::sync::Arc;
use std::time::Duration;
use store::{Lease, Leases, StoreError};
use transcript::ConversationId;

/// The lease all of `user`'s tokens' changing calls take turns by.
pub fn owner_turn(user: &transcript::UserId) -> ConversationId {
    ConversationId(format!("mcp-owner:{}", user.0))
}

/// How long a changing call waits for the earlier ones of its owner's tokens.
pub const WAIT: Duration = Duration::from_secs(10);
/// How long a turn is held at most: past the runner's time limit for a tool call (30 s by
/// default, `tools::RunnerOptions`) and the judgement's few reads, so a slow call still holds
/// its turn until it has run.
pub const HOLD: Duration = Duration::from_secs(45);
/// How often a held turn is renewed while its call runs.
pub const RENEW_EVERY: Duration = Duration::from_secs(15);

/// The owner's turn, held: [`Turn::give_back`] when the call has run; dropped unused (a call
/// cut short), given back from a task.
pub struct Turn {
    leases: Arc<dyn Leases>,
    conversation: ConversationId,
    holder: String,
    given_back: bool,
    /// The task renewing the lease until the turn is given back.
    renewing: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("conversation", &self.conversation)
            .finish_non_exhaustive()
    }
}

/// Why no turn was had.
#[derive(Debug)]
pub enum NoTurn {
    /// The owner's earlier calls were still running after [`WAIT`].
    Busy,
    /// The store could not say.
    Store(StoreError),
}

/// Take `conversation`'s turn for `holder` (a call's own id), waiting up to [`WAIT`]; renewed
/// until it is given back.
pub async fn take(
    leases: Arc<dyn Leases>,
    conversation: ConversationId,
    holder: String,
    now: Clock,
) -> Result<Turn, NoTurn> {
    let started = tokio::time::Instant::now();
    let mut pause = Duration::from_millis(20);
    loop {
        let at = now();
        let until = at + HOLD.as_millis() as i64;
        match leases
            .acquire_lease(&conversation, &holder, at, until)
            .await
            .map_err(NoTurn::Store)?
        {
            Lease::Held => {
                let renewing = Some(tokio::spawn(renew(
                    leases.clone(),
                    conversation.clone(),
                    holder.clone(),
                    now,
                )));
                return Ok(Turn {
                    leases,
                    conversation,
                    holder,
                    given_back: false,
                    renewing,
                });
            }
            Lease::Busy { .. } if started.elapsed() + pause <= WAIT => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Lease::Busy { .. } => return Err(NoTurn::Busy),
        }
    }
}

/// Renew `holder`'s lease every [`RENEW_EVERY`] until aborted. A lease someone else holds now
/// (this one lapsed: the process stalled past [`HOLD`]) is not taken back.
async fn renew(leases: Arc<dyn Leases>, conversation: ConversationId, holder: String, now: Clock) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let at = now();
        match leases
            .acquire_lease(&conversation, &holder, at, at + HOLD.as_millis() as i64)
            .await
        {
            Ok(Lease::Held) => {}
            Ok(Lease::Busy { .. }) => {
                tracing::warn!(%conversation, "an MCP token's turn lapsed while its call ran");
                return;
            }
            Err(e) => {
                tracing::warn!(%conversation, error = %e, "could not renew an MCP token's turn; trying again");
            }
        }
    }
}

impl Turn {
    /// The call has run: the token's next call may go.
    pub async fn give_back(mut self) {
        self.given_back = true;
        // Stopped, and waited for, before the release: a renewal landing after it would take
        // the lease back for another hold.
        if let Some(renewing) = self.renewing.take() {
            renewing.abort();
            let _ = renewing.await;
        }
        release(self.leases.as_ref(), &self.conversation, &self.holder).await;
    }
}

async fn release(leases: &dyn Leases, conversation: &ConversationId, holder: &str) {
    if let Err(e) = leases.release_lease(conversation, holder).await {
        tracing::warn!(%conversation, error = %e, "could not give back an MCP token's turn; it lapses");
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(renewing) = &self.renewing {
            renewing.abort();
        }
        if self.given_back {
            return;
        }
        let leases = self.leases.clone();
        let conversation = std::mem::replace(&mut self.conversation, ConversationId(String::new()));
        let holder = std::mem::take(&mut self.holder);
        let give_back = async move { release(leases.as_ref(), &conversation, &holder).await };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(give_back);
            }
            Err(_) => tracing::warn!("no runtime to give back an MCP token's turn; it lapses"),
        }
    }
}
