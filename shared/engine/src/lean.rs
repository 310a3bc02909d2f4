//! Lean mode: when the provider refuses an optional feature (cache points, reasoning
//! settings), the process stops asking for it. Optional features never take the product down.

use backend::{InferenceSettings, OptionalFeature};
use std::sync::atomic::{AtomicBool, Ordering};

/// Which optional features this process has stopped using. Shared by every turn of an engine.
#[derive(Debug, Default)]
pub struct Lean {
    no_prompt_cache: AtomicBool,
    no_reasoning: AtomicBool,
    no_tool_choice: AtomicBool,
}

impl Lean {
    /// Stop using `feature`; `true` the first time (the caller logs the switch once).
    pub fn drop_feature(&self, feature: OptionalFeature) -> bool {
        let flag = match feature {
            OptionalFeature::PromptCache => &self.no_prompt_cache,
            OptionalFeature::Reasoning => &self.no_reasoning,
            OptionalFeature::ToolChoice => &self.no_tool_choice,
        };
        !flag.swap(true, Ordering::Relaxed)
    }

    /// Whether `feature` was dropped.
    pub fn dropped(&self, feature: OptionalFeature) -> bool {
        match feature {
            OptionalFeature::PromptCache => self.no_prompt_cache.load(Ordering::Relaxed),
            OptionalFeature::Reasoning => self.no_reasoning.load(Ordering::Relaxed),
            OptionalFeature::ToolChoice => self.no_tool_choice.load(Ordering::Relaxed),
        }
    }

    /// `settings` without the dropped features.
    pub fn apply(&self, settings: &mut InferenceSettings) {
        if self.dropped(OptionalFeature::PromptCache) {
            settings.prompt_cache = false;
        }
        if self.dropped(OptionalFeature::Reasoning) {
            settings.reasoning_budget = None;
            settings.reasoning_effort = None;
        }
        if self.dropped(OptionalFeature::ToolChoice) {
            settings.tool_choice = backend::ToolChoice::Auto;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_feature_stays_dropped_and_is_reported_once() {
        let lean = Lean::default();
        let mut s = InferenceSettings {
            reasoning_budget: Some(1024),
            ..Default::default()
        };
        lean.apply(&mut s);
        assert!(s.prompt_cache);
        assert_eq!(s.reasoning_budget, Some(1024));
        assert!(lean.drop_feature(OptionalFeature::PromptCache));
        assert!(!lean.drop_feature(OptionalFeature::PromptCache));
        lean.apply(&mut s);
        assert!(!s.prompt_cache);
        assert_eq!(s.reasoning_budget, Some(1024));
        lean.drop_feature(OptionalFeature::Reasoning);
        lean.apply(&mut s);
        assert_eq!(s.reasoning_budget, None);
        s.tool_choice = backend::ToolChoice::Required;
        lean.apply(&mut s);
        assert_eq!(s.tool_choice, backend::ToolChoice::Required);
        lean.drop_feature(OptionalFeature::ToolChoice);
        lean.apply(&mut s);
        assert_eq!(s.tool_choice, backend::ToolChoice::Auto);
    }
}
