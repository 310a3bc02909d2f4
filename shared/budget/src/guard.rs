//! The budget guard: give each call the output the caps can pay for, reserve that worst case
//! before the call, settle it with the real usage after.

use crate::prices::Price;
use crate::room::output_room;
use crate::{Bucket, BudgetConfig, Clock, RunningEstimate, Unit, lines};
use async_trait::async_trait;
use backend::ChatRequest;
use engine::{CallReport, Denied, Guard, GuardCall, Permit, Prepared, Settlement};
use std::sync::Arc;
use store::{Adjustment, BucketKey, BudgetLedger, Charge, Reserve, StoreError};
use transcript::{Conversation, ConversationId, Usage, UserId};

/// How often a call tries again to reserve a smaller allowance after concurrent calls took the
/// room it had read. Each lost try means another call's reservation landed (or a settle
/// changed the bucket), so the ledger always makes progress.
const ATTEMPTS: usize = 8;

/// Gives each model call the output it may produce and reserves the call's worst case on every
/// spend bucket (user tokens per minute and per hour, user dollars and global dollars per 30
/// days, and the conversation's dollars for reports) in one all-or-nothing ledger write, then
/// settles it with the real usage after the call.
///
/// **Allowance.** A call's output allowance is the request's `max_tokens`, lowered to
/// [`BudgetConfig::output_allowance`] and to the most output that, with the call's estimated
/// input ([`crate::estimate_input_tokens`], kept as a running total per conversation so a call
/// measures only the messages new since the last: [`RunningEstimate`]), fits in what every capped bucket has left (tokens one for
/// one; dollars at the model's input and output prices). The [`Permit`] carries it and the
/// engine sends the request with it. When the room is below
/// [`BudgetConfig::min_output_tokens`] (or not even the input fits) the call is refused with
/// the tightest bucket's sentence.
///
/// **Reservation.** Estimated input + the allowance, in tokens and priced in dollars: the most
/// the call can cost if the provider honours `max_tokens` (output includes reasoning) and the
/// input estimate holds. Reserving is an atomic conditional add that never takes a bucket past
/// its cap; when concurrent calls took the room first, the call re-reads the buckets and tries
/// a smaller allowance (up to [`ATTEMPTS`] times). After a tool round the first try goes with
/// the tool message instead ([`Guard::prepare`]: one write where the store is the ledger);
/// a cap that refuses it there sends the call through here.
///
/// **The bound.** Settling replaces each reservation by the real usage. Let L be the last call
/// admitted in a window: at its admission, the bucket held the real usage of the calls settled
/// so far plus the reservations in flight, and that fit the cap. Afterwards only the in-flight
/// calls change the bucket, each by (real − reserved), and real output never exceeds the
/// reserved allowance. So the settled total of a window is at most
///
/// > cap + Σ over the calls in flight at L's admission of the input's under-estimate
///
/// (real input-side tokens − estimated input tokens, in token buckets; in dollar buckets the
/// real input-side cost — cache reads, and cache writes, which cost more than plain input —
/// minus the estimate priced at the input price), provided the provider honours `max_tokens`.
/// With a true input count the overshoot is zero, and output never adds to it. The estimate is
/// UTF-8 bytes / 4 (`BYTES_PER_TOKEN` in `estimate.rs`): about right for English prose and
/// for scripts of two- and three-byte characters; JSON and code run nearer 3 characters a
/// token (a third more tokens than estimated), and the
/// provider's own framing (a tool-use preamble, per-message tokens) and attachments (estimated
/// by their kind and size, a PDF or Office file at most 25,000 tokens: `media_bytes` in
/// `estimate.rs`) come on top. Since the in-flight reservations together
/// fit in the cap, for text the overshoot stays below about a third of the input share of the
/// cap that was in flight. Sequential calls (one conversation's turn) have one call in flight;
/// a settle that cannot be written leaves the reservation: it over-counts a call that used
/// less, and misses the input under-estimate of one that used more.
///
/// A call that fails keeps its reservation until settled from an estimate (the provider may
/// have charged). A ledger that cannot be reached denies the call (fails closed): invariant 9
/// says no call starts unless the budget is known to allow it.
pub struct BudgetGuard {
    ledger: Arc<dyn BudgetLedger>,
    config: Arc<BudgetConfig>,
    clock: Clock,
    /// The input estimate of each call, kept as a running total per conversation.
    estimate: RunningEstimate,
    /// Also count the turn's message against its conversation's hourly rate, in the first
    /// call's reservation ([`BudgetGuard::with_conversation_rate`]).
    rate: bool,
}

impl std::fmt::Debug for BudgetGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BudgetGuard").finish_non_exhaustive()
    }
}

/// What a reservation added, carried to the settle step.
#[derive(Debug)]
struct Reservation {
    model: String,
    /// The request's estimated input tokens (what a call that streamed is settled to when the
    /// provider reports no usage).
    input: u64,
    /// The output allowance the call was sent with: a provider produces no more.
    output: u64,
    tokens: u64,
    usd: u64,
    buckets: Vec<(Bucket, BucketKey, i64)>,
}

/// The charges of one try: each bucket with what it would add.
struct Plan {
    buckets: Vec<Bucket>,
    charges: Vec<Charge>,
    tokens: u64,
    usd: u64,
}

impl BudgetGuard {
    pub fn new(ledger: Arc<dyn BudgetLedger>, config: Arc<BudgetConfig>, clock: Clock) -> Self {
        Self {
            ledger,
            config,
            clock,
            estimate: RunningEstimate::default(),
            rate: false,
        }
    }

    /// Count each turn's message against its conversation's messages-per-hour cap, as
    /// [`crate::ConversationRate`] does, but in the same all-or-nothing reservation as the
    /// turn's first call (one write instead of two): a message over the rate is refused with
    /// the rate's sentence and charges nothing; one the budget refuses is not counted either.
    pub fn with_conversation_rate(mut self) -> Self {
        self.rate = true;
        self
    }

    /// The rate's charge for `call`: on the turn's first call only.
    fn rate_charge(&self, call: &GuardCall<'_>, now: i64) -> Option<Charge> {
        if !self.rate || call.call_number != 1 {
            return None;
        }
        let b = Bucket::ConversationMessagesHour;
        let conv = call.conversation;
        let bucket = b.key(&conv.user_id, &conv.id, now);
        Some(Charge {
            expires_at_ms: bucket.start_ms + b.length_ms(),
            bucket,
            amount: 1,
            limit: self.config.cap(b).limit,
        })
    }

    /// The charges of a call with `input` estimated input tokens and `output` allowed output
    /// tokens, in the windows that hold `now`.
    fn plan(&self, conv: &Conversation, now: i64, price: &Price, input: u64, output: u64) -> Plan {
        let tokens = input + output;
        let usd = price.cost(&Usage {
            input_tokens: input,
            output_tokens: output,
            ..Usage::default()
        });
        let buckets: Vec<Bucket> = Bucket::SPEND
            .into_iter()
            .chain([Bucket::ConversationUsd30d])
            .collect();
        let charges = buckets
            .iter()
            .map(|&b| {
                let bucket = b.key(&conv.user_id, &conv.id, now);
                Charge {
                    expires_at_ms: bucket.start_ms + b.length_ms(),
                    bucket,
                    amount: match b.unit() {
                        Unit::Tokens => tokens,
                        _ => usd,
                    },
                    limit: self.config.cap(b).limit,
                }
            })
            .collect();
        Plan {
            buckets,
            charges,
            tokens,
            usd,
        }
    }

    /// The most output every capped bucket of `plan` has room for now (`None`: not even the
    /// input fits), and the bucket that leaves the least.
    async fn room(
        &self,
        plan: &Plan,
        price: &Price,
        input: u64,
    ) -> Result<(Option<u64>, Bucket), StoreError> {
        let capped = capped(plan);
        let keys: Vec<BucketKey> = capped.iter().map(|(_, c, _)| c.bucket.clone()).collect();
        let used = self.ledger.bucket_usage(&keys).await?;
        Ok(tightest(&capped, used, price, input))
    }

    /// The refusal for `bucket`, logged with what was asked.
    fn tripped(&self, bucket: Bucket, input: u64, room: Option<u64>, floor: u64) -> Denied {
        tracing::warn!(
            bucket = bucket.name(),
            input,
            output_room = room,
            min_output = floor,
            "budget bucket has no room for this call; no model call"
        );
        Denied {
            kind: engine::DeniedKind::Limit,
            reason: format!("budget:{}", bucket.name()),
            user_message: lines::tripped(bucket).to_owned(),
        }
    }
}

/// The buckets of `plan` that have a cap, each with its charge and the cap.
fn capped(plan: &Plan) -> Vec<(Bucket, &Charge, u64)> {
    plan.buckets
        .iter()
        .zip(&plan.charges)
        .filter_map(|(&b, c)| c.limit.map(|limit| (b, c, limit)))
        .collect()
}

/// The most output every bucket of `capped` has room for, each holding `used` (in order), with
/// `input` estimated input tokens (`None`: not even the input fits), and the bucket that
/// leaves the least.
fn tightest(
    capped: &[(Bucket, &Charge, u64)],
    used: Vec<u64>,
    price: &Price,
    input: u64,
) -> (Option<u64>, Bucket) {
    let mut tightest = (Some(u64::MAX), Bucket::GlobalUsd30d);
    for ((b, _, limit), used) in capped.iter().zip(used) {
        let room = output_room(b.unit(), limit.saturating_sub(used), input, price);
        if room < tightest.0 {
            tightest = (room, *b);
        }
    }
    tightest
}

/// The permit of a reserved `plan`: the reservation to settle, and the output allowance.
fn permit(request: &ChatRequest, input: u64, output: u64, plan: Plan) -> Permit {
    let reservation = Reservation {
        model: request.model.clone(),
        input,
        output,
        tokens: plan.tokens,
        usd: plan.usd,
        buckets: plan
            .buckets
            .into_iter()
            .zip(plan.charges)
            .map(|(b, c)| (b, c.bucket, c.expires_at_ms))
            .collect(),
    };
    // `output` ≤ the request's `max_tokens`, a u32.
    let allowed = u32::try_from(output).unwrap_or(u32::MAX);
    Permit::carrying(reservation).with_max_output_tokens(allowed)
}

/// The refusal of a message over its conversation's hourly rate.
fn busy(conversation: &transcript::ConversationId, used: u64, limit: u64) -> Denied {
    tracing::warn!(%conversation, used, limit, "conversation rate reached; no model call");
    Denied {
        kind: engine::DeniedKind::Limit,
        reason: format!("rate:{}", Bucket::ConversationMessagesHour.name()),
        user_message: lines::CONVERSATION_BUSY.to_owned(),
    }
}

fn unavailable(err: &StoreError) -> Denied {
    tracing::error!(error = %err, source = ?std::error::Error::source(err), "budget ledger unavailable; no model call");
    Denied {
        kind: engine::DeniedKind::Unchecked,
        reason: "budget:unavailable".into(),
        user_message: lines::CANNOT_CHECK.to_owned(),
    }
}

#[async_trait]
impl Guard for BudgetGuard {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        let request = call.request;
        // The same number as `estimate_input_tokens(request)`, measuring only new messages.
        let input = self.estimate.input_tokens(&call.conversation.id, request);
        let price = self.config.prices.lookup(&request.model).1.price;
        let wanted = u64::from(request.settings.max_tokens).min(self.config.output_allowance);
        let floor = self.config.min_output_tokens.min(wanted);
        // Every try charges the windows of one instant, so a retry cannot straddle two.
        let now = (self.clock)();
        let mut output = wanted;
        let mut last = Bucket::GlobalUsd30d;
        let rate = self.rate_charge(call, now);
        for _ in 0..ATTEMPTS {
            let plan = self.plan(call.conversation, now, &price, input, output);
            // The rate's charge first: over both, the rate is what the user is told.
            let charges: Vec<Charge> = rate.iter().chain(&plan.charges).cloned().collect();
            let bucket = match self.ledger.reserve(&charges).await {
                Ok(Reserve::Reserved) => {
                    if output < wanted {
                        tracing::info!(
                            wanted,
                            allowed = output,
                            input,
                            "budget lowered the call's output allowance to what is left"
                        );
                    }
                    return Ok(permit(request, input, output, plan));
                }
                Ok(Reserve::Tripped {
                    bucket,
                    used,
                    limit,
                }) if rate.as_ref().is_some_and(|r| r.bucket == bucket) => {
                    return Err(busy(&call.conversation.id, used, limit));
                }
                Ok(Reserve::Tripped { bucket, .. }) => bucket,
                Err(err) => return Err(unavailable(&err)),
            };
            last = plan
                .buckets
                .iter()
                .zip(&plan.charges)
                .find(|(_, c)| c.bucket == bucket)
                .map_or(Bucket::GlobalUsd30d, |(b, _)| *b);
            // Another call took the room, or this one never fitted: see what is left.
            let (room, tightest) = self
                .room(&plan, &price, input)
                .await
                .map_err(|e| unavailable(&e))?;
            match room {
                Some(room) if room >= floor => output = room.min(wanted),
                _ => return Err(self.tripped(tightest, input, room, floor)),
            }
        }
        tracing::warn!(
            attempts = ATTEMPTS,
            "budget reservations kept losing to concurrent calls"
        );
        Err(self.tripped(last, input, None, floor))
    }

    /// A window with no room for the turn's first call even before the conversation is in
    /// it (`call` carries no messages) refuses the turn: a capped spend bucket left below the
    /// call's least output, or (when the rate is counted here) the conversation's messages
    /// this hour at their cap, each with the sentence the call would get. One read of those
    /// buckets, nothing written: a message refused here is not counted, as one the
    /// reservation refuses is not. The conversation only adds input, so the call itself would
    /// be refused too. A ledger that cannot be read says nothing here: the call then fails
    /// closed.
    async fn refuses_outright(&self, call: &GuardCall<'_>) -> Option<Denied> {
        let request = call.request;
        let input = crate::estimate_input_tokens(request);
        let price = self.config.prices.lookup(&request.model).1.price;
        let wanted = u64::from(request.settings.max_tokens).min(self.config.output_allowance);
        let floor = self.config.min_output_tokens.min(wanted);
        let now = (self.clock)();
        let rate = self
            .rate_charge(call, now)
            .and_then(|c| Some((c.limit?, c.bucket)));
        let plan = self.plan(call.conversation, now, &price, input, wanted);
        let capped = capped(&plan);
        let keys: Vec<BucketKey> = rate
            .iter()
            .map(|(_, key)| key.clone())
            .chain(capped.iter().map(|(_, c, _)| c.bucket.clone()))
            .collect();
        if keys.is_empty() {
            return None;
        }
        let mut used = match self.ledger.bucket_usage(&keys).await {
            Ok(used) => used,
            Err(err) => {
                tracing::warn!(error = %err, "budget ledger unreadable before the turn; its calls will tell");
                return None;
            }
        };
        if let Some((limit, _)) = rate {
            let messages = used.remove(0);
            if messages >= limit {
                return Some(busy(&call.conversation.id, messages, limit));
            }
        }
        let (room, bucket) = tightest(&capped, used, &price, input);
        match room {
            Some(room) if room >= floor => None,
            _ => Some(self.tripped(bucket, input, room, floor)),
        }
    }

    /// The reservation `before_model_call` tries first (the whole allowance), for the engine
    /// to write with the message before the call. When a cap refuses it there, the engine
    /// calls `before_model_call`, which reads what is left and lowers the allowance or denies.
    async fn prepare(&self, call: &GuardCall<'_>) -> Option<Prepared> {
        let request = call.request;
        let input = self.estimate.input_tokens(&call.conversation.id, request);
        let price = self.config.prices.lookup(&request.model).1.price;
        let output = u64::from(request.settings.max_tokens).min(self.config.output_allowance);
        let now = (self.clock)();
        let rate = self.rate_charge(call, now);
        let plan = self.plan(call.conversation, now, &price, input, output);
        let charges = rate
            .into_iter()
            .chain(plan.charges.iter().cloned())
            .collect();
        Some(Prepared {
            ledger: self.ledger.clone(),
            charges,
            permit: permit(request, input, output, plan),
        })
    }

    /// A call's reported usage settles it. Without one (the provider said nothing, or the call
    /// failed), an estimate does, never zero for what was used: the request's estimated input
    /// once anything came back (the provider read it all), and as output the streamed bytes
    /// / 4, at most the call's output allowance, for a call that finished; the whole allowance
    /// for one that failed after it started, whatever it showed (its output may have been held
    /// back, as a tool call's input is until complete). A call that timed out before anything
    /// came back keeps its input (it was sent and not refused: the provider may have read it,
    /// slowly); one refused before anything came back is released.
    async fn settle(&self, _conversation: &Conversation, permit: Permit, report: &CallReport) {
        if let Some(settlement) = self.settlement(permit, report) {
            settlement.apply().await;
        }
    }

    /// As [`BudgetGuard::settle`], the adjustments left for the engine to write with the
    /// call's answer.
    async fn settle_with_answer(
        &self,
        _conversation: &Conversation,
        permit: Permit,
        report: &CallReport,
    ) -> Vec<Settlement> {
        self.settlement(permit, report).into_iter().collect()
    }

    /// Each segment at [`BudgetConfig::sms_segment_usd`], added to the user's (or, for a
    /// sender not linked yet, the strangers' [`Bucket::UnlinkedUsd30d`]), the conversation's
    /// and everyone's 30-day dollars. Unconditional, as a settle is: the reply has gone out; a
    /// full cap refuses the next model call.
    async fn charge_segments(
        &self,
        user: Option<&UserId>,
        conversation: &ConversationId,
        segments: u32,
    ) {
        let usd = u64::from(segments).saturating_mul(self.config.sms_segment_usd);
        if usd == 0 {
            return;
        }
        let now = (self.clock)();
        let nobody = UserId(String::new());
        let payer = fee_payer(user);
        let adjustments: Vec<Adjustment> =
            [payer, Bucket::ConversationUsd30d, Bucket::GlobalUsd30d]
                .into_iter()
                .map(|b| {
                    let bucket = b.key(user.unwrap_or(&nobody), conversation, now);
                    Adjustment {
                        expires_at_ms: bucket.start_ms + b.length_ms(),
                        bucket,
                        delta: i64::try_from(usd).unwrap_or(i64::MAX),
                    }
                })
                .collect();
        tracing::info!(
            segments,
            usd = usd as f64 / 1_000_000.0,
            "text-message segments charged"
        );
        if let Err(err) = self.ledger.adjust(&adjustments).await {
            tracing::error!(error = %err, segments, "charging a reply's text-message segments failed");
        }
    }

    /// The user's (for a sender not linked yet, the strangers') and everyone's 30-day dollars,
    /// read: full when either holds its cap or more. Only when segments cost anything.
    async fn fees_over_cap(&self, user: Option<&UserId>) -> Result<bool, StoreError> {
        if self.config.sms_segment_usd == 0 {
            return Ok(false);
        }
        let now = (self.clock)();
        let nobody = UserId(String::new());
        // Neither bucket is the conversation's: any conversation names them.
        let conversation = ConversationId(String::new());
        let payer = fee_payer(user);
        let capped: Vec<(BucketKey, u64)> = [payer, Bucket::GlobalUsd30d]
            .into_iter()
            .filter_map(|b| {
                let limit = self.config.cap(b).limit?;
                Some((b.key(user.unwrap_or(&nobody), &conversation, now), limit))
            })
            .collect();
        if capped.is_empty() {
            return Ok(false);
        }
        let keys: Vec<BucketKey> = capped.iter().map(|(k, _)| k.clone()).collect();
        let used = self.ledger.bucket_usage(&keys).await?;
        Ok(capped
            .iter()
            .zip(used)
            .any(|((_, limit), used)| used >= *limit))
    }

    async fn after_model_call(&self, _conversation: &Conversation, permit: Permit, usage: &Usage) {
        let Some(r) = permit.take::<Reservation>() else {
            return;
        };
        self.settling(r, usage).apply().await;
    }
}

impl BudgetGuard {
    /// What settles the reservation `permit` carries, from the call's report (see
    /// [`BudgetGuard::settle`]); `None` when it carries none.
    fn settlement(&self, permit: Permit, report: &CallReport) -> Option<Settlement> {
        let r = permit.take::<Reservation>()?;
        if report.usage_reported() {
            return Some(self.settling(r, &report.usage));
        }
        let estimated = Usage {
            input_tokens: if report.streamed || !report.failed || report.timed_out {
                r.input.max(report.usage.input_tokens)
            } else {
                report.usage.input_tokens
            },
            // Never past the allowance the call was sent with: that is all it could produce.
            // A call that failed after it started may have produced all of it, whatever it
            // showed: a tool call's input is held back until complete, so "OK" and then a
            // long tool input cut by the deadline shows two bytes (and a sender can ask for
            // exactly that, every message).
            output_tokens: report
                .usage
                .output_tokens
                .max(match report.failed && report.streamed {
                    true => r.output,
                    false => crate::estimate_output_tokens(report.streamed_bytes).min(r.output),
                }),
            ..report.usage
        };
        tracing::info!(
            failed = report.failed,
            input = estimated.input_tokens,
            output = estimated.output_tokens,
            "settling a model call the provider reported no usage for, from an estimate"
        );
        Some(self.settling(r, &estimated))
    }
}

impl BudgetGuard {
    /// The adjustments that move a reservation to the real (or estimated) usage, on every
    /// bucket it charged.
    fn settling(&self, r: Reservation, usage: &Usage) -> Settlement {
        let real_tokens = usage.total() as i64;
        let real_usd = self.config.prices.cost(&r.model, usage) as i64;
        // The engine settles inside the model call's span, which has a `cost_usd` field.
        tracing::Span::current().record("cost_usd", real_usd as f64 / 1_000_000.0);
        let adjustments: Vec<Adjustment> = r
            .buckets
            .into_iter()
            .map(|(b, bucket, expires_at_ms)| Adjustment {
                bucket,
                delta: match b.unit() {
                    Unit::Tokens => real_tokens - r.tokens as i64,
                    _ => real_usd - r.usd as i64,
                },
                expires_at_ms,
            })
            .filter(|a| a.delta != 0)
            .collect();
        Settlement {
            ledger: self.ledger.clone(),
            adjustments,
        }
    }
}

/// Whose dollars a reply's fees count in besides the conversation's and everyone's: the user's,
/// or for a sender not linked yet the strangers'.
fn fee_payer(user: Option<&UserId>) -> Bucket {
    match user {
        Some(_) => Bucket::UserUsd30d,
        None => Bucket::UnlinkedUsd30d,
    }
}
