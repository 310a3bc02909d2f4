//! The budget guard: reserve before each model call, settle after it.

use crate::{Bucket, BudgetConfig, Clock, Unit, estimate_input_tokens, lines};
use async_trait::async_trait;
use engine::{CallReport, Denied, Guard, GuardCall, Permit};
use std::sync::Arc;
use store::{Adjustment, BucketKey, BudgetLedger, Charge, Reserve};
use transcript::{Conversation, Usage};

/// Reserves each call's expected use on every spend bucket (user tokens per minute and per
/// hour, user dollars and global dollars per 30 days, and the conversation's dollars for
/// reports) in one all-or-nothing ledger write, and settles it with the real usage after the
/// call.
///
/// Reservation = estimated input tokens ([`estimate_input_tokens`]) + the configured output
/// allowance, in tokens; in dollars, the estimated input at the model's input price plus the
/// allowance at its output price. Parallel calls of one user therefore never take a bucket past
/// its cap when reserving; only settling a call that used more than it reserved can, by at most
/// that call's excess. A call that fails keeps its reservation (the provider may have charged).
///
/// A ledger that cannot be reached denies the call (fails closed): invariant 9 says no call
/// starts unless the budget is known to allow it.
pub struct BudgetGuard {
    ledger: Arc<dyn BudgetLedger>,
    config: Arc<BudgetConfig>,
    clock: Clock,
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
    tokens: u64,
    usd: u64,
    buckets: Vec<(Bucket, BucketKey, i64)>,
}

impl BudgetGuard {
    pub fn new(ledger: Arc<dyn BudgetLedger>, config: Arc<BudgetConfig>, clock: Clock) -> Self {
        Self {
            ledger,
            config,
            clock,
        }
    }

    fn charges(&self, conv: &Conversation, tokens: u64, usd: u64) -> (Vec<Charge>, Vec<Bucket>) {
        let now = (self.clock)();
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
        (charges, buckets)
    }
}

#[async_trait]
impl Guard for BudgetGuard {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        let input = estimate_input_tokens(call.request);
        let allowance = self.config.output_allowance;
        let tokens = input + allowance;
        let usd = self.config.prices.cost(
            &call.request.model,
            &Usage {
                input_tokens: input,
                output_tokens: allowance,
                ..Usage::default()
            },
        );
        let (charges, buckets) = self.charges(call.conversation, tokens, usd);
        match self.ledger.reserve(&charges).await {
            Ok(Reserve::Reserved) => Ok(Permit::carrying(Reservation {
                model: call.request.model.clone(),
                input,
                tokens,
                usd,
                buckets: buckets
                    .into_iter()
                    .zip(charges)
                    .map(|(b, c)| (b, c.bucket, c.expires_at_ms))
                    .collect(),
            })),
            Ok(Reserve::Tripped {
                bucket,
                used,
                limit,
            }) => {
                let which = buckets
                    .iter()
                    .zip(&charges)
                    .find(|(_, c)| c.bucket == bucket)
                    .map(|(b, _)| *b)
                    .unwrap_or(Bucket::GlobalUsd30d);
                tracing::warn!(
                    bucket = which.name(),
                    used,
                    limit,
                    asked = tokens,
                    asked_usd_micros = usd,
                    "budget bucket tripped; no model call"
                );
                Err(Denied {
                    reason: format!("budget:{}", which.name()),
                    user_message: lines::tripped(which).to_owned(),
                })
            }
            Err(err) => {
                tracing::error!(error = %err, source = ?std::error::Error::source(&err), "budget ledger unavailable; no model call");
                Err(Denied {
                    reason: "budget:unavailable".into(),
                    user_message: lines::CANNOT_CHECK.to_owned(),
                })
            }
        }
    }

    /// A call's reported usage settles it. Without one (the provider said nothing, or the call
    /// failed), an estimate does, never zero for what was used: the request's estimated input
    /// once anything streamed back (the provider read it all), and the streamed characters / 4
    /// as output. A call that failed before anything came back is released.
    async fn settle(&self, conversation: &Conversation, permit: Permit, report: &CallReport) {
        if report.usage_reported() {
            return self
                .after_model_call(conversation, permit, &report.usage)
                .await;
        }
        let Some(r) = permit.take::<Reservation>() else {
            return;
        };
        let estimated = Usage {
            input_tokens: if report.streamed || !report.failed {
                r.input.max(report.usage.input_tokens)
            } else {
                report.usage.input_tokens
            },
            output_tokens: report
                .usage
                .output_tokens
                .max((report.streamed_chars as u64).div_ceil(4)),
            ..report.usage
        };
        tracing::info!(
            failed = report.failed,
            input = estimated.input_tokens,
            output = estimated.output_tokens,
            "settling a model call the provider reported no usage for, from an estimate"
        );
        self.settle_reservation(r, &estimated).await;
    }

    async fn after_model_call(&self, _conversation: &Conversation, permit: Permit, usage: &Usage) {
        let Some(r) = permit.take::<Reservation>() else {
            return;
        };
        self.settle_reservation(r, usage).await;
    }
}

impl BudgetGuard {
    /// Move a reservation to the real (or estimated) usage, on every bucket it charged.
    async fn settle_reservation(&self, r: Reservation, usage: &Usage) {
        let real_tokens = usage.total() as i64;
        let real_usd = self.config.prices.cost(&r.model, usage) as i64;
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
        if let Err(err) = self.ledger.adjust(&adjustments).await {
            // The reservation stays: the ledger over-counts, which errs on the safe side.
            tracing::error!(error = %err, "settling a budget reservation failed");
        }
    }
}
