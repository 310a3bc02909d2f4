//! The one job path: every turn, from any entrance, as the worker Lambda and `bridle serve`
//! both run it. A messaging-channel job and a web chat job differ only in how identity is
//! resolved and in their [`Sender`] (a platform's API, or the open browser stream,
//! [`web::BrowserStream`]):
//!
//! 0. find the job's **sender**: a job whose channel has none here, or sent to another of the
//!    platform account's addresses ([`Sender::answers_to`]: another number of the same
//!    WhatsApp app), is skipped before anything is written;
//! 1. **claim** the job (one conditional write), so a duplicate delivery never starts a second
//!    turn and a job whose worker died is taken over — where the store offers it, together
//!    with the conversation's lease of step 3 once the sender is known by one read ([`claim`]);
//! 2. **resolve identity** from the verified sender, never from the model: a link code in the
//!    text binds the account and is confirmed; an unknown sender gets the onboarding reply; a
//!    bound sender's turn runs as the bound user ([`identity`]). A web job's user is the
//!    signed-in user the web server put on it, in a conversation that user owns ([`web`]);
//! 3. hold the **conversation's lease** ([`store::Leases`]) while answering, so turns of one
//!    conversation from different entrances or functions never interleave, then **run the
//!    turn** in the conversation of that chat and user, with the message's
//!    attachments fetched and stored by reference first ([`attachments`]; one that cannot be
//!    read becomes a note to the model, never a lost message);
//! 4. **deliver** through the channel's [`Sender`] and **record** what actually went out in the
//!    visible transcript (an attempt that finds the reply recorded does not send again); the
//!    engine never records the reply itself;
//! 5. mark the claim done.
//!
//! The harness's own replies (onboarding, link confirmation, a stale code) make no model call.
//! Depends on the ports only (engine, store, channels, queue): no AWS, no Lambda, no HTTP server.

pub mod attachments;
mod attempt;
mod claim;
pub mod code_attempts;
mod conversation;
mod deliver;
mod error;
mod hourly;
pub mod identity;
mod lease;
use lease::Deadline;
pub use lease::RELEASE_GRACE;
pub mod lines;
mod press;
pub mod sent;
pub mod settle;
mod spans;
pub mod web;

pub use conversation::{
    CHANNEL_PURPOSE, DEFAULT_LOBBY_RETENTION, escape_key, keep_lobby, lobby_conversation,
    lobby_retention_from_setting, user_conversation,
};
pub use error::JobError;

use attachments::NotKept;
use attempt::Attempt;
use channels::Sender;
use claim::{Early, LeaseNow};
use engine::{Engine, EventSink, NullSink, TurnInput, TurnOutcome};
use identity::Resolved;
use queue::TurnJob;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use store::{Claim, Store, VisibleEntry};
use tokio_util::task::TaskTracker;
use tools::ActionId;
use tracing::Instrument;
use transcript::ConversationId;

/// Unix milliseconds now; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The system clock as a [`Clock`].
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    })
}

/// The knobs of channel jobs.
#[derive(Clone)]
pub struct JobOptions {
    /// Added to a turn's deadline to make its claim's expiry.
    pub claim_slack: Duration,
    /// How long a conversation's lease lasts unless renewed (it is renewed every third of
    /// this while the turn runs): the longest a dead holder keeps the conversation's next
    /// turn waiting.
    pub lease_ttl: Duration,
    /// How long a done claim is remembered (duplicates arriving later are skipped).
    pub keep_done: Duration,
    /// Where people get a link code (the web app, from `PUBLIC_BASE_URL`); shown in the
    /// onboarding reply.
    pub signup_url: String,
    pub clock: Clock,
    /// Where the turn metrics (EMF lines) go.
    pub metrics: metrics::Metrics,
    /// Where attachments are fetched from and kept; `None`: the model is told they cannot be
    /// read here.
    pub media: Option<attachments::Attachments>,
    /// A turn's estimated cost in US dollars from its usage (the price table of the model in
    /// use); `None` leaves the cost metric out.
    pub estimate_usd: Option<EstimateUsd>,
    /// Set to `true` when running jobs must stop now (`bridle serve` stopping past its grace
    /// period): a job holding or waiting for its conversation's lease gives the lease up, its
    /// claim is released, and it ends [`JobOutcome::Failed`] ([`JobError::CutShort`]) for its queue to
    /// put back, so the next start resumes it at once.
    pub abandon: Arc<tokio::sync::watch::Sender<bool>>,
    /// How long an unknown sender's lobby is kept after its last message
    /// ([`DEFAULT_LOBBY_RETENTION`], `BRIDLE_LOBBY_RETENTION_DAYS`).
    pub lobby_retention: Duration,
    /// Read the context block's facts beside a claim that may take the conversation's lease
    /// with it, not under the lease after it: one wait for the database saved on every turn,
    /// paid for by a read thrown away whenever the claim does not take the lease (a duplicate,
    /// a busy conversation, a takeover). On where a read is a local hand-off (`bridle serve` on
    /// SQLite); off (the default) where every read is a paid call (DynamoDB).
    pub context_beside_claim: bool,
    /// How long the writes that settle an attempt (its claim's and lease's release) are tried
    /// again while the store is unavailable ([`settle`]); zero (the default) tries once.
    /// [`settle::LOCAL_RETRY_FOR`] in `bridle serve`, whose worker settles with its queue
    /// under the same window.
    pub settle_retry_for: Duration,
    /// Replies the platform took whose record is not written yet, remembered by this process
    /// so a retry records them instead of sending them again ([`sent`]).
    pub sent: Arc<sent::SentReplies>,
    /// What keys the code a typed yes must carry where the channel cannot prove its sender
    /// (SMS): [`confirm_code_key`] from the settings; `None` leaves the code unkeyed.
    pub confirm_code_key: Option<engine::CodeKey>,
}

/// The key of the codes SMS questions carry ([`engine::confirm_code`]): derived from
/// `TWILIO_AUTH_TOKEN`, a secret only Bridle and Twilio hold and the one SMS channel's own, so
/// every process that sends or answers SMS has it, and a restart keeps the codes already sent.
/// `None` without it (no SMS is then sent or answered).
pub fn confirm_code_key(var: impl Fn(&str) -> Option<String>) -> Option<engine::CodeKey> {
    var("TWILIO_AUTH_TOKEN")
        .filter(|t| !t.trim().is_empty())
        .map(|t| engine::CodeKey::derive(t.trim().as_bytes()))
}

/// Usage → estimated US dollars.
pub type EstimateUsd = Arc<dyn Fn(&transcript::Usage) -> f64 + Send + Sync>;

impl std::fmt::Debug for JobOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobOptions")
            .field("claim_slack", &self.claim_slack)
            .field("keep_done", &self.keep_done)
            .field("signup_url", &self.signup_url)
            .field("media", &self.media)
            .field("confirm_code_key", &self.confirm_code_key)
            .finish_non_exhaustive()
    }
}

impl Default for JobOptions {
    fn default() -> Self {
        Self {
            claim_slack: Duration::from_secs(30),
            lease_ttl: Duration::from_secs(60),
            keep_done: Duration::from_secs(7 * 24 * 3600),
            signup_url: "http://localhost:8080/".into(),
            clock: system_clock(),
            metrics: metrics::Metrics::default(),
            media: None,
            estimate_usd: None,
            abandon: Arc::new(tokio::sync::watch::Sender::new(false)),
            lobby_retention: DEFAULT_LOBBY_RETENTION,
            context_beside_claim: false,
            settle_retry_for: Duration::ZERO,
            sent: Arc::default(),
            confirm_code_key: None,
        }
    }
}

/// What became of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// The turn ran (or resumed) and its reply was sent.
    Done,
    /// The harness answered by itself (onboarding, link confirmation, stale code); no model call.
    Answered(Resolved),
    /// Nothing to do: the job was done before, or is not for us.
    Skipped(&'static str),
    /// Not done: retry it later (SQS redelivers it; the local queue releases it).
    Failed(JobError),
}

/// How often a sender gets one of the harness's replies limited by [`Resolved::hourly_reply`].
pub const STRANGER_REPLY_EVERY: Duration = Duration::from_secs(3600);

/// A job's outcome, and the turn's when one ran.
#[derive(Debug)]
pub struct Ran {
    pub outcome: JobOutcome,
    pub turn: Option<TurnOutcome>,
    /// Until when (milliseconds on the jobs' clock) the job's claim still holds after a failed
    /// attempt: this attempt's own, when its release failed (the store stayed unavailable), or
    /// another attempt's ([`JobError::Busy`]). A delivery before then finds the job busy and
    /// spends one of its receives for nothing, so the job is best not seen again sooner
    /// ([`Ran::claim_lapses_in`]).
    pub claim_held_until: Option<i64>,
}

/// Added to the wait for a held claim to lapse: the next attempt may run on another machine,
/// whose clock may be a little behind this one's.
pub const CLAIM_LAPSE_MARGIN: Duration = Duration::from_secs(1);

impl Ran {
    /// How long from `now_ms` until the claim held after this attempt has lapsed for any
    /// worker ([`CLAIM_LAPSE_MARGIN`] included); `None` when no claim is held.
    pub fn claim_lapses_in(&self, now_ms: i64) -> Option<Duration> {
        let left = self.claim_held_until?.saturating_sub(now_ms).max(0);
        Some(Duration::from_millis(left as u64) + CLAIM_LAPSE_MARGIN)
    }
}

/// Why no sender here answers a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NotAnswered {
    /// Its channel has none configured.
    NoSender,
    /// It was sent to another of the platform account's addresses.
    SentElsewhere,
}

impl NotAnswered {
    fn why(self) -> &'static str {
        match self {
            Self::NoSender => "no sender for this channel",
            Self::SentElsewhere => "sent to an address this deployment does not answer for",
        }
    }
}

/// Everything a job needs, built once.
pub struct ChannelJobs {
    pub engine: Arc<Engine>,
    pub store: Arc<dyn Store>,
    /// Reply senders by channel name; [`web::WEB_CHANNEL`] → [`web::BrowserStream`] where the
    /// web chat is served.
    pub senders: HashMap<String, Arc<dyn Sender>>,
    pub options: JobOptions,
}

impl std::fmt::Debug for ChannelJobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.senders.keys().collect();
        names.sort();
        f.debug_struct("ChannelJobs")
            .field("senders", &names)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ChannelJobs {
    /// Run one job within `budget`: claim, answer, mark done. The turn's events are dropped
    /// (a messaging channel gets the delivered reply only).
    pub async fn run(&self, job: &TurnJob, budget: Duration) -> JobOutcome {
        self.run_streamed(job, budget, &NullSink).await.outcome
    }

    /// [`ChannelJobs::run`], with the turn's events streamed to `sink` as they happen; `done`
    /// comes after the reply is recorded.
    pub async fn run_streamed(&self, job: &TurnJob, budget: Duration, sink: &dyn EventSink) -> Ran {
        let span = spans::job(job);
        let ran = self
            .attempt(job, budget, sink)
            .instrument(span.clone())
            .await;
        span.record("outcome", tracing::field::debug(&ran.outcome));
        ran
    }

    async fn attempt(&self, job: &TurnJob, budget: Duration, sink: &dyn EventSink) -> Ran {
        let failed = |why: JobError| Ran {
            outcome: JobOutcome::Failed(why),
            turn: None,
            claim_held_until: None,
        };
        if budget.is_zero() {
            return failed(JobError::NoTime);
        }
        // Before the claim: a job no sender here answers costs no write (and takes no lease).
        let sender = match self.sender_for(job) {
            Ok(sender) => sender,
            Err(not) => {
                return Ran {
                    outcome: JobOutcome::Skipped(not.why()),
                    turn: None,
                    claim_held_until: None,
                };
            }
        };
        let o = &self.options;
        let key = job.dedupe_key();
        let now = (o.clock)();
        let expires = now + (budget + o.claim_slack).as_millis() as i64;
        let claim_span = spans::claim();
        let (claim, early) = self
            .claim(job, &key, now, expires)
            .instrument(claim_span.clone())
            .await;
        claim_span.record(
            "outcome",
            match &claim {
                Ok(Claim::Fresh) => "fresh",
                Ok(Claim::TakenOver { .. }) => "taken_over",
                Ok(Claim::Busy { .. }) => "busy",
                Ok(Claim::Done) => "done",
                Err(_) => "failed",
            },
        );
        let attempt = match claim {
            Ok(Claim::Done) => {
                return Ran {
                    outcome: JobOutcome::Skipped("already done"),
                    turn: None,
                    claim_held_until: None,
                };
            }
            Ok(Claim::Busy { until_ms }) => {
                return Ran {
                    claim_held_until: Some(until_ms),
                    ..failed(JobError::Busy)
                };
            }
            Ok(Claim::TakenOver { attempt }) => {
                tracing::warn!(job = %key, attempt, "taking over a job whose worker died");
                attempt
            }
            Ok(Claim::Fresh) => 1,
            Err(e) => return failed(e.into()),
        };
        let held = web::HoldDone::new(sink);
        let this = Attempt {
            retry: attempt > 1,
            // Cut at the deadline where the conversation's lease is held, which gives it back
            // (a turn cut from outside kept it until it lapsed, and the conversation's next
            // message, or this job's retry, waited for that); the timeout is the backstop, a
            // moment later, for whatever the release itself waits on.
            deadline: Deadline {
                at: tokio::time::Instant::now() + budget,
                budget,
            },
            charges: TaskTracker::new(),
        };
        let answered = tokio::time::timeout(
            budget + RELEASE_GRACE,
            self.answer(job, sender, early, &held, &this),
        )
        .await;
        let (outcome, turn, finished) = match answered {
            Ok(Ok(answered)) => answered,
            Ok(Err(why)) => return self.end_attempt(&key, attempt, expires, why, &this).await,
            Err(_) => {
                let why = JobError::Deadline(budget);
                return self.end_attempt(&key, attempt, expires, why, &this).await;
            }
        };
        // Its charges were awaited as they were made (only a step cut off leaves one running).
        this.charges_written(&key).await;
        // The reply is recorded: a client that reloads on `done` finds it.
        held.release();
        // A skipped job is done too: its claim then goes after `keep_done` rather than staying
        // a running claim nobody finishes (an unknown sender's every message left one).
        if !finished
            && matches!(
                outcome,
                JobOutcome::Done | JobOutcome::Answered(_) | JobOutcome::Skipped(_)
            )
        {
            // Tried again while the store is unavailable, as the claim's release is.
            let marked = settle::retried(
                "the job's done mark",
                o.settle_retry_for,
                settle::store_transient,
                || {
                    let keep_until = (o.clock)() + o.keep_done.as_millis() as i64;
                    self.store.finish_job(&key, keep_until)
                },
            )
            .await;
            if let Err(e) = marked {
                // Crash story: the reply is recorded, so the retry's turn resumes as finished
                // and delivery finds the reply already there (nothing is sent twice). The
                // claim is still this attempt's until it lapses: said so, the retry waits for
                // that instead of finding the job busy and spending a delivery on it.
                return Ran {
                    outcome: JobOutcome::Failed(JobError::NotMarkedDone(e.to_string())),
                    turn: None,
                    claim_held_until: Some(expires),
                };
            }
        }
        Ran {
            outcome,
            turn,
            claim_held_until: None,
        }
    }

    /// This attempt is over without finishing: release its claim so the retry (after the
    /// queue's backoff) takes over at once and resumes the turn from the stored transcript,
    /// keeping with it what this attempt sent of its reply, so a retry anywhere sends only the
    /// rest ([`sent`]). Crash story: a worker that dies before this leaves the claim to expire
    /// instead, and what it sent to its own memory.
    ///
    /// Meanwhile the charges of what it sent, left running by a step its deadline cut off, are
    /// awaited: in a Lambda function, a task still running when the batch is answered may be
    /// frozen with its environment and never run. Beside the release, not after it, so the
    /// wait costs the function's margin nothing unless a ledger write is slow.
    async fn end_attempt(
        &self,
        key: &str,
        attempt: u32,
        expires: i64,
        why: JobError,
        this: &Attempt,
    ) -> Ran {
        let retry_for = self.options.settle_retry_for;
        let release = async {
            let sent = self.reply_sent_to_keep(key).await;
            settle::retried(
                "the job's claim",
                retry_for,
                settle::store_transient,
                || {
                    let now = (self.options.clock)();
                    self.store.release_job(key, attempt, now, sent.as_ref())
                },
            )
            .await
        };
        let (released, ()) = tokio::join!(release, this.charges_written(key));
        if let Err(e) = &released {
            tracing::warn!(job = %key, error = %e, "could not release the job's claim; it will expire");
        }
        Ran {
            outcome: JobOutcome::Failed(why),
            turn: None,
            claim_held_until: released.is_err().then_some(expires),
        }
    }

    /// What this process remembers of `key`'s reply, to keep with the claim as the attempt
    /// releases it: only when it is further than what is kept there already (an attempt in
    /// another process may have got further since this one remembered; the read is on a
    /// failed attempt's way out only). `None` keeps what is there.
    async fn reply_sent_to_keep(&self, key: &str) -> Option<store::ReplySent> {
        let mine = self.options.sent.of_job(key)?;
        let kept = match self.store.reply_sent(key).await {
            Ok(kept) => kept.map(sent::Sent::from),
            // Unreadable: keep nothing rather than risk going back.
            Err(_) => return None,
        };
        let ahead = kept.as_ref().is_none_or(|k| mine.progress() > k.progress());
        ahead.then(|| mine.into())
    }

    /// The sender that answers `job`, or why none here does: its channel has no sender
    /// configured, or it was sent to another of the platform account's addresses (another
    /// number of the same WhatsApp app). Either is said in the log and the job is skipped: a
    /// retry would find the same.
    pub(crate) fn sender_for(&self, job: &TurnJob) -> Result<&dyn Sender, NotAnswered> {
        let Some(sender) = self.senders.get(&job.channel) else {
            tracing::error!(channel = %job.channel, job = %job.dedupe_key(), "no sender configured for this channel");
            return Err(NotAnswered::NoSender);
        };
        match job.addressed_to.as_deref() {
            Some(address) if !sender.answers_to(address) => {
                tracing::warn!(channel = %job.channel, job = %job.dedupe_key(), address, "sent to another of the platform account's addresses; not answered here");
                Err(NotAnswered::SentElsewhere)
            }
            _ => Ok(sender.as_ref()),
        }
    }

    /// Resolve who is writing (unless the claim did), then answer: by the harness (no model
    /// call) or with a turn. The flag says whether the job's claim is already marked done (with
    /// the turn's reply).
    async fn answer(
        &self,
        job: &TurnJob,
        sender: &dyn Sender,
        early: Early,
        sink: &dyn EventSink,
        this: &Attempt,
    ) -> Result<(JobOutcome, Option<TurnOutcome>, bool), JobError> {
        let deadline = this.deadline;
        let not_owned = || {
            tracing::warn!(job = %job.dedupe_key(), "web job for a conversation its user does not own; dropped");
            Ok((
                JobOutcome::Skipped("not the user's conversation"),
                None,
                false,
            ))
        };
        // A web job claimed with its lease has its owner checked under it, by the start read.
        let mut owner_unchecked = false;
        let (user, conversation) = if job.channel == web::WEB_CHANNEL {
            let owned = match early.owned {
                Some(owned) => owned,
                None if early.lease == LeaseNow::Held => {
                    owner_unchecked = true;
                    Some((
                        transcript::UserId(job.external_user_id.clone()),
                        ConversationId(job.conversation_key.clone()),
                    ))
                }
                None => web::owned_conversation(self.store.as_ref(), job)
                    .await
                    .map_err(JobError::from)?,
            };
            match owned {
                Some(owned) => owned,
                None => return not_owned(),
            }
        } else {
            let resolved = match early.resolved {
                Some(resolved) => resolved,
                None => identity::resolve(self.store.as_ref(), job, (self.options.clock)())
                    .await
                    .map_err(JobError::from)?,
            };
            let user = match &resolved {
                Resolved::Bound(user) => user.clone(),
                other => {
                    // A reply that costs (an SMS, billed per segment) and that no model call
                    // guards goes out only while the dollar caps its segments count in have
                    // room: its user's (a stranger's: the strangers') and everyone's. One
                    // onboarding reply an hour per unknown number is still a reply per number,
                    // a crowd of numbers (SMS pumping) would spend on replies alone, and so
                    // would an account linking and unlinking a number over and over (a link
                    // code is a web request away). When a cap is full, a link or unlink is done
                    // all the same, and goes unsaid: nothing else is answered then either.
                    if sender.billed_segments(engine::lines::GAVE_UP) > 0
                        && self
                            .engine
                            .fees_over_cap(other.payer())
                            .await
                            .map_err(JobError::from)?
                    {
                        tracing::warn!(job = %job.dedupe_key(), outcome = ?other, "a dollar cap is full: this harness reply, which costs, is not sent");
                        return Ok((
                            JobOutcome::Skipped(
                                "a dollar cap is full; a reply that costs is not sent",
                            ),
                            None,
                            false,
                        ));
                    }
                    let limit = other.hourly_reply().map(|limit| match other {
                        Resolved::LinkAsked { to } => format!("{limit}-{}", to.0),
                        _ => limit.to_owned(),
                    });
                    let hourly = match limit {
                        Some(limit) => match self.take_hourly(job, &limit).await {
                            Some(taken) => Some(taken),
                            None => {
                                return Ok((
                                    JobOutcome::Skipped("this reply was sent this hour already"),
                                    None,
                                    false,
                                ));
                            }
                        },
                        None => None,
                    };
                    let in_lobby = other.user().is_none();
                    // Given back when this attempt fails before the reply goes out (a store
                    // failure here), or the retry would find it taken and say nothing this hour.
                    let prepared: Result<_, JobError> = async {
                        let conversation = match other.user() {
                            Some(user) => user_conversation(self, job, user).await,
                            None => lobby_conversation(self, job).await,
                        }
                        .map_err(JobError::from)?;
                        // Read once the conversation (and with it a first contact's account) is
                        // made, so that a retry words the reply as the attempt before it did.
                        let mut labels = std::collections::HashMap::new();
                        for user in other.named() {
                            let account = self.store.account(user).await.map_err(JobError::from)?;
                            labels.insert(user.clone(), lines::account_label(account.as_ref()));
                        }
                        // A move code is made only for a reply that goes out (once an hour).
                        let asked = match other {
                            Resolved::MoveAsked { to, .. } => Some((to, false)),
                            Resolved::LinkAsked { to } => Some((to, true)),
                            _ => None,
                        };
                        let move_code = match asked {
                            Some((to, first_link)) => Some(
                                identity::MoveCode::make(
                                    self.store.as_ref(),
                                    job,
                                    to,
                                    first_link,
                                    (self.options.clock)(),
                                )
                                .await
                                .map_err(JobError::from)?,
                            ),
                            None => None,
                        };
                        let text = lines::harness_reply(
                            other,
                            &self.options.signup_url,
                            &|u| labels.get(u).cloned().unwrap_or_default(),
                            move_code.as_deref(),
                        );
                        Ok((conversation, text))
                    }
                    .await;
                    let (conversation, text) = match prepared {
                        Ok(prepared) => prepared,
                        Err(err) => {
                            if let Some(taken) = hourly {
                                self.give_back_hourly(taken).await;
                            }
                            return Err(err);
                        }
                    };
                    // Whether sending began: a failure before it (the lease, the deadline, a
                    // stop) gives the hourly claim back for the retry, as a send the platform
                    // did not take does; one after (the reply's record) does not: it may have
                    // gone out.
                    let sending = std::sync::atomic::AtomicBool::new(false);
                    let delivered = self
                        .leased(job, &conversation, LeaseNow::ToTake, deadline, async {
                            let payer = deliver::Payer {
                                user: other.payer(),
                                conversation: &conversation,
                                charges: &this.charges,
                            };
                            sending.store(true, std::sync::atomic::Ordering::SeqCst);
                            self.deliver_harness_reply(job, payer, &text, sender, this.retry)
                                .instrument(spans::delivery(&job.channel))
                                .await?;
                            // The exchange just recorded expires with the lobby (a crash before
                            // this leaves it undated until the sender's next message).
                            if in_lobby {
                                keep_lobby(self, &conversation)
                                    .await
                                    .map_err(JobError::from)?;
                            }
                            Ok(((), None))
                        })
                        .await;
                    if let (Err(err), Some(taken)) = (&delivered, hourly)
                        && (matches!(err, JobError::Send(..))
                            || !sending.load(std::sync::atomic::Ordering::SeqCst))
                    {
                        // It did not go out: the retry sends it.
                        self.give_back_hourly(taken).await;
                    }
                    delivered?;
                    tracing::info!(job = %job.dedupe_key(), outcome = ?other, "answered by the harness");
                    return Ok((JobOutcome::Answered(other.clone()), None, false));
                }
            };
            // Read (or created) once the lease is held, below.
            let conversation = conversation::user_conversation_id(job, &user);
            (user, conversation)
        };
        tracing::debug!(user = %user.0, conversation = %conversation, "job resolved");
        let (mut claimed, mut facts) = (early.start, early.facts);
        let (outcome, finished) = self
            .leased(job, &conversation, early.lease, deadline, async {
                // The conversation is read under the lease, so the turn starts from this read
                // instead of its own. A web job's owner is checked here when its lease came
                // with the claim; else it was read before the lease, and is read again here
                // with the account where the store reads both at once (else by the turn).
                let row = if job.channel == web::WEB_CHANNEL {
                    let row = web::turn_read(
                        self.store.as_ref(),
                        &conversation,
                        &user,
                        claimed.take(),
                        facts.take(),
                    )
                    .await
                    .map_err(JobError::from)?;
                    if row.is_none() && owner_unchecked {
                        // Gone, or not the job's user's: no turn, and the lease goes back.
                        return Ok((None, None));
                    }
                    row
                } else {
                    Some(
                        conversation::user_conversation_row(
                            self,
                            job,
                            &user,
                            claimed.take(),
                            facts.take(),
                        )
                        .await
                        .map_err(JobError::from)?,
                    )
                };
                let payer = deliver::Payer {
                    user: Some(&user),
                    conversation: &conversation,
                    charges: &this.charges,
                };
                let (outcome, shown) = self.turn(job, payer, row, sink, sender).await?;
                Ok((Some(outcome), shown))
            })
            .await?;
        let Some(outcome) = outcome else {
            return not_owned();
        };
        Ok((JobOutcome::Done, Some(outcome), finished))
    }

    /// Why a turn starting from `row` will not run, when it will not: the conversation or the
    /// account ([`attachments::turn_refused`]), else the guard's refusal of even a bare first
    /// call ([`Engine::refuses_outright`]: a full budget window or hourly rate is a limit; no
    /// model configured is the assistant not answering).
    async fn will_not_run(&self, row: &engine::TurnRead) -> Option<(&'static str, NotKept)> {
        if let Some(why) = attachments::turn_refused(row) {
            return Some((why, NotKept::NotAnswering));
        }
        let denied = self.engine.refuses_outright(row).await?;
        Some(match denied.kind {
            engine::DeniedKind::Limit => ("over_a_limit", NotKept::OverALimit),
            _ => ("refused", NotKept::NotAnswering),
        })
    }

    /// The turn, then delivery; what went out is returned for the lease's end to record.
    async fn turn(
        &self,
        job: &TurnJob,
        payer: deliver::Payer<'_>,
        mut row: Option<engine::TurnRead>,
        sink: &dyn EventSink,
        sender: &dyn Sender,
    ) -> Result<(TurnOutcome, Option<VisibleEntry>), JobError> {
        let conversation = payer.conversation;
        let said = self.said(job, conversation).await;
        // Whether the turn started before shows in its segment, which a store that reads the
        // conversation alone (DynamoDB) did not read: read it now, for the turn to use too
        // (it would read it first thing), so a message with attachments tells.
        if !job.media.is_empty()
            && let Some(row) = row.as_mut()
            && row.messages.is_none()
        {
            let segment = row.conversation.segment;
            row.messages = Some(self.store.messages(conversation, segment).await?);
        }
        // A turn that will not run fetches nothing: each attachment is a download of up to
        // 10 MB, kept in the media store. Its transcript notes what was sent.
        let action_id = ActionId(job.dedupe_key());
        let prepared = match row.as_ref() {
            _ if job.media.is_empty() => attachments::Prepared::default(),
            None => attachments::prepare(self.options.media.as_ref(), job).await,
            // Started before (its worker died): it resumes from the message it stored, which
            // holds its attachments (or notes) already.
            Some(row) if row.has_started(&action_id) => {
                tracing::info!(job = %job.dedupe_key(), "the turn resumes; its attachments are not fetched again");
                attachments::Prepared::default()
            }
            Some(row) => match self.will_not_run(row).await {
                Some((why, because)) => {
                    tracing::info!(job = %job.dedupe_key(), why, attachments = job.media.len(), "the turn will not run; its attachments are not fetched");
                    attachments::not_kept(job, because)
                }
                None => attachments::prepare(self.options.media.as_ref(), job).await,
            },
        };
        let input = TurnInput {
            // 0: a job that does not say (written by hand, or by a test).
            sent_at_ms: Some(job.received_at_ms).filter(|ms| *ms > 0),
            conversation_id: conversation.clone(),
            text: said.text,
            action_id,
            attachments: prepared.refs,
            attachment_notes: prepared.notes,
            button_id: said.button_id,
            // SMS cannot prove its sender: only a reply with the question's code confirms.
            typed_yes: press::typed_yes(&job.channel),
        };
        let started = std::time::Instant::now();
        let outcome = match row {
            Some(row) => self.engine.run_turn_in(row, input, sink).await,
            None => self.engine.run_turn(input, sink).await,
        }
        .map_err(JobError::from)?;
        if outcome.end == engine::TurnEnd::Overtaken {
            // Not a turn: nothing ran. A reply now, after the newer message's, would answer a
            // message long past — or be that turn's answer again.
            tracing::info!(job = %job.dedupe_key(), "a later message's turn began after this one; nothing run or sent");
            return Ok((outcome, None));
        }
        let metrics = turn_metrics(
            job,
            &outcome,
            started.elapsed(),
            self.options.estimate_usd.as_deref(),
        );
        if let Some(usd) = metrics.estimated_usd {
            tracing::Span::current().record("cost_usd", usd);
        }
        self.options.metrics.turn(&metrics);
        let shown = self
            .deliver_turn(job, payer, &outcome, sender)
            .instrument(spans::delivery(&job.channel))
            .await?;
        Ok((outcome, shown))
    }
}

/// The EMF figures of one turn.
pub fn turn_metrics(
    job: &queue::TurnJob,
    outcome: &engine::TurnOutcome,
    took: Duration,
    estimate_usd: Option<&(dyn Fn(&transcript::Usage) -> f64 + Send + Sync)>,
) -> metrics::TurnMetrics {
    metrics::TurnMetrics {
        channel: job.channel.clone(),
        resumed: outcome.resumed,
        model_calls: outcome.new_model_calls,
        input_tokens: outcome.usage.input_tokens,
        output_tokens: outcome.usage.output_tokens,
        cache_read_tokens: outcome.usage.cache_read_tokens,
        cache_write_tokens: outcome.usage.cache_write_tokens,
        tool_errors: Some(outcome.tool_errors),
        estimated_usd: estimate_usd.map(|f| f(&outcome.usage)),
        duration_ms: took.as_millis() as u64,
    }
}
