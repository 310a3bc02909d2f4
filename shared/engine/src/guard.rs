use async_trait::async_trait;
use backend::ChatRequest;
use transcript::{Conversation, Usage};

/// The call about to be made, as a guard sees it.
#[derive(Debug)]
pub struct GuardCall<'a> {
    pub conversation: &'a Conversation,
    /// 1-based model call number within this turn (retries count).
    pub call_number: u32,
    pub request: &'a ChatRequest,
}

/// A refusal to make a model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// Why, for the log and metrics (e.g. `budget:user_hour_tokens`).
    pub reason: String,
    /// The friendly sentence the user gets instead of an answer.
    pub user_message: String,
}

/// Runs before **every** model call; budgets and rate limits plug in here.
#[async_trait]
pub trait Guard: Send + Sync {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<(), Denied>;

    /// Called after each model call that completed, with its real usage (settle a reservation).
    async fn after_model_call(&self, _conversation: &Conversation, _usage: &Usage) {}
}

/// Lets every call through.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAll;

#[async_trait]
impl Guard for AllowAll {
    async fn before_model_call(&self, _: &GuardCall<'_>) -> Result<(), Denied> {
        Ok(())
    }
}
