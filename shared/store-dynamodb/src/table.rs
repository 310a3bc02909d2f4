//! Creating the table: for tests and local set-up. Deployed tables come from the
//! infrastructure templates, which must declare the same keys, indexes and TTL.

use crate::error::unavailable;
use crate::keys::{GSI1, GSI1PK, GSI1SK, LSI1, LSI1SK, PK, SK, TTL};
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::client::Waiters;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, Projection, ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use std::time::Duration;
use store::StoreError;

/// How long to wait for a new table to become active.
const ACTIVE_WITHIN: Duration = Duration::from_secs(300);

/// Create `table` with the layout the store expects (see the crate docs), wait until it is
/// active, and turn on TTL on `ttl`. [`StoreError::Conflict`] when the table exists already.
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    let created = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(string_attribute(PK)?)
        .attribute_definitions(string_attribute(SK)?)
        .attribute_definitions(string_attribute(GSI1PK)?)
        .attribute_definitions(string_attribute(GSI1SK)?)
        .attribute_definitions(string_attribute(LSI1SK)?)
        .key_schema(key(PK, KeyType::Hash)?)
        .key_schema(key(SK, KeyType::Range)?)
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(GSI1)
                .key_schema(key(GSI1PK, KeyType::Hash)?)
                .key_schema(key(GSI1SK, KeyType::Range)?)
                .projection(all_attributes())
                .build()
                .map_err(unavailable)?,
        )
        .local_secondary_indexes(
            LocalSecondaryIndex::builder()
                .index_name(LSI1)
                .key_schema(key(PK, KeyType::Hash)?)
                .key_schema(key(LSI1SK, KeyType::Range)?)
                .projection(all_attributes())
                .build()
                .map_err(unavailable)?,
        )
        .send()
        .await;
    if let Err(err) = created {
        return Err(
            if err
                .as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception())
            {
                StoreError::Conflict {
                    what: format!("table {table}"),
                }
            } else {
                unavailable(err)
            },
        );
    }
    client
        .wait_until_table_exists()
        .table_name(table)
        .wait(ACTIVE_WITHIN)
        .await
        .map_err(unavailable)?;
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .attribute_name(TTL)
                .enabled(true)
                .build()
                .map_err(unavailable)?,
        )
        .send()
        .await
        .map_err(unavailable)?;
    Ok(())
}

fn string_attribute(name: &str) -> Result<AttributeDefinition, StoreError> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(unavailable)
}

fn key(name: &str, key_type: KeyType) -> Result<KeySchemaElement, StoreError> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(key_type)
        .build()
        .map_err(unavailable)
}

fn all_attributes() -> Projection {
    Projection::builder()
        .projection_type(ProjectionType::All)
        .build()
}
