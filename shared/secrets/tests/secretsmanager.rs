//! Loading channel secrets from Secrets Manager, against the emulator (moto) at
//! `AWS_ENDPOINT_URL` (scripts/test starts it).

use aws_sdk_secretsmanager::Client;
use aws_sdk_secretsmanager::config::{BehaviorVersion, Credentials, Region};
use secrets::{SecretsError, load};

fn sdk_config() -> aws_config::SdkConfig {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        panic!(
            "AWS_ENDPOINT_URL is not set: these tests need the emulator. Start it with \
             `python3 scripts/moto_server_serial.py -H 127.0.0.1 -p 5000 &` and run \
             `AWS_ENDPOINT_URL=http://127.0.0.1:5000 cargo test -p secrets` (or use scripts/test)"
        )
    });
    aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(
            aws_sdk_secretsmanager::config::SharedCredentialsProvider::new(Credentials::new(
                "test",
                "test",
                None,
                None,
                "bridle-tests",
            )),
        )
        .build()
}

async fn put(name: &str, value: &str) -> String {
    let client = Client::new(&sdk_config());
    let name = format!("{name}-{}", std::process::id());
    client
        .create_secret()
        .name(&name)
        .secret_string(value)
        .send()
        .await
        .unwrap()
        .arn()
        .unwrap()
        .to_owned()
}

fn vars(arn: &str) -> impl Fn(&str) -> Option<String> + '_ {
    move |k| (k == "BRIDLE_SECRETS_ARN").then(|| arn.to_owned())
}

#[tokio::test]
async fn the_secret_supplies_what_the_environment_does_not() {
    let arn = put(
        "webhook",
        r#"{"SLACK_SIGNING_SECRET":"s3cr3t-value","TELEGRAM_SECRET_TOKEN":"from-secret"}"#,
    )
    .await;
    let secrets = load(vars(&arn), &sdk_config()).await.unwrap();
    assert_eq!(secrets.get("SLACK_SIGNING_SECRET").unwrap(), "s3cr3t-value");
    let env = |k: &str| match k {
        "TELEGRAM_SECRET_TOKEN" => Some("from-env".to_owned()),
        "SLACK_SIGNING_SECRET" => Some(String::new()),
        _ => None,
    };
    let var = secrets.layered(env);
    assert_eq!(
        var("TELEGRAM_SECRET_TOKEN").unwrap(),
        "from-env",
        "env wins"
    );
    assert_eq!(
        var("SLACK_SIGNING_SECRET").unwrap(),
        "s3cr3t-value",
        "an empty env value does not hide the secret"
    );
    assert_eq!(var("WHATSAPP_APP_SECRET"), None);
    let shown = format!("{secrets:?}");
    assert!(shown.contains("SLACK_SIGNING_SECRET") && !shown.contains("s3cr3t-value"));
}

#[tokio::test]
async fn without_the_variable_nothing_is_fetched() {
    // No endpoint is needed: an unreachable one proves no call is made.
    let config = aws_config::SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url("http://127.0.0.1:9")
        .build();
    let secrets = load(|_| None, &config).await.unwrap();
    assert!(secrets.is_empty());
}

#[tokio::test]
async fn a_missing_secret_says_what_to_check() {
    let arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:nope-AbCdEf";
    let err = load(vars(arn), &sdk_config()).await.unwrap_err();
    assert!(matches!(err, SecretsError::Fetch { .. }), "{err:?}");
    assert!(err.to_string().contains("GetSecretValue permission"));
}

#[tokio::test]
async fn a_secret_that_is_not_an_object_of_strings_is_refused_without_its_value() {
    let arn = put("not-json", "hunter2").await;
    let err = load(vars(&arn), &sdk_config()).await.unwrap_err();
    assert!(matches!(err, SecretsError::NotAnObject { .. }), "{err:?}");
    assert!(!err.to_string().contains("hunter2"));

    let arn = put("number", r#"{"TWILIO_AUTH_TOKEN": 987654}"#).await;
    let err = load(vars(&arn), &sdk_config()).await.unwrap_err();
    assert!(
        matches!(&err, SecretsError::NotAString { key, .. } if key == "TWILIO_AUTH_TOKEN"),
        "{err:?}"
    );
    assert!(!err.to_string().contains("987654"));
}
