//! The confirmation gate: a risky tool call runs only after the user said yes on a later turn.
//!
//! In front of the tool handler, a [`RiskPolicy`] (the domain's) decides whether a call is risky
//! and describes it from the database ("Withdraw Dana Lee from Spring Open"), never from the
//! model's arguments. A risky call is refused with a readable `NOT EXECUTED` result and a
//! pending record keyed by [`call_hash`] (tool + canonical arguments), stamped with the current
//! action (user turn) and a TTL. The same call with identical arguments on a later action
//! consumes the record once and runs, provided the description the user saw still holds. A
//! repeat within the same turn, different arguments, an expired or consumed record: refused.

use crate::Engine;
use async_trait::async_trait;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use store::{Confirmations, Pending, canonical_json};
use tools::{Ctx, ToolCall, ToolOutcome};
use transcript::Part;

/// Decides which calls need the user's yes.
#[async_trait]
pub trait RiskPolicy: Send + Sync {
    /// `Some(description)` when the call is risky: a plain-language sentence built from stored
    /// state, naming what will happen. `None` lets the call through.
    async fn assess(&self, ctx: &Ctx, tool: &str, args: &Value) -> Option<String>;
}

/// The gate's knobs.
#[derive(Debug, Clone)]
pub struct ConfirmationOptions {
    /// How long a refused call may be confirmed.
    pub ttl: Duration,
}

impl Default for ConfirmationOptions {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(3600),
        }
    }
}

/// Unix milliseconds now; injectable for tests.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The gate: a policy, the pending records, a clock.
pub struct ConfirmationGate {
    policy: Arc<dyn RiskPolicy>,
    pending: Arc<dyn Confirmations>,
    options: ConfirmationOptions,
    clock: Clock,
}

impl std::fmt::Debug for ConfirmationGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfirmationGate")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ConfirmationGate {
    pub fn new(policy: Arc<dyn RiskPolicy>, pending: Arc<dyn Confirmations>) -> Self {
        Self {
            policy,
            pending,
            options: ConfirmationOptions::default(),
            clock: Arc::new(system_now_ms),
        }
    }

    pub fn with_options(mut self, options: ConfirmationOptions) -> Self {
        self.options = options;
        self
    }

    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// `None`: run the call. `Some(outcome)`: the call must not run; answer with `outcome`.
    pub async fn check(&self, ctx: &Ctx, call: &ToolCall, turn: &Answer) -> Option<ToolOutcome> {
        let description = self.policy.assess(ctx, &call.name, &call.input).await?;
        let hash = call_hash(&call.name, &call.input);
        let now = (self.clock)();
        let conversation = &ctx.conversation_id;
        let taken = if turn.declined {
            // "No": whatever was pending is not confirmed by this message.
            tracing::info!(tool = %call.name, action_id = %ctx.action_id, "the user declined; a pending confirmation is not used");
            Ok(None)
        } else {
            self.pending
                .take_pending(conversation, &hash, &ctx.action_id.0, now)
                .await
        };
        match taken {
            // Confirmed on the user's next message (not a later one), and what the user was asked
            // still describes the call.
            Ok(Some(taken))
                if taken.description == description
                    && turn.previous_action.as_deref()
                        == Some(taken.created_on_action.as_str()) =>
            {
                return None;
            }
            Ok(_) => {}
            Err(err) => {
                tracing::error!(tool = %call.name, action_id = %ctx.action_id, error = %err, "confirmation check failed");
                return Some(refused(call, CHECK_FAILED.to_owned()));
            }
        }
        let ttl_ms = i64::try_from(self.options.ttl.as_millis()).unwrap_or(i64::MAX);
        let pending = Pending {
            conversation: conversation.clone(),
            hash,
            created_on_action: ctx.action_id.0.clone(),
            description: description.clone(),
            expires_at_ms: now.saturating_add(ttl_ms),
        };
        if let Err(err) = self.pending.put_pending(&pending).await {
            tracing::error!(tool = %call.name, action_id = %ctx.action_id, error = %err, "storing a pending confirmation failed");
            return Some(refused(call, CHECK_FAILED.to_owned()));
        }
        tracing::info!(tool = %call.name, action_id = %ctx.action_id, "risky call held for confirmation");
        Some(refused(call, needs_confirmation(&description)))
    }
}

/// What the user's message of this turn says about a pending confirmation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// The action (turn) of the user's previous message: only a call held there can be
    /// confirmed now.
    pub previous_action: Option<String>,
    /// The message says no ("No!", "don't", "cancel"…): nothing pending is confirmed by it.
    pub declined: bool,
}

impl Answer {
    /// Read the user's words. Errs towards "declined": a wrong "no" only asks again.
    pub fn from_text(text: &str, previous_action: Option<String>) -> Self {
        let lower = text.to_lowercase();
        let first = lower
            .split(|c: char| !c.is_alphanumeric() && c != '\'')
            .find(|w| !w.is_empty())
            .unwrap_or("");
        let declined = matches!(
            first,
            "no" | "nope" | "nah" | "nein" | "non" | "cancel" | "stop" | "don't" | "dont" | "never"
        ) || lower.contains("do not")
            || lower.contains("don't")
            || lower.contains("dont ");
        Self {
            previous_action,
            declined,
        }
    }
}

const CHECK_FAILED: &str = "NOT EXECUTED: the confirmation check is unavailable right now. \
Tell the user it could not be done at the moment.";

/// The tool result of a held call.
pub fn needs_confirmation(description: &str) -> String {
    format!(
        "NOT EXECUTED: needs confirmation: {description}. Ask the user once, in one line, and call \
         again with identical arguments if they say yes."
    )
}

/// Hex SHA-256 of the tool name and its arguments as canonical JSON (keys sorted).
pub fn call_hash(tool: &str, args: &Value) -> String {
    let mut hasher = Sha256::new();
    hasher.update(tool.as_bytes());
    hasher.update([0]);
    hasher.update(canonical_json(args).as_bytes());
    hex::encode(hasher.finalize())
}

fn refused(call: &ToolCall, message: String) -> ToolOutcome {
    ToolOutcome {
        part: Part::ToolResult {
            tool_use_id: call.id.clone(),
            content: json!({ "error": message }),
            is_error: true,
        },
        is_error: true,
        effects: None,
    }
}

fn system_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl Engine {
    /// Put the confirmation gate in front of every tool call.
    pub fn with_confirmation(mut self, gate: Arc<ConfirmationGate>) -> Self {
        self.confirmation = Some(gate);
        self
    }

    /// The gate's verdict on one call (`None`: run it).
    pub(crate) async fn hold_for_confirmation(
        &self,
        ctx: &Ctx,
        call: &ToolCall,
        answer: &Answer,
    ) -> Option<ToolOutcome> {
        self.confirmation.as_ref()?.check(ctx, call, answer).await
    }
}

/// A [`RiskPolicy`] from an async closure over owned arguments, so a domain crate that must not
/// depend on the engine can still be plugged in: `risk_policy(move |ctx, tool, args| …)`.
pub fn risk_policy<F, Fut>(f: F) -> impl RiskPolicy
where
    F: Fn(Ctx, String, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Option<String>> + Send + 'static,
{
    PolicyFn(f)
}

struct PolicyFn<F>(F);

#[async_trait]
impl<F, Fut> RiskPolicy for PolicyFn<F>
where
    F: Fn(Ctx, String, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Option<String>> + Send + 'static,
{
    async fn assess(&self, ctx: &Ctx, tool: &str, args: &Value) -> Option<String> {
        (self.0)(ctx.clone(), tool.to_owned(), args.clone()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_and_tells_arguments_apart() {
        let a = call_hash("cancel_event", &json!({"event_id": "e1", "notify": true}));
        let b = call_hash(
            "cancel_event",
            &serde_json::from_str(r#"{"notify": true, "event_id": "e1"}"#).unwrap(),
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 64);
        assert_ne!(
            a,
            call_hash("cancel_event", &json!({"event_id": "e2", "notify": true}))
        );
        assert_ne!(
            a,
            call_hash("publish_event", &json!({"event_id": "e1", "notify": true}))
        );
    }

    #[test]
    fn a_no_in_any_usual_form_declines_and_a_yes_does_not() {
        for no in [
            "No! Do NOT cancel it.",
            "no",
            "Nope.",
            "don't",
            "Please don't do that",
            "cancel",
            "stop!",
        ] {
            assert!(Answer::from_text(no, None).declined, "{no}");
        }
        for yes in [
            "yes",
            "Yes please",
            "ok, go ahead",
            "sure",
            "[pressed button yes]",
        ] {
            assert!(!Answer::from_text(yes, None).declined, "{yes}");
        }
    }
}
