//! No model configured: the plain "not plugged in" line, with no model call and no budget
//! spent.

use async_trait::async_trait;
use engine::{Denied, Guard, GuardCall, Permit};

/// Denies every call with `line` (the server's explanation of how to connect a model).
#[derive(Debug, Clone)]
pub struct NoModel(pub String);

#[async_trait]
impl Guard for NoModel {
    async fn before_model_call(&self, _: &GuardCall<'_>) -> Result<Permit, Denied> {
        Err(self.denied())
    }

    async fn refuses_outright(&self, _: &GuardCall<'_>) -> Option<Denied> {
        Some(self.denied())
    }
}

impl NoModel {
    fn denied(&self) -> Denied {
        Denied {
            kind: engine::DeniedKind::NoModel,
            reason: "no_model".into(),
            user_message: self.0.clone(),
        }
    }
}
