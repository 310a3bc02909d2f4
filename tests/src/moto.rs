//! DynamoDB in moto (`AWS_ENDPOINT_URL`, which `scripts/test` sets when it starts moto): a fresh
//! table per call, through the real SDK client.

use std::sync::Arc;
use store_dynamodb::DynamoStore;

/// A new table named after `prefix`, as a store.
pub async fn dynamo_store(prefix: &str) -> Arc<DynamoStore> {
    dynamo_table(prefix).await.0
}

/// A new table named after `prefix`: the store and the table's name.
pub async fn dynamo_table(prefix: &str) -> (Arc<DynamoStore>, String) {
    let client = client_at(&endpoint());
    let name = format!("{prefix}-{}", uuid::Uuid::new_v4().simple());
    store_dynamodb::create_table(&client, &name).await.unwrap();
    (Arc::new(DynamoStore::new(client, name.clone())), name)
}

/// moto's address (`AWS_ENDPOINT_URL`).
pub fn endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the tests with scripts/test, which starts moto")
}

/// A DynamoDB client that reaches moto through `proxy` (a router serving `POST /`, which sees
/// each request before moto does, and may answer instead), served on a loopback port for the
/// rest of the test's runtime.
pub async fn client_through(proxy: axum::Router) -> aws_sdk_dynamodb::Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, proxy).await.unwrap() });
    client_at(&endpoint)
}

/// A DynamoDB client for the emulator at `endpoint` (moto, or a proxy in front of it).
pub fn client_at(endpoint: &str) -> aws_sdk_dynamodb::Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version_latest()
        .region(aws_types::region::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_credential_types::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .build();
    aws_sdk_dynamodb::Client::from_conf(config)
}
