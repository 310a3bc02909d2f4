//! The AWS SDK's HTTPS client with Amazon Trust Services' root certificates compiled in.
//!
//! The SDK's default client loads the machine's certificate store (`rustls-native-certs`) when
//! the first client is built — file reads and parsing of every system root on the cold-start
//! path of each Lambda. AWS service endpoints chain to Amazon Root CA 1–4 (cross-signed by
//! Starfield Services Root CA G2, see <https://www.amazontrust.com/repository/>), so the Lambdas
//! trust exactly those, from bytes in the binary.
//!
//! [`load_config`] is the SDK configuration the bootstraps build once per cold start: from
//! Lambda's environment variables when they are all there ([`lambda_env`]), else from the SDK's
//! default chain.
//!
//! Used only by the Lambda bootstraps (`main.rs`); depends on the AWS SDK and nothing of Bridle.

pub mod lambda_env;

use aws_config::{BehaviorVersion, SdkConfig};
use aws_smithy_http_client::Builder;
use aws_smithy_http_client::tls::{self, TlsContext, TrustStore};
use aws_smithy_runtime_api::client::http::SharedHttpClient;
use aws_types::os_shim_internal::Env;

/// The deadlines of the Lambdas' DynamoDB calls (DESIGN.md invariant 5; the SDK sets none by
/// default): 2 s to connect, 3 s an attempt, 10 s an operation with its retries.
pub fn table_deadlines() -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(std::time::Duration::from_secs(2))
        .operation_attempt_timeout(std::time::Duration::from_secs(3))
        .operation_timeout(std::time::Duration::from_secs(10))
        .build()
}

/// Amazon Root CA 1–4, Starfield Services Root CA G2, Starfield Root CA G2 and Starfield
/// Class 2 (the cross-signing chain of older endpoints), as PEM.
pub const AMAZON_TRUST_SERVICES_PEM: &str = include_str!("../certs/amazon-trust-services.pem");

/// An HTTPS client (rustls, aws-lc) trusting only [`AMAZON_TRUST_SERVICES_PEM`]. Plain
/// `http://` endpoints (local emulators) work as with the default client.
pub fn http_client() -> SharedHttpClient {
    let trust = TrustStore::empty()
        .with_native_roots(false)
        .with_pem_certificate(AMAZON_TRUST_SERVICES_PEM.as_bytes());
    let context = TlsContext::builder()
        .with_trust_store(trust)
        .build()
        .expect("a trust store with PEM certificates only is always valid");
    Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .tls_context(context)
        .build_https()
}

/// The SDK configuration with [`http_client`]: [`lambda_env::from_env`] on the process's
/// environment (credentials and region as Lambda sets them), else [`load_full_chain`].
pub async fn load_config() -> SdkConfig {
    load_config_from(&Env::real()).await
}

/// [`load_config`] with `env` deciding whether the environment is enough. (The default chain,
/// when needed, reads the process's environment whatever `env` holds.)
pub async fn load_config_from(env: &Env) -> SdkConfig {
    let http = http_client();
    match lambda_env::from_env(env, http.clone()) {
        Some(config) => config,
        None => load_full_chain(http).await,
    }
}

/// `aws_config::load_defaults(latest)` with `http`: profiles, web identity, ECS, IMDS, ...
pub async fn load_full_chain(http: SharedHttpClient) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .load()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundle_holds_the_seven_roots() {
        let begins = AMAZON_TRUST_SERVICES_PEM
            .matches("-----BEGIN CERTIFICATE-----")
            .count();
        let ends = AMAZON_TRUST_SERVICES_PEM
            .matches("-----END CERTIFICATE-----")
            .count();
        assert_eq!((begins, ends), (7, 7));
        for name in ["Amazon_Root_CA_1", "Amazon_Root_CA_4", "Starfield_Services"] {
            assert!(AMAZON_TRUST_SERVICES_PEM.contains(name), "{name}");
        }
    }

    /// A local endpoint that answers one request with SQS's "no such queue" error, and hands
    /// back the request it got.
    fn one_request_server() -> (String, std::thread::JoinHandle<String>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut conn, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 65536];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                got.extend_from_slice(&buf[..n]);
            }
            let body =
                r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no such queue"}"#;
            let reply = format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/x-amz-json-1.0\r\nx-amzn-query-error: AWS.SimpleQueueService.NonExistentQueue;Sender\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            conn.write_all(reply.as_bytes()).unwrap();
            String::from_utf8_lossy(&got).into_owned()
        });
        (format!("http://{addr}"), server)
    }

    /// One `GetQueueUrl` through `client`: the request the server got, and that the answer
    /// came back as the service's error.
    async fn get_queue_url(
        client: aws_sdk_sqs::Client,
        server: std::thread::JoinHandle<String>,
    ) -> String {
        let err = client
            .get_queue_url()
            .queue_name("missing")
            .send()
            .await
            .unwrap_err();
        let request = server.join().unwrap();
        assert!(request.starts_with("POST / HTTP/1.1"), "{request}");
        assert!(request.contains("GetQueueUrl"), "{request}");
        assert!(err.into_service_error().is_queue_does_not_exist());
        request
    }

    /// The client parses every root (a bad one would panic when the connector is built) and
    /// still speaks plain HTTP to a local endpoint: a real SDK call through it reaches the
    /// server and comes back as the service's error.
    #[tokio::test]
    async fn an_sdk_client_built_on_it_reaches_a_local_endpoint() {
        let (url, server) = one_request_server();
        let config = aws_sdk_sqs::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(http_client())
            .region(aws_sdk_sqs::config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_sqs::config::Credentials::for_tests())
            .endpoint_url(url)
            .retry_config(aws_sdk_sqs::config::retry::RetryConfig::disabled())
            .build();
        get_queue_url(aws_sdk_sqs::Client::from_conf(config), server).await;
    }

    /// Lambda's variables alone make a working client: it reaches `AWS_ENDPOINT_URL_SQS` and
    /// signs with the environment's credentials, session token included.
    #[tokio::test]
    async fn a_client_from_lambdas_variables_signs_with_them_and_reaches_the_endpoint() {
        let (url, server) = one_request_server();
        let env = Env::from_slice(&[
            ("AWS_ACCESS_KEY_ID", "AKIDLAMBDA"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_SESSION_TOKEN", "session-token"),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
            ("AWS_ENDPOINT_URL_SQS", &url),
        ]);
        let config = load_config_from(&env).await;
        let request = get_queue_url(aws_sdk_sqs::Client::new(&config), server).await;
        let request = request.to_ascii_lowercase();
        assert!(
            request.contains("credential=akidlambda/") && request.contains("/eu-west-1/sqs/"),
            "{request}"
        );
        assert!(
            request.contains("x-amz-security-token: session-token"),
            "{request}"
        );
    }

    /// Without Lambda's variables (here: a profile asked for), the SDK's default chain is used.
    #[tokio::test]
    async fn anything_else_falls_back_to_the_default_chain() {
        let env = Env::from_slice(&[
            ("AWS_ACCESS_KEY_ID", "AKIDLAMBDA"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_REGION", "eu-west-1"),
            ("AWS_PROFILE", "dev"),
        ]);
        let config = load_config_from(&env).await;
        let provider = format!("{:?}", config.credentials_provider().unwrap());
        assert!(provider.contains("DefaultCredentialsChain"), "{provider}");
        assert!(config.http_client().is_some());
        let lambda = load_config_from(&Env::from_slice(&[
            ("AWS_ACCESS_KEY_ID", "AKIDLAMBDA"),
            ("AWS_SECRET_ACCESS_KEY", "secret"),
            ("AWS_REGION", "eu-west-1"),
        ]))
        .await;
        let provider = format!("{:?}", lambda.credentials_provider().unwrap());
        assert!(!provider.contains("DefaultCredentialsChain"), "{provider}");
    }
}
