use async_trait::async_trait;
use backend::{ChatRequest, InferenceSettings};
use std::any::Any;
use transcript::{Conversation, ConversationId, Usage, UserId};

/// The call about to be made, as a guard sees it.
#[derive(Debug)]
pub struct GuardCall<'a> {
    pub conversation: &'a Conversation,
    /// 1-based model call number within this turn (retries count).
    pub call_number: u32,
    pub request: &'a ChatRequest,
    /// The conversation's account as the turn read it at its start; `None` when it was not
    /// read or there is none (a guard that needs it reads it).
    pub account: Option<&'a store::Account>,
}

/// A refusal to make a model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// What kind of refusal, for a caller that acts on it.
    pub kind: DeniedKind,
    /// Why, for the log and metrics (e.g. `budget:user_hour_tokens`).
    pub reason: String,
    /// The friendly sentence the user gets instead of an answer.
    pub user_message: String,
}

/// What kind of refusal a [`Denied`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeniedKind {
    /// A usage limit (a budget cap, a conversation's rate) has no room now; its window frees
    /// it.
    Limit,
    /// The account is paused or closed.
    Account,
    /// No model is configured: the assistant does not answer.
    NoModel,
    /// What the guard checks could not be read, so it refused (it fails closed).
    Unchecked,
}

/// What a guard hands from [`Guard::before_model_call`] to [`Guard::after_model_call`] of the
/// same call (a budget reservation, say), and the most output the call may be given. The
/// carried value is opaque to the engine; empty for most guards.
#[derive(Debug, Default)]
pub struct Permit {
    value: Option<Box<dyn Any + Send + Sync>>,
    max_output_tokens: Option<u32>,
}

impl Permit {
    /// A permit that carries `value` to `after_model_call`.
    pub fn carrying<T: Any + Send + Sync>(value: T) -> Self {
        Self {
            value: Some(Box::new(value)),
            max_output_tokens: None,
        }
    }

    /// The call may produce at most `tokens` output tokens (a budget reserved for no more).
    /// Several limits keep the lowest.
    pub fn with_max_output_tokens(mut self, tokens: u32) -> Self {
        self.max_output_tokens = Some(self.max_output_tokens.map_or(tokens, |t| t.min(tokens)));
        self
    }

    /// The output limit this permit sets, if any.
    pub fn max_output_tokens(&self) -> Option<u32> {
        self.max_output_tokens
    }

    /// Lower the request's `max_tokens` to this permit's limit (never raise it). Output
    /// includes reasoning, so a reasoning budget that no longer fits below the lowered limit is
    /// dropped (providers refuse a reasoning budget at or above `max_tokens`).
    pub fn limit(&self, settings: &mut InferenceSettings) {
        let Some(cap) = self.max_output_tokens else {
            return;
        };
        settings.max_tokens = settings.max_tokens.min(cap);
        if settings
            .reasoning_budget
            .is_some_and(|b| b >= settings.max_tokens)
        {
            settings.reasoning_budget = None;
        }
    }

    /// Whether the permit carries nothing for `after_model_call` (dropping it unused loses
    /// nothing).
    pub fn carries_nothing(&self) -> bool {
        self.value.is_none()
    }

    /// The carried value, if it is a `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        self.value?.downcast::<T>().ok().map(|b| *b)
    }
}

/// Runs before **every** model call; budgets and rate limits plug in here.
#[async_trait]
pub trait Guard: Send + Sync {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied>;

    /// Settle a reservation with the usage a call really had.
    async fn after_model_call(
        &self,
        _conversation: &Conversation,
        _permit: Permit,
        _usage: &Usage,
    ) {
    }

    /// Called after **every** model call, completed or failed, with the permit its
    /// `before_model_call` gave. The default settles with the reported usage; a guard that can
    /// estimate what an unreported or failed call cost (the budget) overrides it, so a call is
    /// never free because its provider said nothing or it broke half-way.
    async fn settle(&self, conversation: &Conversation, permit: Permit, report: &CallReport) {
        self.after_model_call(conversation, permit, &report.usage)
            .await;
    }

    /// [`Guard::settle`] of a call whose answer the engine stores next: a guard whose settling
    /// is budget adjustments may return them instead of writing them, and the engine writes
    /// them with the answer (one write, where its store is the guard's ledger) or on their own
    /// right after it. The default settles now and leaves nothing.
    async fn settle_with_answer(
        &self,
        conversation: &Conversation,
        permit: Permit,
        report: &CallReport,
    ) -> Vec<Settlement> {
        self.settle(conversation, permit, report).await;
        Vec::new()
    }

    /// The reservation [`Guard::before_model_call`] would make for `call`, left for the engine
    /// to write with the message stored just before the call (one write where its store is
    /// the ledger). The engine uses the permit only when the charges were written, all of them,
    /// under their caps; otherwise it drops it and calls `before_model_call` as usual — so a
    /// prepared reservation never lets a call past a cap. `None` (the default): nothing to
    /// prepare.
    async fn prepare(&self, call: &GuardCall<'_>) -> Option<Prepared> {
        let _ = call;
        None
    }

    /// Whether the first model call of a turn would be refused now even with nothing of the
    /// conversation in it: `call` is that call with no messages and no tools (no model
    /// configured, a budget window with no room left). Asked before a turn's
    /// costly preparation (fetching its attachments), so a turn that cannot run costs no
    /// download. A read only: nothing is reserved or counted, and the turn's own calls are
    /// guarded as ever. `None` (the default) when the call may be allowed, or the guard cannot
    /// tell.
    async fn refuses_outright(&self, call: &GuardCall<'_>) -> Option<Denied> {
        let _ = call;
        None
    }

    /// Count what a platform bills for a reply that went out in `conversation` — `segments`
    /// text-message segments (SMS) — where the caps count money: the user's (`None`: a sender
    /// not linked to one yet, counted with the other strangers'), the conversation's and
    /// everyone's. After the fact, as a call's
    /// settle is: the next model call is refused once a cap is full. The default counts
    /// nothing.
    async fn charge_segments(
        &self,
        user: Option<&UserId>,
        conversation: &ConversationId,
        segments: u32,
    ) {
        let _ = (user, conversation, segments);
    }

    /// Whether a dollar cap that [`Guard::charge_segments`] counts in is full already: the
    /// user's (`None`: a sender not linked yet, the strangers') or everyone's. Asked before a reply that costs and that no model call guards (the
    /// onboarding reply to an unknown SMS sender), so a crowd of senders cannot spend past
    /// the caps on replies alone. The default: never full.
    async fn fees_over_cap(&self, user: Option<&UserId>) -> Result<bool, store::StoreError> {
        let _ = user;
        Ok(false)
    }
}

/// A reservation a guard leaves for the engine to write ([`Guard::prepare`]): charges on
/// `ledger`'s buckets, and the permit they buy once written.
pub struct Prepared {
    pub ledger: std::sync::Arc<dyn store::BudgetLedger>,
    pub charges: Vec<store::Charge>,
    /// Valid only once `charges` are written. Unwritten, it is dropped: nothing was reserved,
    /// so nothing is settled.
    pub permit: Permit,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("charges", &self.charges)
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}

/// A call's settlement a guard left for the engine to write with the call's answer
/// ([`Guard::settle_with_answer`]): adjustments of `ledger`'s buckets.
#[derive(Clone)]
pub struct Settlement {
    pub ledger: std::sync::Arc<dyn store::BudgetLedger>,
    pub adjustments: Vec<store::Adjustment>,
}

impl std::fmt::Debug for Settlement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settlement")
            .field("adjustments", &self.adjustments)
            .finish_non_exhaustive()
    }
}

impl Settlement {
    /// Write it on its own. A failure leaves the reservation in place: the ledger keeps what
    /// was reserved, over-counting what the call did not use (the usual case) and missing
    /// what it used past the reservation (an input under-estimate; the error log says so).
    pub async fn apply(&self) {
        if let Err(err) = self.ledger.adjust(&self.adjustments).await {
            tracing::error!(error = %err, "settling a budget reservation failed");
        }
    }
}

/// What the engine knows of a finished model call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallReport {
    /// The usage the provider reported (zeros when it reported none, or the call failed).
    pub usage: Usage,
    /// The call failed: an error, a stall, a deadline.
    pub failed: bool,
    /// Something came back — an event shown, or one held back (a tool call's input being
    /// written, the message's start) — so the provider read the whole request and may have
    /// been producing output.
    pub streamed: bool,
    /// UTF-8 bytes of output that streamed (text, reasoning, tool input).
    pub streamed_bytes: usize,
    /// The call ran out of time (its deadline, or the wait for its next event): it was sent
    /// and not refused, so the provider may have read the whole request even when nothing
    /// came back (a slow first token under load, a long input).
    pub timed_out: bool,
}

impl CallReport {
    /// Whether [`CallReport::usage`] is the provider's own account of the call.
    pub fn usage_reported(&self) -> bool {
        !self.failed && self.usage.total() > 0
    }
}

/// Lets every call through.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAll;

#[async_trait]
impl Guard for AllowAll {
    async fn before_model_call(&self, _: &GuardCall<'_>) -> Result<Permit, Denied> {
        Ok(Permit::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permit_only_ever_lowers_max_tokens_and_drops_a_reasoning_budget_that_no_longer_fits() {
        let mut settings = InferenceSettings {
            max_tokens: 16_000,
            reasoning_budget: Some(4_000),
            ..InferenceSettings::default()
        };
        Permit::default().limit(&mut settings);
        assert_eq!(settings.max_tokens, 16_000, "no limit, no change");
        Permit::default()
            .with_max_output_tokens(20_000)
            .limit(&mut settings);
        assert_eq!(settings.max_tokens, 16_000, "never raised");
        let permit = Permit::carrying(7u8)
            .with_max_output_tokens(9_000)
            .with_max_output_tokens(12_000);
        assert_eq!(
            permit.max_output_tokens(),
            Some(9_000),
            "the lowest limit wins"
        );
        permit.limit(&mut settings);
        assert_eq!(settings.max_tokens, 9_000);
        assert_eq!(settings.reasoning_budget, Some(4_000));
        Permit::default()
            .with_max_output_tokens(3_000)
            .limit(&mut settings);
        assert_eq!(settings.max_tokens, 3_000);
        assert_eq!(settings.reasoning_budget, None);
    }
}
