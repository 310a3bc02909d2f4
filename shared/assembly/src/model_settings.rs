//! The model-call settings, read the same way by every entrance (`bridle serve`, `bridle smoke`,
//! the worker and web Lambdas): once at start-up, from a variable lookup, every bad value a
//! problem of its own and all of them reported at once. Unset, each keeps DESIGN.md's default.
//!
//! | variable | default | accepts |
//! |---|---|---|
//! | `BRIDLE_MODEL_TIMEOUT_S` | 60 | whole seconds, 1–900: one model call, opening and streaming |
//! | `BRIDLE_MODEL_IDLE_TIMEOUT_S` | 20 | whole seconds, 1–900, at most the call timeout: the longest silence on the wire |
//! | `BRIDLE_MAX_OUTPUT_TOKENS` | 16000 | 1–1000000: a call's output allowance (`max_tokens`) |
//! | `BRIDLE_TEMPERATURE` | the provider's | 0–2 |
//! | `BRIDLE_TOOL_CHOICE` | `auto` | `auto`, `required` (a tool call on each user message), `none` (not on Bedrock) |
//! | `BRIDLE_REASONING_EFFORT` | unset | `minimal`, `low`, `medium`, `high` (OpenAI-compatible servers) |
//! | `BRIDLE_REASONING_BUDGET_TOKENS` | unset | 1024 and up, below the output allowance (Bedrock) |

use backend::{ReasoningEffort, ToolChoice};
use engine::EngineOptions;
use std::time::Duration;

/// Which kind of provider the settings are for: some settings exist on one kind only, and a
/// setting the provider would ignore is refused rather than silently dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// An OpenAI-compatible Chat Completions server.
    OpenAiCompatible,
    /// Amazon Bedrock (Converse).
    Bedrock,
    /// The scripted model, or none: every setting is accepted.
    Other,
}

/// Timeouts and inference settings for every model call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    pub call_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_output_tokens: u32,
    pub temperature: Option<f32>,
    pub tool_choice: ToolChoice,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub reasoning_budget: Option<u32>,
}

// Temperatures are finite (checked when read), so equality is total.
impl Eq for ModelSettings {}

impl Default for ModelSettings {
    fn default() -> Self {
        let engine = EngineOptions::default();
        Self {
            call_timeout: engine.call_timeout,
            idle_timeout: engine.idle_timeout,
            max_output_tokens: engine.settings.max_tokens,
            temperature: engine.settings.temperature,
            tool_choice: engine.settings.tool_choice,
            reasoning_effort: engine.settings.reasoning_effort,
            reasoning_budget: engine.settings.reasoning_budget,
        }
    }
}

impl ModelSettings {
    /// Read the settings for `provider` from `var` (the environment in `main`, a map in tests).
    /// Blank values count as unset.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        provider: Provider,
    ) -> Result<Self, Vec<String>> {
        let var = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut problems = Vec::new();
        let defaults = Self::default();

        let mut seconds = |name: &str, default: Duration| match var(name) {
            None => default,
            Some(v) => match v.parse::<u64>() {
                Ok(n) if (1..=900).contains(&n) => Duration::from_secs(n),
                _ => {
                    problems.push(format!(
                        "{name}={v:?} must be a whole number of seconds from 1 to 900"
                    ));
                    default
                }
            },
        };
        let call_timeout = seconds("BRIDLE_MODEL_TIMEOUT_S", defaults.call_timeout);
        let idle_timeout = seconds("BRIDLE_MODEL_IDLE_TIMEOUT_S", defaults.idle_timeout);
        if idle_timeout > call_timeout {
            problems.push(format!(
                "BRIDLE_MODEL_IDLE_TIMEOUT_S ({} s) must not be longer than BRIDLE_MODEL_TIMEOUT_S \
                 ({} s): the call would end before the wait",
                idle_timeout.as_secs(),
                call_timeout.as_secs()
            ));
        }

        let max_output_tokens = match var("BRIDLE_MAX_OUTPUT_TOKENS") {
            None => defaults.max_output_tokens,
            Some(v) => match v.parse::<u32>() {
                Ok(n) if (1..=1_000_000).contains(&n) => n,
                _ => {
                    problems.push(format!(
                        "BRIDLE_MAX_OUTPUT_TOKENS={v:?} must be a whole number of tokens from 1 \
                         to 1000000 (keep it below the model's context window)"
                    ));
                    defaults.max_output_tokens
                }
            },
        };

        let temperature = match var("BRIDLE_TEMPERATURE") {
            None => defaults.temperature,
            Some(v) => match v.parse::<f32>() {
                Ok(t) if t.is_finite() && (0.0..=2.0).contains(&t) => Some(t),
                _ => {
                    problems.push(format!(
                        "BRIDLE_TEMPERATURE={v:?} must be a number from 0 to 2, like 0.2"
                    ));
                    defaults.temperature
                }
            },
        };

        let tool_choice = match var("BRIDLE_TOOL_CHOICE").map(|v| v.to_ascii_lowercase()) {
            None => defaults.tool_choice,
            Some(v) => match v.as_str() {
                "auto" => ToolChoice::Auto,
                "required" => ToolChoice::Required,
                "none" if provider == Provider::Bedrock => {
                    problems.push(
                        "BRIDLE_TOOL_CHOICE=none is not available on Bedrock (Converse has no \
                         such choice); use auto or required"
                            .into(),
                    );
                    defaults.tool_choice
                }
                "none" => ToolChoice::None,
                _ => {
                    problems.push(format!(
                        "BRIDLE_TOOL_CHOICE={v:?} is not one of auto, required, none"
                    ));
                    defaults.tool_choice
                }
            },
        };

        let reasoning_effort = match var("BRIDLE_REASONING_EFFORT").map(|v| v.to_ascii_lowercase())
        {
            None => None,
            Some(_) if provider == Provider::Bedrock => {
                problems.push(
                    "BRIDLE_REASONING_EFFORT is for OpenAI-compatible servers; Bedrock takes a \
                     thinking budget: BRIDLE_REASONING_BUDGET_TOKENS"
                        .into(),
                );
                None
            }
            Some(v) => match v.as_str() {
                "minimal" => Some(ReasoningEffort::Minimal),
                "low" => Some(ReasoningEffort::Low),
                "medium" => Some(ReasoningEffort::Medium),
                "high" => Some(ReasoningEffort::High),
                _ => {
                    problems.push(format!(
                        "BRIDLE_REASONING_EFFORT={v:?} is not one of minimal, low, medium, high"
                    ));
                    None
                }
            },
        };

        let reasoning_budget = match var("BRIDLE_REASONING_BUDGET_TOKENS") {
            None => None,
            Some(_) if provider == Provider::OpenAiCompatible => {
                problems.push(
                    "BRIDLE_REASONING_BUDGET_TOKENS is for Bedrock; OpenAI-compatible servers \
                     take BRIDLE_REASONING_EFFORT"
                        .into(),
                );
                None
            }
            Some(v) => match v.parse::<u32>() {
                Ok(n) if n >= 1_024 && n < max_output_tokens => Some(n),
                _ => {
                    problems.push(format!(
                        "BRIDLE_REASONING_BUDGET_TOKENS={v:?} must be a whole number from 1024 \
                         up to below the output allowance ({max_output_tokens}, \
                         BRIDLE_MAX_OUTPUT_TOKENS)"
                    ));
                    None
                }
            },
        };

        if problems.is_empty() {
            Ok(Self {
                call_timeout,
                idle_timeout,
                max_output_tokens,
                temperature,
                tool_choice,
                reasoning_effort,
                reasoning_budget,
            })
        } else {
            Err(problems)
        }
    }

    /// Put the settings on the engine's options. The notes call of compaction never gets more
    /// output than the allowance either.
    pub fn apply(&self, options: &mut EngineOptions) {
        options.call_timeout = self.call_timeout;
        options.idle_timeout = self.idle_timeout;
        options.settings.max_tokens = self.max_output_tokens;
        options.settings.temperature = self.temperature;
        options.settings.tool_choice = self.tool_choice;
        options.settings.reasoning_effort = self.reasoning_effort;
        options.settings.reasoning_budget = self.reasoning_budget;
        options.compaction_max_tokens = options.compaction_max_tokens.min(self.max_output_tokens);
    }

    /// The engine's options with these settings on them.
    pub fn applied_to(&self, mut options: EngineOptions) -> EngineOptions {
        self.apply(&mut options);
        options
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(pairs: &[(&str, &str)], provider: Provider) -> Result<ModelSettings, Vec<String>> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        ModelSettings::from_vars(|k| map.get(k).cloned(), provider)
    }

    fn problem(pairs: &[(&str, &str)], provider: Provider) -> String {
        let problems = read(pairs, provider).expect_err("a start-up error");
        assert_eq!(problems.len(), 1, "{problems:?}");
        problems[0].clone()
    }

    #[test]
    fn unset_keeps_designs_defaults() {
        let s = read(&[], Provider::Bedrock).unwrap();
        assert_eq!(s, ModelSettings::default());
        assert_eq!(s.call_timeout, Duration::from_secs(60));
        assert_eq!(s.idle_timeout, Duration::from_secs(20));
        assert_eq!(s.max_output_tokens, 16_000);
        assert_eq!((s.temperature, s.tool_choice), (None, ToolChoice::Auto));
        let blank = read(&[("BRIDLE_TOOL_CHOICE", "  ")], Provider::Other).unwrap();
        assert_eq!(blank, ModelSettings::default());
    }

    #[test]
    fn every_setting_is_read_and_applied() {
        let s = read(
            &[
                ("BRIDLE_MODEL_TIMEOUT_S", "300"),
                ("BRIDLE_MODEL_IDLE_TIMEOUT_S", "120"),
                ("BRIDLE_MAX_OUTPUT_TOKENS", "1024"),
                ("BRIDLE_TEMPERATURE", "0.2"),
                ("BRIDLE_TOOL_CHOICE", "Required"),
                ("BRIDLE_REASONING_EFFORT", "low"),
            ],
            Provider::OpenAiCompatible,
        )
        .unwrap();
        let o = s.applied_to(EngineOptions::default());
        assert_eq!(o.call_timeout, Duration::from_secs(300));
        assert_eq!(o.idle_timeout, Duration::from_secs(120));
        assert_eq!(o.settings.max_tokens, 1024);
        assert_eq!(o.settings.temperature, Some(0.2));
        assert_eq!(o.settings.tool_choice, ToolChoice::Required);
        assert_eq!(o.settings.reasoning_effort, Some(ReasoningEffort::Low));
        assert_eq!(
            o.compaction_max_tokens, 1024,
            "notes never exceed the allowance"
        );
        let b = read(
            &[
                ("BRIDLE_REASONING_BUDGET_TOKENS", "4096"),
                ("BRIDLE_TOOL_CHOICE", "none"),
            ],
            Provider::Other,
        )
        .unwrap();
        assert_eq!(b.reasoning_budget, Some(4096));
        assert_eq!(b.tool_choice, ToolChoice::None);
    }

    #[test]
    fn bad_values_are_start_up_errors() {
        let any = Provider::Other;
        for (name, bad) in [
            ("BRIDLE_MODEL_TIMEOUT_S", "0"),
            ("BRIDLE_MODEL_TIMEOUT_S", "1.5"),
            ("BRIDLE_MODEL_TIMEOUT_S", "901"),
            ("BRIDLE_MODEL_IDLE_TIMEOUT_S", "-1"),
            ("BRIDLE_MAX_OUTPUT_TOKENS", "0"),
            ("BRIDLE_MAX_OUTPUT_TOKENS", "lots"),
            ("BRIDLE_TEMPERATURE", "2.5"),
            ("BRIDLE_TEMPERATURE", "NaN"),
            ("BRIDLE_TEMPERATURE", "warm"),
            ("BRIDLE_TOOL_CHOICE", "always"),
            ("BRIDLE_REASONING_EFFORT", "max"),
            ("BRIDLE_REASONING_BUDGET_TOKENS", "512"),
            ("BRIDLE_REASONING_BUDGET_TOKENS", "16000"),
        ] {
            let p = problem(&[(name, bad)], any);
            assert!(p.starts_with(name) && p.contains(bad), "{name}={bad}: {p}");
        }
        let p = problem(&[("BRIDLE_MODEL_IDLE_TIMEOUT_S", "90")], any);
        assert!(
            p.contains("must not be longer than BRIDLE_MODEL_TIMEOUT_S (60 s)"),
            "{p}"
        );
    }

    #[test]
    fn settings_the_provider_would_ignore_are_refused() {
        let p = problem(&[("BRIDLE_TOOL_CHOICE", "none")], Provider::Bedrock);
        assert!(p.contains("not available on Bedrock"), "{p}");
        let p = problem(&[("BRIDLE_REASONING_EFFORT", "high")], Provider::Bedrock);
        assert!(p.contains("BRIDLE_REASONING_BUDGET_TOKENS"), "{p}");
        let p = problem(
            &[("BRIDLE_REASONING_BUDGET_TOKENS", "2048")],
            Provider::OpenAiCompatible,
        );
        assert!(p.contains("BRIDLE_REASONING_EFFORT"), "{p}");
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let problems = read(
            &[
                ("BRIDLE_MODEL_TIMEOUT_S", "x"),
                ("BRIDLE_MAX_OUTPUT_TOKENS", "0"),
                ("BRIDLE_TEMPERATURE", "-1"),
                ("BRIDLE_TOOL_CHOICE", "sometimes"),
            ],
            Provider::Other,
        )
        .unwrap_err();
        assert_eq!(problems.len(), 4, "{problems:?}");
    }
}
