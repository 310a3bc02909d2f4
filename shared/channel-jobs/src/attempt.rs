//! What the steps of one attempt at a job share: whether it is a retry, when its time is up,
//! and the charges of what it sent, which outlive a step its deadline cuts off but not the
//! attempt.

use crate::lease::Deadline;
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// How long an attempt cut off waits for the charges of what it sent to be written (a ledger
/// write each, tens of milliseconds), beside its claim's release. The worker keeps 5 s of its
/// function's time back for the attempt's cut (up to 1 s), this, and answering the batch.
pub(crate) const CHARGES_WAIT: Duration = Duration::from_secs(1);

pub(crate) struct Attempt {
    /// Not the job's first attempt.
    pub(crate) retry: bool,
    pub(crate) deadline: Deadline,
    /// The charges of pieces this attempt sent (SMS segments), each on a task of its own so
    /// that a step cut off while one is written does not cancel it.
    pub(crate) charges: TaskTracker,
}

impl Attempt {
    /// Wait, at most [`CHARGES_WAIT`], for every charge this attempt started.
    pub(crate) async fn charges_written(&self, job: &str) {
        self.charges.close();
        if tokio::time::timeout(CHARGES_WAIT, self.charges.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                job,
                "the charge of what this attempt sent is still being written; left to finish on its own"
            );
        }
    }
}
