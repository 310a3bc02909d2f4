//! Messages per conversation per hour.

use crate::{Bucket, BudgetConfig, Clock, lines};
use async_trait::async_trait;
use engine::{Denied, Guard, GuardCall, Permit};
use std::sync::Arc;
use store::{BudgetLedger, Charge, Reserve};

/// Counts one user message per turn (at the turn's first model call) in the conversation's
/// hour bucket and turns the message away with a busy note once the cap
/// (`BRIDLE_CAP_CONVERSATION_MESSAGES_PER_HOUR`, default 60) is reached. Later calls of the
/// same turn (tool round trips) are not counted again. A message turned away is not counted.
pub struct ConversationRate {
    ledger: Arc<dyn BudgetLedger>,
    config: Arc<BudgetConfig>,
    clock: Clock,
}

impl std::fmt::Debug for ConversationRate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConversationRate").finish_non_exhaustive()
    }
}

impl ConversationRate {
    pub fn new(ledger: Arc<dyn BudgetLedger>, config: Arc<BudgetConfig>, clock: Clock) -> Self {
        Self {
            ledger,
            config,
            clock,
        }
    }
}

#[async_trait]
impl Guard for ConversationRate {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied> {
        if call.call_number != 1 {
            return Ok(Permit::default());
        }
        let b = Bucket::ConversationMessagesHour;
        let conv = call.conversation;
        let bucket = b.key(&conv.user_id, &conv.id, (self.clock)());
        let charge = Charge {
            expires_at_ms: bucket.start_ms + b.length_ms(),
            bucket,
            amount: 1,
            limit: self.config.cap(b).limit,
        };
        match self.ledger.reserve(&[charge]).await {
            Ok(Reserve::Reserved) => Ok(Permit::default()),
            Ok(Reserve::Tripped { used, limit, .. }) => {
                tracing::warn!(conversation = %conv.id, used, limit, "conversation rate reached; no model call");
                Err(Denied {
                    kind: engine::DeniedKind::Limit,
                    reason: format!("rate:{}", b.name()),
                    user_message: lines::CONVERSATION_BUSY.to_owned(),
                })
            }
            Err(err) => {
                tracing::error!(error = %err, "budget ledger unavailable; no model call");
                Err(Denied {
                    kind: engine::DeniedKind::Unchecked,
                    reason: "rate:unavailable".into(),
                    user_message: lines::CANNOT_CHECK.to_owned(),
                })
            }
        }
    }
}
