//! Several guards in a row.

use async_trait::async_trait;
use engine::{CallReport, Denied, Guard, GuardCall, Permit, Prepared, Settlement};
use std::sync::Arc;
use transcript::{Conversation, ConversationId, Usage, UserId};

/// Runs guards in order; the first denial wins. Put the cheap ones first (no model, paused
/// account, conversation rate) and the budget last, so a denied call reserves nothing. When a
/// later guard denies, the earlier ones are told the call used nothing (their reservations are
/// given back). The chain's permit carries the lowest output limit any guard set.
#[derive(Clone, Default)]
pub struct Guards(pub Vec<Arc<dyn Guard>>);

impl std::fmt::Debug for Guards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Guards({})", self.0.len())
    }
}

#[async_trait]
impl Guard for Guards {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        let mut permits = Vec::with_capacity(self.0.len());
        for guard in &self.0 {
            match guard.before_model_call(call).await {
                Ok(permit) => permits.push(permit),
                Err(denied) => {
                    for (guard, permit) in self.0.iter().zip(permits) {
                        guard
                            .after_model_call(call.conversation, permit, &Usage::default())
                            .await;
                    }
                    return Err(denied);
                }
            }
        }
        let limit = permits.iter().filter_map(Permit::max_output_tokens).min();
        let permit = Permit::carrying(permits);
        Ok(match limit {
            Some(tokens) => permit.with_max_output_tokens(tokens),
            None => permit,
        })
    }

    async fn after_model_call(&self, conversation: &Conversation, permit: Permit, usage: &Usage) {
        let permits = permit.take::<Vec<Permit>>().unwrap_or_default();
        for (guard, permit) in self.0.iter().zip(permits) {
            guard.after_model_call(conversation, permit, usage).await;
        }
    }

    async fn settle(&self, conversation: &Conversation, permit: Permit, report: &CallReport) {
        let permits = permit.take::<Vec<Permit>>().unwrap_or_default();
        for (guard, permit) in self.0.iter().zip(permits) {
            guard.settle(conversation, permit, report).await;
        }
    }

    async fn settle_with_answer(
        &self,
        conversation: &Conversation,
        permit: Permit,
        report: &CallReport,
    ) -> Vec<Settlement> {
        let permits = permit.take::<Vec<Permit>>().unwrap_or_default();
        let mut left = Vec::new();
        for (guard, permit) in self.0.iter().zip(permits) {
            left.extend(guard.settle_with_answer(conversation, permit, report).await);
        }
        left
    }

    async fn charge_segments(
        &self,
        user: Option<&UserId>,
        conversation: &ConversationId,
        segments: u32,
    ) {
        for guard in &self.0 {
            guard.charge_segments(user, conversation, segments).await;
        }
    }

    /// Full when any guard says so.
    async fn fees_over_cap(&self, user: Option<&UserId>) -> Result<bool, store::StoreError> {
        for guard in &self.0 {
            if guard.fees_over_cap(user).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The first guard's outright refusal, asking them in order.
    async fn refuses_outright(&self, call: &GuardCall<'_>) -> Option<Denied> {
        for guard in &self.0 {
            if let Some(denied) = guard.refuses_outright(call).await {
                return Some(denied);
            }
        }
        None
    }

    /// The last guard's prepared reservation, behind the others' permits: only when every
    /// earlier guard lets the call through with a permit that carries nothing (so one left
    /// unused costs nothing). Otherwise `None`, and the engine asks
    /// [`Guard::before_model_call`], which denies or reserves as usual.
    async fn prepare(&self, call: &GuardCall<'_>) -> Option<Prepared> {
        let (last, earlier) = self.0.split_last()?;
        let mut permits = Vec::with_capacity(self.0.len());
        for guard in earlier {
            match guard.before_model_call(call).await {
                Ok(permit) if permit.carries_nothing() => permits.push(permit),
                Ok(permit) => {
                    guard
                        .after_model_call(call.conversation, permit, &Usage::default())
                        .await;
                    return None;
                }
                Err(_) => return None,
            }
        }
        let prepared = last.prepare(call).await?;
        permits.push(prepared.permit);
        let limit = permits.iter().filter_map(Permit::max_output_tokens).min();
        let permit = Permit::carrying(permits);
        Some(Prepared {
            permit: match limit {
                Some(tokens) => permit.with_max_output_tokens(tokens),
                None => permit,
            },
            ..prepared
        })
    }
}

/// What [`Guards::standard`] needs.
pub struct StandardGuards {
    pub ledger: Arc<dyn store::BudgetLedger>,
    pub config: Arc<crate::BudgetConfig>,
    pub accounts: Arc<dyn crate::AccountStatus>,
    pub clock: crate::Clock,
    /// `Some(line)` when no model is configured: every call is answered with `line`.
    pub no_model: Option<String>,
}

impl std::fmt::Debug for StandardGuards {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandardGuards")
            .field("no_model", &self.no_model.is_some())
            .finish_non_exhaustive()
    }
}

impl Guards {
    /// The chain every deployment runs, cheapest first: no model configured → paused account →
    /// messages per conversation per hour → budget.
    pub fn standard(s: StandardGuards) -> Self {
        let mut guards: Vec<Arc<dyn Guard>> = Vec::new();
        if let Some(line) = s.no_model {
            guards.push(Arc::new(crate::NoModel(line)));
        }
        guards.push(Arc::new(crate::PausedAccounts::new(s.accounts)));
        // The conversation's rate rides in the budget's first reservation (one write).
        guards.push(Arc::new(
            crate::BudgetGuard::new(s.ledger, s.config, s.clock).with_conversation_rate(),
        ));
        Self(guards)
    }
}
