//! The SDK configuration from the environment variables Lambda sets, without the default chain.
//!
//! In Lambda, credentials and region are plain environment variables: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN` (the execution role's temporary credentials,
//! valid for the life of the execution environment) and `AWS_REGION`. `aws_config`'s default
//! chain finds them too, but only after building every provider it might need elsewhere
//! (profile files, web identity, ECS, IMDS, SSO) — most of the SDK's share of a cold start.
//!
//! [`from_env`] builds the same [`SdkConfig`] the chain would resolve from those variables —
//! the credentials read once (as the chain's environment provider reads them; they do not change
//! while the process lives) behind the lazy identity cache, standard retries, the 3.1 s connect
//! timeout, `AWS_ENDPOINT_URL` and the per-service `AWS_ENDPOINT_URL_<SERVICE>` — and answers
//! `None`, so the caller falls back to the full chain, when credentials or region are missing or
//! when any setting only the chain reads (a profile, retry or endpoint options, ...) is set.

use aws_config::identity::IdentityCache;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use aws_credential_types::credential_feature::AwsCredentialFeature;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_runtime::env_config::EnvConfigValue;
use aws_smithy_async::rt::sleep::default_async_sleep;
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_types::origin::Origin;
use aws_types::os_shim_internal::Env;
use aws_types::service_config::{LoadServiceConfig, ServiceConfigKey};
use std::time::Duration;

/// The default chain's connect timeout (`aws_config::default_provider::timeout_config`).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(3100);

/// The provider name the chain's environment provider gives its credentials.
const ENV_PROVIDER: &str = "EnvironmentVariable";

/// Settings the default chain reads and [`from_env`] does not: when one is set, the caller
/// needs the full chain. (Credential sources other than the environment need not be listed:
/// the chain tries environment credentials first.)
const CHAIN_ONLY: &[&str] = &[
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_MAX_ATTEMPTS",
    "AWS_RETRY_MODE",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_SDK_UA_APP_ID",
    "AWS_DISABLE_REQUEST_COMPRESSION",
    "AWS_REQUEST_MIN_COMPRESSION_SIZE_BYTES",
    "AWS_REQUEST_CHECKSUM_CALCULATION",
    "AWS_RESPONSE_CHECKSUM_VALIDATION",
    "AWS_ACCOUNT_ID_ENDPOINT_MODE",
    "AWS_AUTH_SCHEME_PREFERENCE",
];

/// The config from `env` with `http_client`, or `None` when the full chain is needed (see the
/// module docs).
pub fn from_env(env: &Env, http_client: SharedHttpClient) -> Option<SdkConfig> {
    let var = |k: &str| env.get(k).ok().filter(|v| !v.trim().is_empty());
    if CHAIN_ONLY.iter().any(|k| var(k).is_some()) {
        return None;
    }
    let region = var("AWS_REGION").or_else(|| var("AWS_DEFAULT_REGION"))?;
    let mut credentials = Credentials::builder()
        .access_key_id(var("AWS_ACCESS_KEY_ID")?)
        .secret_access_key(var("AWS_SECRET_ACCESS_KEY")?)
        .provider_name(ENV_PROVIDER);
    credentials.set_session_token(var("AWS_SESSION_TOKEN"));
    credentials.set_account_id(var("AWS_ACCOUNT_ID").map(Into::into));
    let mut credentials = credentials.build();
    credentials
        .get_property_mut_or_default::<Vec<AwsCredentialFeature>>()
        .push(AwsCredentialFeature::CredentialsEnvVars);
    let mut builder = SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(region))
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .identity_cache(IdentityCache::lazy().build())
        .retry_config(RetryConfig::standard())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .build(),
        )
        .http_client(http_client)
        .service_config(EnvServiceConfig { env: env.clone() });
    builder.set_sleep_impl(default_async_sleep());
    if let Some(url) = var("AWS_ENDPOINT_URL") {
        builder.insert_origin("endpoint_url", Origin::shared_environment_variable());
        builder.set_endpoint_url(Some(url));
    }
    Some(builder.build())
}

/// Per-service settings (`AWS_ENDPOINT_URL_SQS`, ...) from the environment, as the chain's
/// own service config reads them, minus the profile files.
#[derive(Debug)]
struct EnvServiceConfig {
    env: Env,
}

impl LoadServiceConfig for EnvServiceConfig {
    fn load_config(&self, key: ServiceConfigKey<'_>) -> Option<String> {
        let (value, _source) = EnvConfigValue::new()
            .env(key.env())
            .service_id(key.service_id())
            .load(&self.env, None)?;
        Some(value.into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Option<SdkConfig> {
        from_env(&Env::from_slice(vars), crate::http_client())
    }

    const LAMBDA: &[(&str, &str)] = &[
        ("AWS_ACCESS_KEY_ID", "AKID"),
        ("AWS_SECRET_ACCESS_KEY", "secret"),
        ("AWS_SESSION_TOKEN", "token"),
        ("AWS_REGION", "eu-west-1"),
        ("AWS_LAMBDA_FUNCTION_NAME", "webhook"),
    ];

    #[tokio::test]
    async fn lambdas_variables_make_the_config() {
        use aws_credential_types::provider::ProvideCredentials;
        let config = config(LAMBDA).expect("Lambda's variables are enough");
        assert_eq!(config.region().map(|r| r.as_ref()), Some("eu-west-1"));
        assert_eq!(config.endpoint_url(), None);
        assert_eq!(config.retry_config(), Some(&RetryConfig::standard()));
        assert_eq!(
            config.timeout_config().and_then(|t| t.connect_timeout()),
            Some(CONNECT_TIMEOUT)
        );
        assert!(config.identity_cache().is_some() && config.sleep_impl().is_some());
        let creds = config
            .credentials_provider()
            .unwrap()
            .provide_credentials()
            .await
            .unwrap();
        assert_eq!(creds.access_key_id(), "AKID");
        assert_eq!(creds.secret_access_key(), "secret");
        assert_eq!(creds.session_token(), Some("token"));
    }

    #[test]
    fn the_default_region_is_the_fallback() {
        let mut vars = LAMBDA.to_vec();
        vars.retain(|(k, _)| *k != "AWS_REGION");
        vars.push(("AWS_DEFAULT_REGION", "us-east-2"));
        let config = config(&vars).unwrap();
        assert_eq!(config.region().map(|r| r.as_ref()), Some("us-east-2"));
    }

    #[test]
    fn endpoint_urls_are_honoured_globally_and_per_service() {
        let mut vars = LAMBDA.to_vec();
        vars.push(("AWS_ENDPOINT_URL", "http://127.0.0.1:5999"));
        vars.push(("AWS_ENDPOINT_URL_SECRETS_MANAGER", "http://127.0.0.1:6000"));
        let config = config(&vars).unwrap();
        assert_eq!(config.endpoint_url(), Some("http://127.0.0.1:5999"));
        let service = config.service_config().unwrap();
        let key = |id| {
            ServiceConfigKey::builder()
                .service_id(id)
                .env("AWS_ENDPOINT_URL")
                .profile("endpoint_url")
                .build()
                .unwrap()
        };
        assert_eq!(
            service.load_config(key("Secrets Manager")).as_deref(),
            Some("http://127.0.0.1:6000")
        );
        assert_eq!(
            service.load_config(key("SQS")).as_deref(),
            Some("http://127.0.0.1:5999")
        );
    }

    #[test]
    fn the_full_chain_is_needed_without_credentials_or_region_or_with_chain_settings() {
        for missing in ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"] {
            let mut vars = LAMBDA.to_vec();
            vars.retain(|(k, _)| *k != missing);
            assert!(config(&vars).is_none(), "without {missing}");
            // A blank variable is a missing one, as the chain reads it.
            vars.push((missing, " "));
            assert!(config(&vars).is_none(), "with a blank {missing}");
        }
        for setting in CHAIN_ONLY {
            let mut vars = LAMBDA.to_vec();
            vars.push((setting, "1"));
            assert!(config(&vars).is_none(), "with {setting}");
        }
    }
}
