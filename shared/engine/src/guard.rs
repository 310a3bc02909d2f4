use async_trait::async_trait;
use backend::ChatRequest;
use std::any::Any;
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

/// What a guard hands from [`Guard::before_model_call`] to [`Guard::after_model_call`] of the
/// same call (a budget reservation, say). Opaque to the engine; empty for most guards.
#[derive(Debug, Default)]
pub struct Permit(Option<Box<dyn Any + Send + Sync>>);

impl Permit {
    /// A permit that carries `value` to `after_model_call`.
    pub fn carrying<T: Any + Send + Sync>(value: T) -> Self {
        Self(Some(Box::new(value)))
    }

    /// The carried value, if it is a `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        self.0?.downcast::<T>().ok().map(|b| *b)
    }
}

/// Runs before **every** model call; budgets and rate limits plug in here.
#[async_trait]
pub trait Guard: Send + Sync {
    async fn before_model_call(&self, call: &GuardCall<'_>) -> Result<Permit, Denied>;

    /// Called after each model call that completed, with the permit its `before_model_call`
    /// gave and the real usage (settle a reservation). A call that failed is not reported: its
    /// reservation stays as it was.
    async fn after_model_call(
        &self,
        _conversation: &Conversation,
        _permit: Permit,
        _usage: &Usage,
    ) {
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
