//! What `bridle eval` runs against: the model and its settings as `bridle serve` reads them
//! (`BRIDLE_BACKEND`, `OPENAI_*`, `BEDROCK_MODEL_ID`, `BRIDLE_SCRIPT`, `BRIDLE_MODEL_*`,
//! `BRIDLE_SYSTEM_PROMPT_FILE`, `BRIDLE_PRICES_FILE`), with `--model` and `--prompt` on top,
//! and the engine assembled as `bridle serve` assembles it (same tools), on a throwaway
//! in-memory store.

use super::Answerer;
use super::recorded::RecordedModel;
use crate::config::{BackendChoice, ConfigErrors, ServeConfig};
use crate::{AppOptions, Db, build_app};
use backend::ChatModel;
use engine::{Engine, SystemPrompt};
use std::path::Path;
use std::sync::Arc;

/// The model the replay calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalModel {
    /// `BRIDLE_BACKEND=scripted` without `BRIDLE_SCRIPT`: the recorded answers themselves.
    Recorded,
    Configured(BackendChoice),
}

/// The model, the prompt and the settings of an evaluation.
#[derive(Debug, Clone)]
pub struct EvalConfig {
    pub model: EvalModel,
    pub serve: ServeConfig,
}

impl EvalConfig {
    /// Read as `bridle serve` does; `model` (`--model`) replaces the configured model id and
    /// `prompt` (`--prompt`) the system prompt. Every problem is reported at once.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        model: Option<&str>,
        prompt: Option<&Path>,
    ) -> Result<Self, ConfigErrors> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let recorded = set("BRIDLE_BACKEND")
            .is_some_and(|b| b.trim().eq_ignore_ascii_case("scripted"))
            && set("BRIDLE_SCRIPT").is_none();
        let mut serve = ServeConfig::from_vars(|k| match k {
            "BRIDLE_ADDR" | "BRIDLE_OIDC_ISSUER" => None,
            "BRIDLE_BACKEND" if recorded => Some("none".into()),
            _ => var(k),
        })?;
        if let Some(path) = prompt {
            serve.prompt = SystemPrompt::from_file(path).map_err(|err| {
                ConfigErrors(vec![format!(
                    "--prompt {} cannot be read: {err}",
                    path.display()
                )])
            })?;
        }
        let mut backend = serve.backend.clone();
        match (&mut backend, model) {
            (BackendChoice::OpenAi { model: m, .. }, Some(id))
            | (BackendChoice::Bedrock { model_id: m }, Some(id)) => *m = id.to_owned(),
            (_, Some(_)) if !recorded => {
                return Err(ConfigErrors(vec![
                    "--model needs an OpenAI-compatible or Bedrock backend (OPENAI_BASE_URL or \
                     BEDROCK_MODEL_ID)"
                        .into(),
                ]));
            }
            _ => {}
        }
        let model = match backend {
            BackendChoice::None if recorded => EvalModel::Recorded,
            BackendChoice::None => {
                return Err(ConfigErrors(vec![
                    "bridle eval needs a model: set OPENAI_BASE_URL and OPENAI_MODEL, or \
                     BEDROCK_MODEL_ID, or BRIDLE_BACKEND=scripted (the recorded answers, or \
                     BRIDLE_SCRIPT)"
                        .into(),
                ]));
            }
            other => EvalModel::Configured(other),
        };
        Ok(Self { model, serve })
    }
}

/// Why the engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Backend(#[from] crate::backends::BackendSetupError),
    #[error(transparent)]
    Start(#[from] crate::StartError),
}

/// The engine `bridle serve` would run with this configuration (its tools, prompt and model
/// settings; no guards are consulted by a replay), and what answers its calls.
pub async fn engine_for(config: &EvalConfig) -> Result<(Arc<Engine>, Answerer), SetupError> {
    let (model, model_id, answerer): (Arc<dyn ChatModel>, String, Answerer) = match &config.model {
        EvalModel::Recorded => {
            let recorded = Arc::new(RecordedModel::default());
            (
                recorded.clone(),
                "recorded".into(),
                Answerer::Recorded(recorded),
            )
        }
        EvalModel::Configured(choice) => {
            let (model, id) = crate::backends::model_for(choice).await?;
            (model, id, Answerer::Engine)
        }
    };
    let serve = &config.serve;
    let options = AppOptions {
        db: Db::Memory,
        model_id: model_id.clone(),
        engine: serve.model.applied_to(engine::EngineOptions {
            model_id,
            system_prompt: serve.prompt.text.clone(),
            prompt_version: serve.prompt.version.clone(),
            ..engine::EngineOptions::default()
        }),
        ..AppOptions::default()
    };
    let app = build_app(model, options)?;
    Ok((app.engine, answerer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(
        pairs: &[(&str, &str)],
        model: Option<&str>,
        prompt: Option<&Path>,
    ) -> Result<EvalConfig, ConfigErrors> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        EvalConfig::from_vars(|k| map.get(k).cloned(), model, prompt)
    }

    #[test]
    fn scripted_without_a_script_is_the_recorded_model() {
        let c = read(&[("BRIDLE_BACKEND", "scripted")], None, None).unwrap();
        assert_eq!(c.model, EvalModel::Recorded);
        let c = read(
            &[("BRIDLE_BACKEND", "scripted"), ("BRIDLE_SCRIPT", "/s.json")],
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            c.model,
            EvalModel::Configured(BackendChoice::Scripted {
                script: "/s.json".into()
            })
        );
    }

    #[test]
    fn model_and_prompt_flags_replace_the_configured_ones() {
        let openai = [
            ("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
            ("OPENAI_MODEL", "llama3.2"),
        ];
        let file = crate::temp_file_with("bridle-eval-prompt-", ".md", "Be brief.");
        let c = read(&openai, Some("qwen3"), Some(file.path())).unwrap();
        assert!(
            matches!(c.model, EvalModel::Configured(BackendChoice::OpenAi { model, .. }) if model == "qwen3")
        );
        assert_eq!(c.serve.prompt.text, "Be brief.");
        let missing = read(&openai, None, Some(Path::new("/nonexistent/p.md"))).unwrap_err();
        assert!(
            missing.to_string().contains("--prompt /nonexistent/p.md"),
            "{missing}"
        );
    }

    #[test]
    fn no_model_is_a_clear_error() {
        let err = read(&[], None, None).unwrap_err().to_string();
        assert!(err.contains("bridle eval needs a model"), "{err}");
        let err = read(
            &[("BRIDLE_BACKEND", "scripted"), ("BRIDLE_SCRIPT", "/s")],
            Some("m"),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("--model needs"), "{err}");
    }
}
