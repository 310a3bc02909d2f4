//! Shared by the integration tests that need moto (`scripts/test` starts it).

/// A DynamoDB store on a fresh table in moto (`AWS_ENDPOINT_URL`), named `<prefix>-<uuid>`.
pub async fn moto_dynamo_store(prefix: &str) -> store_dynamodb::DynamoStore {
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run with scripts/test (starts moto)");
    let client = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::Config::builder()
            .behavior_version_latest()
            .region(aws_types::region::Region::new("us-east-1"))
            .endpoint_url(&endpoint)
            .credentials_provider(aws_credential_types::Credentials::new(
                "test", "test", None, None, "tests",
            ))
            .build(),
    );
    let table = format!("{prefix}-{}", uuid::Uuid::new_v4().simple());
    store_dynamodb::create_table(&client, &table).await.unwrap();
    store_dynamodb::DynamoStore::new(client, table)
}
