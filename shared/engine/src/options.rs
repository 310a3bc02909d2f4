use backend::InferenceSettings;
use std::time::Duration;

/// The engine's knobs. Defaults follow DESIGN.md.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Model id or inference-profile ARN sent on every call.
    pub model_id: String,
    /// The frozen system prompt.
    pub system_prompt: String,
    /// Its version, recorded on the conversation ([`crate::PROMPT_VERSION`] for the default).
    pub prompt_version: String,
    /// Model↔tool round trips per user message.
    pub max_cycles: u32,
    /// Whole-call deadline (open + stream).
    pub call_timeout: Duration,
    /// Longest wait for the next stream event.
    pub idle_timeout: Duration,
    /// Longest wait before the single retry of a call that streamed nothing.
    pub max_retry_wait: Duration,
    pub settings: InferenceSettings,
    /// What the current segment may weigh before a turn first compacts: the UTF-8 bytes of its
    /// non-reasoning content (one a character in English) and what its attachments weigh as
    /// the budget estimates them (`compact::content_weight`).
    pub compaction_threshold_chars: usize,
    /// Output budget of the notes call.
    pub compaction_max_tokens: u32,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            model_id: String::new(),
            system_prompt: crate::DEFAULT_SYSTEM_PROMPT.to_owned(),
            prompt_version: crate::PROMPT_VERSION.to_owned(),
            max_cycles: 12,
            call_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(20),
            max_retry_wait: Duration::from_secs(2),
            settings: InferenceSettings::default(),
            compaction_threshold_chars: 180_000,
            compaction_max_tokens: 4_000,
        }
    }
}
