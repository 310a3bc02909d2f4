//! The worker's configuration, read once per cold start; every problem reported at once.

/// What the worker needs from its environment.
#[derive(Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The DynamoDB table (`TABLE_NAME`).
    pub table: String,
    /// `BEDROCK_MODEL_ID`: a model id or an inference-profile ARN.
    pub model_id: String,
    /// Where generic-channel replies go (`GENERIC_CALLBACK_URL`) and their signing secret
    /// (`GENERIC_CALLBACK_SECRET`).
    pub generic_callback: Option<(String, String)>,
}

impl std::fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerConfig")
            .field("table", &self.table)
            .field("model_id", &self.model_id)
            .field(
                "generic_callback",
                &self.generic_callback.as_ref().map(|(url, _)| url),
            )
            .finish()
    }
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
        let generic_callback = match (var("GENERIC_CALLBACK_URL"), var("GENERIC_CALLBACK_SECRET")) {
            (Some(url), Some(secret)) => Some((url, secret)),
            (None, None) => None,
            _ => {
                problems.push(
                    "set both GENERIC_CALLBACK_URL and GENERIC_CALLBACK_SECRET, or neither".into(),
                );
                None
            }
        };
        if generic_callback.is_none() && problems.is_empty() {
            problems.push("no reply channel is configured: set GENERIC_CALLBACK_URL and GENERIC_CALLBACK_SECRET".into());
        }
        if problems.is_empty() {
            Ok(Self {
                table,
                model_id,
                generic_callback,
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
    fn every_problem_at_once_and_no_secret_in_debug() {
        let err =
            WorkerConfig::from_vars(|k| (k == "GENERIC_CALLBACK_URL").then(|| "http://x".into()))
                .unwrap_err();
        assert_eq!(err.len(), 3, "{err:?}");
        let ok = WorkerConfig::from_vars(|k| {
            Some(
                match k {
                    "TABLE_NAME" => "bridle",
                    "BEDROCK_MODEL_ID" => "anthropic.claude",
                    "GENERIC_CALLBACK_URL" => "https://example.test/cb",
                    "GENERIC_CALLBACK_SECRET" => "hush",
                    _ => return None,
                }
                .into(),
            )
        })
        .unwrap();
        assert!(!format!("{ok:?}").contains("hush"));
    }
}
