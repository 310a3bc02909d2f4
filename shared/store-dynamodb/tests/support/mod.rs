//! Clients and fresh tables on the DynamoDB emulator (`moto_server`) the tests talk to.

// Each test crate uses a different part of this module.
#![allow(dead_code)]

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use std::time::Duration;
use store_dynamodb::{DynamoStore, create_table};

/// A client for the emulator at `AWS_ENDPOINT_URL`, with static test credentials (no IMDS,
/// no profile files, nothing beyond that endpoint).
pub fn client() -> Client {
    let endpoint = std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        panic!(
            "AWS_ENDPOINT_URL is not set: these tests need the DynamoDB emulator. Start it with \
             `python3 scripts/moto_server_serial.py -H 127.0.0.1 -p 5000 &` \
             (moto_server with DynamoDB requests serialised; `pip install 'moto[server]'` first) \
             and run `AWS_ENDPOINT_URL=http://127.0.0.1:5000 cargo test -p store-dynamodb`"
        )
    });
    client_for(&endpoint)
}

pub fn client_for(endpoint: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(Credentials::new("test", "test", None, None, "bridle-tests"))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(5))
                .operation_timeout(Duration::from_secs(60))
                .build(),
        )
        .build();
    Client::from_conf(config)
}

/// A uniquely named table of its own, so tests run in parallel.
pub fn table_name() -> String {
    format!("bridle-test-{}", uuid::Uuid::new_v4())
}

/// A store on a fresh, empty table.
pub async fn fresh_store() -> DynamoStore {
    let client = client();
    let table = table_name();
    create_table(&client, &table)
        .await
        .unwrap_or_else(|e| panic!("creating table {table} on the emulator failed: {e:?}"));
    DynamoStore::new(client, table)
}
