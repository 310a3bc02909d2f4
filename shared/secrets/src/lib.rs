//! Secrets for the Lambdas: when `BRIDLE_SECRETS_ARN` is set, one Secrets Manager secret holding
//! a JSON object of variable names to values (`{"SLACK_SIGNING_SECRET": "…", …}`) is read once
//! at cold start and kept in memory for the life of the instance; configuration then reads each
//! variable from the environment first, then from the secret ([`SecretVars::layered`]). Without
//! the variable, nothing is fetched (local runs and tests use plain environment variables).
//!
//! Values never reach a log or an error message: `Debug` shows names only, errors name keys.
//! Depends on the Secrets Manager SDK only; no engine, no channel, no Lambda runtime.

use std::collections::HashMap;

/// Why the secrets could not be loaded; each says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    #[error(
        "could not read secret {arn}: {detail} (check the ARN and the function's \
         secretsmanager:GetSecretValue permission)"
    )]
    Fetch { arn: String, detail: String },
    #[error("secret {arn} has no string value: store a JSON object of variable names to values")]
    NoString { arn: String },
    #[error("secret {arn} is not a JSON object of variable names to values")]
    NotAnObject { arn: String },
    #[error("secret {arn}: the value of {key} must be a string")]
    NotAString { arn: String, key: String },
}

/// Variables from the secret, by name.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretVars(HashMap<String, String>);

impl std::fmt::Debug for SecretVars {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.0.keys().collect();
        names.sort();
        f.debug_struct("SecretVars")
            .field("names", &names)
            .finish_non_exhaustive()
    }
}

impl SecretVars {
    /// Parse the secret's string: a JSON object whose values are strings.
    pub fn parse(arn: &str, text: &str) -> Result<Self, SecretsError> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|_| SecretsError::NotAnObject { arn: arn.into() })?;
        let object = value
            .as_object()
            .ok_or_else(|| SecretsError::NotAnObject { arn: arn.into() })?;
        let mut vars = HashMap::new();
        for (key, v) in object {
            let s = v.as_str().ok_or_else(|| SecretsError::NotAString {
                arn: arn.into(),
                key: key.clone(),
            })?;
            vars.insert(key.clone(), s.to_owned());
        }
        Ok(Self(vars))
    }

    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A variable lookup: `env` first, then the secret. An empty environment value does not
    /// hide the secret's (templates pass empty parameters through as empty variables).
    pub fn layered<'a>(
        &'a self,
        env: impl Fn(&str) -> Option<String> + 'a,
    ) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            env(name)
                .filter(|v| !v.trim().is_empty())
                .or_else(|| self.get(name))
        }
    }
}

/// Read the secret `arn` with `client`.
pub async fn fetch(
    client: &aws_sdk_secretsmanager::Client,
    arn: &str,
) -> Result<SecretVars, SecretsError> {
    let out = client
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| SecretsError::Fetch {
            arn: arn.into(),
            detail: aws_sdk_secretsmanager::error::DisplayErrorContext(&e).to_string(),
        })?;
    let text = out
        .secret_string()
        .ok_or_else(|| SecretsError::NoString { arn: arn.into() })?;
    SecretVars::parse(arn, text)
}

/// At cold start: the secret named by `BRIDLE_SECRETS_ARN` in `var`, or no variables when it is
/// not set. `aws` is the function's shared SDK configuration.
pub async fn load(
    var: impl Fn(&str) -> Option<String>,
    aws: &aws_config::SdkConfig,
) -> Result<SecretVars, SecretsError> {
    match var("BRIDLE_SECRETS_ARN").filter(|v| !v.trim().is_empty()) {
        None => Ok(SecretVars::default()),
        Some(arn) => fetch(&aws_sdk_secretsmanager::Client::new(aws), &arn).await,
    }
}
