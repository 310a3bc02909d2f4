//! The conformance suite: behaviour every queue adapter must show, failure paths included.
//!
//! Each `check_*` function takes a fresh, empty queue and the [`QueueSettings`] it was built
//! with, and panics with a readable message when the adapter misbehaves. Adapters do not call
//! them one by one; they invoke [`queue_conformance_tests!`](crate::queue_conformance_tests) in
//! their tests with a closure-like expression that builds a queue from settings. It expands to
//! one `#[tokio::test]` per check, each on a queue of its own, built from the settings that
//! check needs ([`default_settings`] or [`short_timeout_settings`]):
//!
//! ```ignore
//! // shared/queue-sqlite/tests/conformance.rs
//! queue::queue_conformance_tests!(|settings| SqliteQueue::open_in_memory(settings).unwrap());
//! ```
//!
//! The body is evaluated inside the (async) test, so it may `.await`; it may yield the queue
//! itself or a value that dereferences to it (e.g. a temp-file guard). The calling crate needs
//! `tokio` (features `macros`, `rt`) as a dev-dependency.
//!
//! A queue that cannot show some behaviour the checks pin (SQS does not tell a sender that it
//! dropped a duplicate; its emulator forgets more than SQS does) says so with a [`Fidelity`]
//! before the closure; the checks relax exactly what it names and nothing else:
//!
//! ```ignore
//! queue::queue_conformance_tests!(fidelity = MOTO_SQS, |settings| fresh_queue(settings).await);
//! ```
//!
//! The timing checks run in real time on short timeouts; their bounds are generous (a prompt
//! wake-up is "under a second", an empty long poll "no earlier than the wait, less a little"), so
//! a loaded machine slows them down without failing them.
//!
//! Rules the checks pin down, so every adapter agrees:
//! - One delivery per group per receive, and none while the group's head is in flight; the
//!   groups whose heads are oldest come first.
//! - A released or timed-out job comes back before the later jobs of its group, with its
//!   `receive_count` one higher and a new receipt; the old receipt is then stale.
//! - The delivery after the `max_receives`-th one does not happen: the job leaves the queue (for
//!   the adapter's dead letters) and the next job of its group is delivered instead.
//! - A dedupe key is remembered for the window whether or not its job was acknowledged.
//! - `ack` and `release` of a receipt that names no live delivery are `StaleReceipt`.

use crate::{Delivery, Enqueued, JobMedia, JobQueue, QueueError, QueueSettings, TurnJob};
use std::time::{Duration, Instant};

/// Expands to one `#[tokio::test]` per conformance check, each on a fresh queue built by the
/// given closure-like expression from the settings the check needs. The body is evaluated inside
/// the async test, so `.await` is allowed; it yields a queue or anything that dereferences to one
/// (see [`AsDynQueue`]).
///
/// Invoke it once per module: the generated test names are fixed. To run the suite against two
/// configurations, put the second invocation in its own `mod`. A queue that cannot show
/// everything passes its [`Fidelity`] first: `fidelity = EXPR, |settings| ...`; without it the
/// checks demand [`Fidelity::EXACT`].
#[macro_export]
macro_rules! queue_conformance_tests {
    (|$settings:pat_param| $make:expr $(,)?) => {
        $crate::queue_conformance_tests!(
            fidelity = $crate::conformance::Fidelity::EXACT,
            |$settings| $make
        );
    };
    (fidelity = $fidelity:expr, |$settings:pat_param| $make:expr $(,)?) => {
        $crate::queue_conformance_tests!(@each [$fidelity] [$settings] [$make];
            fifo_within_a_group => check_fifo_within_group(default_settings),
            groups_are_delivered_in_parallel => check_groups_in_parallel(default_settings),
            duplicates_never_deliver_twice => check_dedupe(default_settings),
            released_job_comes_back_first => check_release(default_settings),
            released_job_waits_out_its_backoff => check_release_after(default_settings),
            put_back_job_comes_back_at_once => check_put_back(default_settings),
            unacked_delivery_times_out => check_visibility_timeout(short_timeout_settings),
            failing_job_is_dead_lettered => check_dead_letter(short_timeout_settings),
            long_poll_wakes_on_work => check_long_poll_wakes(default_settings),
            long_poll_returns_empty_after_wait => check_long_poll_empty(default_settings),
            unknown_receipt_is_stale => check_unknown_receipt(default_settings),
            job_round_trips_exactly => check_round_trip(default_settings),
        );
    };
    (@each [$fidelity:expr] [$settings:pat_param] [$make:expr];
        $($test:ident => $check:ident($knobs:ident)),* $(,)?) => {
        $(
            #[::tokio::test]
            async fn $test() {
                use $crate::conformance::AsDynQueue as _;
                let settings: $crate::QueueSettings = $crate::conformance::$knobs();
                let fidelity: $crate::conformance::Fidelity = $fidelity;
                let queue = {
                    let $settings = settings;
                    $make
                };
                $crate::conformance::$check(queue.as_dyn_queue(), &settings, &fidelity).await;
            }
        )*
    };
}

/// A queue, or anything that dereferences to one (`Arc<Q>`, a guard that deletes a temp file on
/// drop), as `&dyn JobQueue`. The macro calls it with method syntax so auto-deref applies.
pub trait AsDynQueue {
    fn as_dyn_queue(&self) -> &dyn JobQueue;
}

impl<Q: JobQueue> AsDynQueue for Q {
    fn as_dyn_queue(&self) -> &dyn JobQueue {
        self
    }
}

/// What the queue under test can show, where a queue may fall short of the port for a reason
/// of its own. Each `false` relaxes the checks in one named way, never more; the embedded queue
/// shows everything ([`Fidelity::EXACT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fidelity {
    /// `enqueue` of a remembered dedupe key answers [`Enqueued::Duplicate`]. Without it (SQS:
    /// `SendMessage` succeeds whether or not it dropped the message) `Accepted` is allowed too,
    /// but the duplicate must still never be delivered.
    pub reports_duplicates: bool,
    /// A dedupe key is remembered after its job was acknowledged. Without it (moto forgets a
    /// FIFO deduplication id once its message is deleted; SQS itself keeps it for 5 minutes)
    /// the dedupe check does not enqueue a duplicate of an acknowledged job.
    pub remembers_acknowledged_keys: bool,
    /// `ack` and `release` of an old receipt (one superseded by a redelivery, already
    /// acknowledged, or of a dead job) are `StaleReceipt`. Without it (moto accepts any receipt
    /// a message ever had, and a deleted message's receipts again; SQS FIFO answers that they
    /// expired) the checks use no old receipt; unknown receipts are still `StaleReceipt`.
    pub rejects_old_receipts: bool,
    /// A long poll returns as soon as an ack or a release during it makes a job ready. Without
    /// it (moto decides which groups are blocked once, when a poll starts, and wakes only for
    /// new messages; SQS itself wakes) the check wakes a poll only with a new job.
    pub wakes_on_ack_and_release: bool,
    /// [`JobQueue::put_back`] takes the delivery's receive back, so a job cut short by a
    /// stopping worker does not come nearer to the dead letters. Without it (SQS cannot) the
    /// put-back delivery counts as a receive, as a release does.
    pub takes_back_receives: bool,
}

impl Fidelity {
    /// Every behaviour the checks pin.
    pub const EXACT: Self = Self {
        reports_duplicates: true,
        remembers_acknowledged_keys: true,
        rejects_old_receipts: true,
        wakes_on_ack_and_release: true,
        takes_back_receives: true,
    };
}

/// The settings of the checks that do not exercise time: the defaults, so nothing times out
/// while a check runs.
pub fn default_settings() -> QueueSettings {
    QueueSettings::default()
}

/// The settings of the timeout and dead-letter checks: deliveries time out after 1 s (SQS
/// counts visibility in whole seconds), and a job is delivered at most 3 times.
pub fn short_timeout_settings() -> QueueSettings {
    QueueSettings {
        visibility_timeout: Duration::from_secs(1),
        max_receives: 3,
        ..QueueSettings::default()
    }
}

/// How long the checks wait for something that should come at once (a long poll woken by new
/// work). Generous: it bounds a hang, not the adapter's speed.
const PROMPTLY: Duration = Duration::from_secs(1);

/// How early an adapter's clock may seem to fire, against the test's.
const SLACK: Duration = Duration::from_millis(50);

/// Within a group, one job at a time, in enqueue order: the next is delivered only once the
/// one before it is acknowledged.
pub async fn check_fifo_within_group(q: &dyn JobQueue, _: &QueueSettings, _: &Fidelity) {
    enqueue_all(q, &[job("A", "a1"), job("A", "a2"), job("A", "a3")]).await;

    for expected in ["a1", "a2", "a3"] {
        let got = receive_now(q, 10).await;
        assert_eq!(
            ids(&got),
            [expected],
            "a group must deliver only its oldest unacknowledged job"
        );
        assert_eq!(
            got[0].receive_count, 1,
            "a first delivery has receive_count 1"
        );
        assert_nothing_ready(q, "while the group's head is in flight").await;
        q.ack(&got[0].receipt).await.unwrap();
    }
    assert_nothing_ready(q, "once every job is acknowledged").await;
}

/// Different groups are delivered together, oldest heads first, up to `max`; a group whose head
/// is in flight does not hold the others back.
pub async fn check_groups_in_parallel(q: &dyn JobQueue, _: &QueueSettings, _: &Fidelity) {
    enqueue_all(
        q,
        &[
            job("A", "a1"),
            job("B", "b1"),
            job("A", "a2"),
            job("C", "c1"),
            job("B", "b2"),
        ],
    )
    .await;

    let first = receive_now(q, 2).await;
    assert_eq!(
        ids(&first),
        ["a1", "b1"],
        "receive(max = 2) must deliver the heads of the two oldest groups"
    );
    let second = receive_now(q, 10).await;
    assert_eq!(
        ids(&second),
        ["c1"],
        "while A's and B's heads are in flight, C's head must still come"
    );
    for d in first.iter().chain(&second) {
        q.ack(&d.receipt).await.unwrap();
    }

    let third = receive_now(q, 10).await;
    assert_eq!(
        sorted(ids(&third)),
        ["a2", "b2"],
        "after the acks, every group's next job must come in one receive"
    );
    for d in &third {
        q.ack(&d.receipt).await.unwrap();
    }

    enqueue_all(q, &[job("D", "d1"), job("E", "e1"), job("F", "f1")]).await;
    let all = receive_now(q, 3).await;
    assert_eq!(
        sorted(ids(&all)),
        ["d1", "e1", "f1"],
        "three ready groups must all come in one receive(max = 3)"
    );
}

/// The same dedupe key within the window is accepted and dropped: one delivery ever, even after
/// the first was acknowledged. Another message of the same group, or the same message id on
/// another channel, is a new job.
pub async fn check_dedupe(q: &dyn JobQueue, _: &QueueSettings, fidelity: &Fidelity) {
    let original = job("A", "m1");
    let mut retry = original.clone();
    retry.text = "a webhook retry with a different body".into();
    enqueue_all(q, std::slice::from_ref(&original)).await;
    assert_duplicate(
        q.enqueue(&retry).await,
        fidelity,
        "the same dedupe key while the first is queued",
    );

    let got = receive_now(q, 10).await;
    assert_eq!(ids(&got), ["m1"], "a duplicate must not be queued");
    assert_eq!(
        got[0].job, original,
        "the first enqueue's job must be the one kept"
    );
    q.ack(&got[0].receipt).await.unwrap();

    if fidelity.remembers_acknowledged_keys {
        assert_duplicate(
            q.enqueue(&retry).await,
            fidelity,
            "the same dedupe key after the ack, within the window,",
        );
        assert_nothing_ready(q, "after a duplicate of an acknowledged job").await;
    }

    let next = job("A", "m2");
    let mut elsewhere = job("A", "m1");
    elsewhere.channel = "sms".into();
    enqueue_all(q, &[next, elsewhere]).await;
    let got = receive_now(q, 10).await;
    assert_eq!(
        sorted(ids(&got)),
        ["m1", "m2"],
        "a new message id, and the same id on another channel, must be new jobs"
    );
}

/// A released job is visible again at once, before the later jobs of its group, with a new
/// receipt and its receive count up by one; the old receipt is stale.
pub async fn check_release(q: &dyn JobQueue, _: &QueueSettings, fidelity: &Fidelity) {
    enqueue_all(q, &[job("A", "a1"), job("A", "a2")]).await;
    let first = receive_one(q, "a1").await;
    q.release(&first.receipt).await.unwrap();

    let again = receive_now(q, 10).await;
    assert_eq!(
        ids(&again),
        ["a1"],
        "a released job must come back before the later jobs of its group"
    );
    let again = &again[0];
    assert_eq!(again.receive_count, 2, "a redelivery counts");
    assert_ne!(
        again.receipt, first.receipt,
        "a redelivery has a new receipt"
    );
    if fidelity.rejects_old_receipts {
        assert_stale(
            q.release(&first.receipt).await,
            "releasing a released delivery",
        );
        assert_stale(
            q.ack(&first.receipt).await,
            "acking a released delivery's receipt",
        );
    }

    q.ack(&again.receipt).await.unwrap();
    let next = receive_one(q, "a2").await;
    assert_eq!(next.receive_count, 1);
}

/// A job released with a delay stays hidden, and holds its group back, until the delay passes;
/// then it comes back first.
pub async fn check_release_after(q: &dyn JobQueue, _: &QueueSettings, _: &Fidelity) {
    enqueue_all(q, &[job("A", "a1"), job("A", "a2"), job("B", "b1")]).await;
    let first = receive_now(q, 10).await;
    assert_eq!(sorted(ids(&first)), ["a1", "b1"]);
    let a1 = first.iter().find(|d| d.job.message_id == "a1").unwrap();
    let b1 = first.iter().find(|d| d.job.message_id == "b1").unwrap();
    q.ack(&b1.receipt).await.unwrap();
    let released = Instant::now();
    q.release_after(&a1.receipt, Duration::from_secs(1))
        .await
        .unwrap();
    assert_nothing_ready(
        q,
        "while the released job waits out its delay (a2 waits behind it)",
    )
    .await;
    let again = q.receive(10, Duration::from_secs(5)).await.unwrap();
    assert!(
        released.elapsed() >= Duration::from_millis(900),
        "came back after {:?}",
        released.elapsed()
    );
    assert_eq!(ids(&again), ["a1"], "the released job comes back first");
    assert_eq!(again[0].receive_count, 2);
}

/// A job put back (its worker stopping) comes back at once, before the later jobs of its
/// group, and where the queue can, its receive was taken back.
pub async fn check_put_back(q: &dyn JobQueue, _: &QueueSettings, fidelity: &Fidelity) {
    enqueue_all(q, &[job("A", "a1"), job("A", "a2")]).await;
    let first = receive_one(q, "a1").await;
    q.put_back(&first.receipt).await.unwrap();
    let again = receive_now(q, 10).await;
    assert_eq!(
        ids(&again),
        ["a1"],
        "a put-back job must come back at once, before the later jobs of its group"
    );
    let expected = if fidelity.takes_back_receives { 1 } else { 2 };
    assert_eq!(
        again[0].receive_count, expected,
        "the receive count after a put-back"
    );
    assert_stale(
        q.put_back("no-such-receipt").await,
        "putting back an unknown receipt",
    );
}

/// A delivery neither acknowledged nor released comes back after the visibility timeout (within
/// a long poll), not before; its old receipt is then stale.
pub async fn check_visibility_timeout(
    q: &dyn JobQueue,
    settings: &QueueSettings,
    fidelity: &Fidelity,
) {
    enqueue_all(q, &[job("A", "a1"), job("A", "a2")]).await;
    // The delivery's clock starts within the receive, which may make more calls after it.
    let delivered = Instant::now();
    let first = receive_one(q, "a1").await;
    assert_nothing_ready(q, "before the visibility timeout").await;

    let again = q
        .receive(10, settings.visibility_timeout + 2 * PROMPTLY)
        .await
        .unwrap();
    let waited = delivered.elapsed();
    assert_eq!(
        ids(&again),
        ["a1"],
        "an unacknowledged delivery must come back after the visibility timeout, \
         before the later jobs of its group, within a long poll"
    );
    assert!(
        waited + SLACK >= settings.visibility_timeout,
        "redelivered {waited:?} after the receive that delivered it, \
         before the visibility timeout {:?}",
        settings.visibility_timeout
    );
    assert!(
        waited < settings.visibility_timeout + PROMPTLY,
        "a long poll must return a timed-out delivery promptly: took {waited:?}, timeout {:?}",
        settings.visibility_timeout
    );
    let again = &again[0];
    assert_eq!(
        again.receive_count, 2,
        "a redelivery after a timeout counts"
    );
    assert_ne!(
        again.receipt, first.receipt,
        "a redelivery has a new receipt"
    );

    if fidelity.rejects_old_receipts {
        assert_stale(
            q.ack(&first.receipt).await,
            "acking a timed-out delivery's receipt",
        );
        assert_stale(
            q.release(&first.receipt).await,
            "releasing a timed-out delivery's receipt",
        );
    }
    q.ack(&again.receipt).await.unwrap();
    let next = receive_one(q, "a2").await;
    assert_eq!(next.receive_count, 1);
}

/// After `max_receives` deliveries without an ack, by release (group B) or by timeout (group A),
/// the job is not delivered again and the next job of its group is.
pub async fn check_dead_letter(q: &dyn JobQueue, settings: &QueueSettings, fidelity: &Fidelity) {
    enqueue_all(
        q,
        &[
            job("A", "a1"),
            job("B", "b1"),
            job("A", "a2"),
            job("B", "b2"),
        ],
    )
    .await;

    let mut last = Vec::new();
    for round in 1..=settings.max_receives {
        last = receive_now(q, 10).await;
        assert_eq!(
            ids(&last),
            ["a1", "b1"],
            "delivery {round} of {} must still come",
            settings.max_receives
        );
        assert!(
            last.iter().all(|d| d.receive_count == round),
            "receive_count must be {round}: {last:?}"
        );
        if round < settings.max_receives {
            for d in &last {
                q.release(&d.receipt).await.unwrap();
            }
        }
    }
    // b1 spends its last delivery by release, a1 by timing out.
    q.release(&last[1].receipt).await.unwrap();
    let got = receive_now(q, 10).await;
    assert_eq!(
        ids(&got),
        ["b2"],
        "a job released max_receives times must not come again; its group must go on"
    );
    q.ack(&got[0].receipt).await.unwrap();

    let got = q
        .receive(10, settings.visibility_timeout + 2 * PROMPTLY)
        .await
        .unwrap();
    assert_eq!(
        ids(&got),
        ["a2"],
        "a job timed out on its last receive must not come again; its group must go on"
    );
    let a2 = &got[0];
    assert_eq!(a2.receive_count, 1);
    if fidelity.rejects_old_receipts {
        assert_stale(q.ack(&last[0].receipt).await, "acking a dead job's receipt");
    }

    q.ack(&a2.receipt).await.unwrap();
    let got = q
        .receive(10, settings.visibility_timeout + 2 * SLACK)
        .await
        .unwrap();
    assert!(
        got.is_empty(),
        "dead jobs must never be delivered again, got {:?}",
        ids(&got)
    );
}

/// A long poll returns as soon as work appears: a new job, the ack of the group's head, a
/// release.
pub async fn check_long_poll_wakes(q: &dyn JobQueue, _: &QueueSettings, fidelity: &Fidelity) {
    let wait = 2 * PROMPTLY;
    let late = Duration::from_millis(200);

    let got = during_receive(q, wait, late, async {
        enqueue_all(q, &[job("A", "a1"), job("A", "a2")]).await;
    })
    .await;
    assert_eq!(
        ids(&got),
        ["a1"],
        "a long poll must return a job enqueued during it"
    );
    if !fidelity.wakes_on_ack_and_release {
        return;
    }

    let a1 = got[0].receipt.clone();
    let got = during_receive(q, wait, late, async { q.ack(&a1).await.unwrap() }).await;
    assert_eq!(
        ids(&got),
        ["a2"],
        "a long poll must return the next job of a group acknowledged during it"
    );

    let a2 = got[0].receipt.clone();
    let got = during_receive(q, wait, late, async { q.release(&a2).await.unwrap() }).await;
    assert_eq!(
        ids(&got),
        ["a2"],
        "a long poll must return a job released during it"
    );
}

/// With nothing to deliver, a long poll waits out its wait and returns empty; so does one
/// whose only job is in flight.
pub async fn check_long_poll_empty(q: &dyn JobQueue, _: &QueueSettings, _: &Fidelity) {
    let wait = Duration::from_millis(400);
    let start = Instant::now();
    let got = q.receive(10, wait).await.unwrap();
    let waited = start.elapsed();
    assert!(got.is_empty(), "an empty queue delivered {:?}", ids(&got));
    assert!(
        waited + SLACK >= wait,
        "an empty long poll must wait for work: returned after {waited:?} of {wait:?}"
    );
    assert!(
        waited < wait + 2 * PROMPTLY,
        "an empty long poll must return after its wait: took {waited:?} of {wait:?}"
    );

    enqueue_all(q, &[job("A", "a1"), job("A", "a2")]).await;
    receive_one(q, "a1").await;
    let start = Instant::now();
    let got = q.receive(10, wait).await.unwrap();
    let waited = start.elapsed();
    assert!(
        got.is_empty(),
        "a group with its head in flight delivered {:?}",
        ids(&got)
    );
    assert!(
        waited + SLACK >= wait,
        "a long poll with nothing ready must wait: returned after {waited:?} of {wait:?}"
    );
}

/// A receipt the queue never issued, or one already acknowledged, is `StaleReceipt` for both
/// `ack` and `release`, and changes nothing.
pub async fn check_unknown_receipt(q: &dyn JobQueue, _: &QueueSettings, fidelity: &Fidelity) {
    assert_stale(q.ack("no-such-receipt").await, "acking an unknown receipt");
    assert_stale(q.release("").await, "releasing an empty receipt");

    enqueue_all(q, &[job("A", "a1"), job("A", "a2")]).await;
    let a1 = receive_one(q, "a1").await;
    assert_stale(q.ack("no-such-receipt").await, "acking an unknown receipt");
    assert_nothing_ready(q, "after a stale ack: the real delivery is still in flight").await;

    q.ack(&a1.receipt).await.unwrap();
    if fidelity.rejects_old_receipts {
        assert_stale(q.ack(&a1.receipt).await, "acking a receipt twice");
        assert_stale(
            q.release(&a1.receipt).await,
            "releasing an acknowledged receipt",
        );
    }
    let a2 = receive_one(q, "a2").await;
    assert_eq!(
        a2.receive_count, 1,
        "a stale release must not touch other jobs"
    );
}

/// Every field of a job comes back exactly: media, button id, unusual text, extreme numbers.
pub async fn check_round_trip(q: &dyn JobQueue, _: &QueueSettings, _: &Fidelity) {
    let full = TurnJob {
        addressed_to: Some("106540352242922".into()),
        trace_context: [
            (
                "traceparent".to_string(),
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string(),
            ),
            (
                "tracestate".to_string(),
                "rojo=00f067aa0ba902b7".to_string(),
            ),
        ]
        .into(),
        channel: "whatsapp".into(),
        message_id: "wamid.HBgLMzQ2\u{00E9}==".into(),
        conversation_key: "+34 600 00 00 00".into(),
        external_user_id: "34600000000".into(),
        text: "caf\u{00E9} \u{1F600}\n\"quoted\" \\ \u{0} \u{2028}".into(),
        button_id: Some("pay-now".into()),
        media: vec![
            JobMedia {
                reference: "media/1234567890".into(),
                mime_type: "image/jpeg".into(),
                size_bytes: Some(u64::MAX),
            },
            JobMedia {
                reference: "https://example.com/v.ogg?a=1&b=%20".into(),
                mime_type: "audio/ogg; codecs=opus".into(),
                size_bytes: None,
            },
        ],
        received_at_ms: i64::MIN,
    };
    let bare = TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "web".into(),
        message_id: "m".into(),
        conversation_key: "c".into(),
        external_user_id: String::new(),
        text: "0123456789abcde\n".repeat(2048),
        button_id: None,
        media: vec![],
        received_at_ms: i64::MAX,
    };
    enqueue_all(q, &[full.clone(), bare.clone()]).await;

    let got = receive_now(q, 10).await;
    assert_eq!(ids(&got), [full.message_id.as_str(), "m"]);
    assert_eq!(
        got[0].job, full,
        "a job with every field set must round-trip"
    );
    assert!(
        got[1].job == bare,
        "a job with empty fields and 32 KiB of text must round-trip"
    );
}

fn job(group: &str, message_id: &str) -> TurnJob {
    TurnJob {
        addressed_to: None,
        trace_context: Default::default(),
        channel: "web".into(),
        message_id: message_id.into(),
        conversation_key: group.into(),
        external_user_id: "user-1".into(),
        text: format!("message {message_id}"),
        button_id: None,
        media: vec![],
        received_at_ms: 1_700_000_000_000,
    }
}

async fn enqueue_all(q: &dyn JobQueue, jobs: &[TurnJob]) {
    for job in jobs {
        let result = q.enqueue(job).await;
        assert!(
            matches!(result, Ok(Enqueued::Accepted)),
            "enqueueing new job {} must be Accepted, got {result:?}",
            job.message_id
        );
    }
}

/// What is ready now, without a long poll.
async fn receive_now(q: &dyn JobQueue, max: usize) -> Vec<Delivery> {
    q.receive(max, Duration::ZERO).await.unwrap()
}

/// Exactly one delivery, of the job `expected`.
async fn receive_one(q: &dyn JobQueue, expected: &str) -> Delivery {
    let mut got = receive_now(q, 10).await;
    assert_eq!(ids(&got), [expected], "expected exactly one delivery");
    got.pop().unwrap()
}

async fn assert_nothing_ready(q: &dyn JobQueue, when: &str) {
    let got = receive_now(q, 10).await;
    assert!(
        got.is_empty(),
        "nothing must be delivered {when}, got {:?}",
        ids(&got)
    );
}

/// A long poll of `wait`, with `meanwhile` run `after` it started; what it returned, checked to
/// have come promptly after `meanwhile`.
async fn during_receive(
    q: &dyn JobQueue,
    wait: Duration,
    after: Duration,
    meanwhile: impl Future<Output = ()>,
) -> Vec<Delivery> {
    let start = Instant::now();
    let (got, ()) = tokio::join!(q.receive(10, wait), async {
        tokio::time::sleep(after).await;
        meanwhile.await;
    });
    let waited = start.elapsed();
    assert!(
        waited < after + PROMPTLY,
        "a long poll must return promptly when work appears: took {waited:?} \
         (work appeared after {after:?}, wait {wait:?})"
    );
    got.unwrap()
}

/// `result` is `Duplicate`, or, for a queue that cannot tell, `Accepted`.
fn assert_duplicate(result: Result<Enqueued, QueueError>, fidelity: &Fidelity, what: &str) {
    let ok = match result {
        Ok(Enqueued::Duplicate) => true,
        Ok(Enqueued::Accepted) => !fidelity.reports_duplicates,
        Err(_) => false,
    };
    assert!(
        ok,
        "{what} must be a Duplicate{}, got {result:?}",
        if fidelity.reports_duplicates {
            ""
        } else {
            " (or Accepted, from a queue that cannot tell)"
        }
    );
}

fn assert_stale(result: Result<(), QueueError>, what: &str) {
    assert!(
        matches!(result, Err(QueueError::StaleReceipt)),
        "{what} must be StaleReceipt, got {result:?}"
    );
}

fn ids(deliveries: &[Delivery]) -> Vec<&str> {
    deliveries
        .iter()
        .map(|d| d.job.message_id.as_str())
        .collect()
}

fn sorted(mut ids: Vec<&str>) -> Vec<&str> {
    ids.sort_unstable();
    ids
}
