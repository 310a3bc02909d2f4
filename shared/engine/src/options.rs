use backend::InferenceSettings;
use std::time::Duration;

/// The engine's knobs. Defaults follow DESIGN.md.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Model id or inference-profile ARN sent on every call.
    pub model_id: String,
    /// The frozen system prompt.
    pub system_prompt: String,
    /// Model↔tool round trips per user message.
    pub max_cycles: u32,
    /// Whole-call deadline (open + stream).
    pub call_timeout: Duration,
    /// Longest wait for the next stream event.
    pub idle_timeout: Duration,
    /// Longest wait before the single retry of a call that streamed nothing.
    pub max_retry_wait: Duration,
    pub settings: InferenceSettings,
    /// Record the reply in the visible transcript at the end of the turn. Set it off where the
    /// caller delivers the reply itself and records what actually went out (the channel worker).
    pub record_reply: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            model_id: String::new(),
            system_prompt: String::new(),
            max_cycles: 12,
            call_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(20),
            max_retry_wait: Duration::from_secs(2),
            settings: InferenceSettings::default(),
            record_reply: true,
        }
    }
}
