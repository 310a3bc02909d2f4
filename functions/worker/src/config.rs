//! The worker's configuration, read once per cold start; every problem reported at once.
//! Which reply channels are on comes from [`channels::config::senders`].

/// What the worker needs from its environment besides the channels' credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The DynamoDB table (`TABLE_NAME`).
    pub table: String,
    /// `BEDROCK_MODEL_ID`: a model id or an inference-profile ARN.
    pub model_id: String,
    /// `PUBLIC_BASE_URL`: where people reach the web app (the onboarding reply links to it).
    pub public_base_url: String,
    /// The frozen system prompt: `BRIDLE_SYSTEM_PROMPT_FILE` (e.g. shipped in a layer), or the
    /// built-in one.
    pub prompt: engine::SystemPrompt,
    /// Model-call timeouts and inference settings (`BRIDLE_MODEL_TIMEOUT_S`,
    /// `BRIDLE_MAX_OUTPUT_TOKENS`, `BRIDLE_TOOL_CHOICE`, …), as `bridle serve` reads them.
    pub model: assembly::ModelSettings,
    /// `BRIDLE_LOBBY_RETENTION_DAYS`: how long an unknown sender's lobby is kept after its last
    /// message (30 days when unset).
    pub lobby_retention: std::time::Duration,
}

impl WorkerConfig {
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, Vec<String>> {
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let mut problems = Vec::new();
        let mut need = |k: &str, what: &str| {
            var(k).unwrap_or_else(|| {
                problems.push(format!("{k} is not set ({what})"));
                String::new()
            })
        };
        let table = need("TABLE_NAME", "the DynamoDB table");
        let model_id = need(
            "BEDROCK_MODEL_ID",
            "a Bedrock model id or inference-profile ARN",
        );
        let public_base_url = need(
            "PUBLIC_BASE_URL",
            "the public https URL of the web app, linked from the onboarding reply",
        );
        let prompt =
            engine::SystemPrompt::from_setting(var("BRIDLE_SYSTEM_PROMPT_FILE").as_deref())
                .unwrap_or_else(|problem| {
                    problems.push(problem);
                    engine::SystemPrompt::default()
                });
        let model = assembly::ModelSettings::from_vars(var, assembly::Provider::Bedrock)
            .unwrap_or_else(|more| {
                problems.extend(more);
                assembly::ModelSettings::default()
            });
        let lobby_retention = channel_jobs::lobby_retention_from_setting(
            var("BRIDLE_LOBBY_RETENTION_DAYS").as_deref(),
        )
        .unwrap_or_else(|problem| {
            problems.push(problem);
            channel_jobs::DEFAULT_LOBBY_RETENTION
        });
        if problems.is_empty() {
            Ok(Self {
                table,
                model_id,
                public_base_url,
                prompt,
                model,
                lobby_retention,
            })
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_at_once() {
        let err = WorkerConfig::from_vars(|_| None).unwrap_err();
        assert_eq!(err.len(), 3, "{err:?}");
        let ok = WorkerConfig::from_vars(|k| {
            Some(
                match k {
                    "TABLE_NAME" => "bridle",
                    "BEDROCK_MODEL_ID" => "anthropic.claude",
                    "PUBLIC_BASE_URL" => "https://bridle.example",
                    _ => return None,
                }
                .into(),
            )
        })
        .unwrap();
        assert_eq!(ok.table, "bridle");
        assert_eq!(ok.prompt.version, engine::PROMPT_VERSION);
        let bad = WorkerConfig::from_vars(|k| {
            (k == "BRIDLE_SYSTEM_PROMPT_FILE").then(|| "/nonexistent/prompt.md".to_owned())
        })
        .unwrap_err();
        assert_eq!(bad.len(), 4, "{bad:?}");
    }

    #[test]
    fn model_settings_are_read_as_serve_reads_them_and_bad_ones_refused() {
        let with = |pairs: &'static [(&'static str, &'static str)]| {
            WorkerConfig::from_vars(move |k| {
                let base = [
                    ("TABLE_NAME", "bridle"),
                    ("BEDROCK_MODEL_ID", "anthropic.claude"),
                    ("PUBLIC_BASE_URL", "https://bridle.example"),
                ];
                base.iter()
                    .chain(pairs)
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| (*v).to_owned())
            })
        };
        let c = with(&[
            ("BRIDLE_MODEL_TIMEOUT_S", "120"),
            ("BRIDLE_TOOL_CHOICE", "required"),
        ])
        .unwrap();
        assert_eq!(c.model.call_timeout, std::time::Duration::from_secs(120));
        assert_eq!(c.model.tool_choice, backend::ToolChoice::Required);
        let bad = with(&[
            ("BRIDLE_MAX_OUTPUT_TOKENS", "0"),
            ("BRIDLE_TOOL_CHOICE", "none"),
        ])
        .unwrap_err();
        assert_eq!(bad.len(), 2, "{bad:?}");
    }

    #[test]
    fn lobby_retention_in_days() {
        let with = |days: Option<&str>| {
            WorkerConfig::from_vars(move |k| {
                Some(
                    match k {
                        "TABLE_NAME" => "bridle",
                        "BEDROCK_MODEL_ID" => "anthropic.claude",
                        "PUBLIC_BASE_URL" => "https://bridle.example",
                        "BRIDLE_LOBBY_RETENTION_DAYS" => days?,
                        _ => return None,
                    }
                    .into(),
                )
            })
        };
        let day = std::time::Duration::from_secs(86_400);
        assert_eq!(with(None).unwrap().lobby_retention, 30 * day);
        assert_eq!(with(Some("7")).unwrap().lobby_retention, 7 * day);
        let bad = with(Some("0")).unwrap_err();
        assert!(bad[0].contains("BRIDLE_LOBBY_RETENTION_DAYS"), "{bad:?}");
    }
}
