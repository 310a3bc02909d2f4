//! The model's tool list per purpose, built once per engine.

use backend::ToolSpec;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tools::Registry;

/// Each purpose's tool list as the model sees it. The registry does not change under an engine,
/// so every turn of a purpose shares one `Arc<[ToolSpec]>`: no copy of every schema per turn
/// (which the budget's running estimate kept alive per conversation: RSS grew with the number
/// of conversations), and the estimate recognises the list by pointer. Bounded by the number of
/// purposes.
#[derive(Debug, Default)]
pub(crate) struct ToolSpecs(Mutex<HashMap<String, Arc<[ToolSpec]>>>);

impl ToolSpecs {
    /// The tool list for `purpose`, built from `registry` the first time.
    pub(crate) fn for_purpose(&self, registry: &Registry, purpose: &str) -> Arc<[ToolSpec]> {
        let mut built = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(specs) = built.get(purpose) {
            return specs.clone();
        }
        let specs: Arc<[ToolSpec]> = registry
            .catalog_for(purpose)
            .into_iter()
            .map(|d| ToolSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                input_schema: d.input_schema.clone(),
            })
            .collect();
        built.insert(purpose.to_owned(), specs.clone());
        specs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tools::{ToolDef, handler_fn};

    /// Every turn of a purpose gets the same list (one allocation, equal by pointer), each
    /// purpose its own, with what the registry offers that purpose.
    #[test]
    fn one_list_per_purpose_shared_by_every_turn() {
        let mut registry = Registry::default();
        for (name, purpose) in [("list_notes", "chat"), ("finish_onboarding", "onboarding")] {
            registry
                .register(
                    ToolDef::new(name, "A tool.", json!({"type": "object"})).purposes(&[purpose]),
                    handler_fn(|_, _| async { Ok(json!({})) }),
                )
                .unwrap();
        }
        let specs = ToolSpecs::default();
        let chat = specs.for_purpose(&registry, "chat");
        assert!(Arc::ptr_eq(&chat, &specs.for_purpose(&registry, "chat")));
        let names = |l: &[ToolSpec]| l.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&chat), ["list_notes"]);
        let onboarding = specs.for_purpose(&registry, "onboarding");
        assert_eq!(names(&onboarding), ["finish_onboarding"]);
        assert!(!Arc::ptr_eq(&chat, &onboarding));
    }
}
