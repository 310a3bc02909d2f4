//! A job handed over at its enqueue. When a receive is waiting and the new job is the only one
//! of its group (so it is its group's head and nothing of the group is in flight), the
//! enqueue's own transaction hands it out — receipt, visibility timeout, receive count, as a
//! receive would — and gives it to the waiting receive at the commit. The receive then makes
//! no write of its own: one write of the shared database fewer per job, and one hand-off to its
//! thread fewer on the way from a message to its turn.
//!
//! A receive that stopped waiting just as its job was handed over (its timeout, its caller
//! gone) leaves the job in the stash, and work is signalled: the next receive takes it from
//! there. If no receive ever comes, the job is in flight like any delivered one: it becomes
//! visible again at its timeout, or at once when the file is next opened.

use crate::Work;
use queue::Delivery;
use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::oneshot;

/// The receives waiting for work, and the jobs handed over to one that had left.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    waiters: Mutex<Waiters>,
    stash: Mutex<Vec<Delivery>>,
}

#[derive(Debug, Default)]
struct Waiters {
    next_id: u64,
    /// Oldest first: the receive that waited longest is handed the next job.
    list: VecDeque<(u64, oneshot::Sender<Delivery>)>,
}

/// One receive's place in the line; leaving it (dropping this) takes the place away.
#[derive(Debug)]
pub(crate) struct Waiting<'a> {
    handover: &'a Handover,
    id: u64,
    pub(crate) job: oneshot::Receiver<Delivery>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiters = self.handover.waiters.lock().unwrap();
        waiters.list.retain(|(id, _)| *id != self.id);
    }
}

impl Handover {
    /// Join the line of waiting receives.
    pub(crate) fn wait(&self) -> Waiting<'_> {
        let (tx, job) = oneshot::channel();
        let mut waiters = self.waiters.lock().unwrap();
        let id = waiters.next_id;
        waiters.next_id += 1;
        waiters.list.push_back((id, tx));
        Waiting {
            handover: self,
            id,
            job,
        }
    }

    /// Whether a receive is waiting (it may leave before it is taken).
    pub(crate) fn anyone_waiting(&self) -> bool {
        !self.waiters.lock().unwrap().list.is_empty()
    }

    /// The receive that waited longest, taken out of the line.
    pub(crate) fn take_waiter(&self) -> Option<oneshot::Sender<Delivery>> {
        let mut waiters = self.waiters.lock().unwrap();
        while let Some((_, tx)) = waiters.list.pop_front() {
            if !tx.is_closed() {
                return Some(tx);
            }
        }
        None
    }

    /// Give `job` to `waiter`; if it has left, stash the job and signal `work`, so the next
    /// receive takes it.
    pub(crate) fn give(&self, waiter: oneshot::Sender<Delivery>, job: Delivery, work: &Work) {
        if let Err(job) = waiter.send(job) {
            self.stash.lock().unwrap().push(job);
            work.signal();
        }
    }

    /// Up to `max` jobs handed over to receives that had left, oldest first.
    pub(crate) fn stashed(&self, max: usize) -> Vec<Delivery> {
        let mut stash = self.stash.lock().unwrap();
        let n = stash.len().min(max);
        stash.drain(..n).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queue::TurnJob;
    use std::sync::atomic::Ordering;

    fn delivery(receipt: &str) -> Delivery {
        let job: TurnJob = serde_json::from_value(serde_json::json!({
            "channel": "web", "conversation_key": "c1", "external_user_id": "u1",
            "message_id": receipt, "text": "hi", "button_id": null, "media": [],
            "received_at_ms": 0
        }))
        .unwrap();
        Delivery {
            receipt: receipt.into(),
            job,
            receive_count: 1,
        }
    }

    #[test]
    fn the_longest_waiting_receive_is_handed_the_job() {
        let handover = Handover::default();
        let mut first = handover.wait();
        let mut second = handover.wait();
        assert!(handover.anyone_waiting());
        let work = Work::default();
        handover.give(handover.take_waiter().unwrap(), delivery("r1"), &work);
        assert_eq!(first.job.try_recv().unwrap().receipt, "r1");
        assert!(second.job.try_recv().is_err());
        assert_eq!(work.changes.load(Ordering::SeqCst), 0, "nothing to signal");
    }

    #[test]
    fn a_receive_that_left_takes_its_place_with_it() {
        let handover = Handover::default();
        drop(handover.wait());
        assert!(!handover.anyone_waiting());
        assert!(handover.take_waiter().is_none());
    }

    #[test]
    fn a_job_handed_to_a_receive_that_left_is_stashed_for_the_next() {
        let handover = Handover::default();
        let waiting = handover.wait();
        // Taken out of the line by the enqueue, then the receive gives up before the commit.
        let waiter = handover.take_waiter().unwrap();
        drop(waiting);
        let work = Work::default();
        handover.give(waiter, delivery("r1"), &work);
        assert_eq!(
            work.changes.load(Ordering::SeqCst),
            1,
            "the next receive is woken"
        );
        let stashed = handover.stashed(10);
        assert_eq!(stashed.len(), 1);
        assert_eq!(stashed[0].receipt, "r1");
        assert!(handover.stashed(10).is_empty(), "taken once");
    }
}
