//! A second cold-start baseline: [`hello_lambda`](hello_lambda.rs) on a current-thread Tokio
//! runtime, as the webhook runs. `scripts/cold-start` reports the webhook against both, so the
//! part of its start that the runtime flavour saves is visible apart from the rest.

use lambda_runtime::{Error, LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<Value, Error>(event.payload)
    }))
    .await
}
