//! The environment the deploy template gives a function, and the secret it points at, so a
//! bootstrap test starts the binary exactly as the stack would.

use serde_json::Value;
use std::process::Command;

/// The SAM template both deploy shapes are checked against (`infra/compare.py`).
pub const TEMPLATE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../infra/template.yaml");
const HELPER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../infra/lambda_env.py");

/// The variables `infra/template.yaml` sets on `function` (its logical id), read by
/// `infra/lambda_env.py`: parameters at their defaults, conditions evaluated, intrinsics
/// rendered. `refs` say what the template's resources stand for here (`("Table", name)`,
/// `("HttpApi", id)`, ...); a reference the test does not name fails with the helper's sentence
/// naming it. Blocks: call it off the async runtime, or accept a short stall.
///
/// The web function's URL is `("WebFunctionUrl.FunctionUrl", "https://…/")`: the worker's
/// onboarding link derives from it. The same helper prints what the template puts in a secret
/// (`python3 infra/lambda_env.py infra/template.yaml WebSecrets NAME=VALUE …`).
pub fn template_env(function: &str, refs: &[(&str, &str)]) -> Vec<(String, String)> {
    let out = Command::new("python3")
        .arg(HELPER)
        .arg(TEMPLATE)
        .arg(function)
        .args(refs.iter().map(|(name, value)| format!("{name}={value}")))
        .output()
        .expect("python3 runs infra/lambda_env.py");
    assert!(
        out.status.success(),
        "infra/lambda_env.py {function}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let vars: Value = serde_json::from_slice(&out.stdout).expect("the helper prints JSON");
    vars.as_object()
        .expect("a JSON object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("string values").to_owned()))
        .collect()
}

/// A Secrets Manager client for moto.
async fn secrets_client() -> aws_sdk_secretsmanager::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(crate::moto_endpoint())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_secretsmanager::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    aws_sdk_secretsmanager::Client::new(&config)
}

/// Rotate the moto secret `arn` to hold `value`, as an operator's `put-secret-value` does.
pub async fn moto_secret_rotate(arn: &str, value: &Value) {
    secrets_client()
        .await
        .put_secret_value()
        .secret_id(arn)
        .secret_string(value.to_string())
        .send()
        .await
        .expect("moto stores the new value");
}

/// A Secrets Manager secret in moto holding `value` (a JSON object, as the template's secrets
/// do); returns its ARN, what `BRIDLE_SECRETS_ARN` names.
pub async fn moto_secret(name: &str, value: &Value) -> String {
    let client = secrets_client().await;
    let created = client
        .create_secret()
        .name(name)
        .secret_string(value.to_string())
        .send()
        .await
        .expect("moto creates the secret");
    created.arn().expect("a secret has an ARN").to_owned()
}
