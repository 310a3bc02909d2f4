//! The cold-start baseline: the smallest `lambda_runtime` function, built with the same profile
//! as the webhook (`scripts/cold-start` compares the two).

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<Value, Error>(event.payload)
    }))
    .await
}
