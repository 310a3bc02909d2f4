//! Test infrastructure for the Lambda bootstraps (`functions/*/src/main.rs`): a local Lambda
//! Runtime API ([`RuntimeApi`]) and a built bootstrap running against it ([`Bootstrap`]).
//!
//! The Runtime API is the one Lambda serves a custom runtime on `AWS_LAMBDA_RUNTIME_API`
//! (`/2018-06-01/runtime/invocation/next`, `.../{id}/response`, `.../{id}/error`), as an axum
//! server: it hands out the events it was given, one per `next`, then leaves `next` unanswered as
//! Lambda does while no request comes, and records every response and error posted back,
//! including a failed init (`/2018-06-01/runtime/init/error`). [`RuntimeApi::function_url`] puts
//! a local Lambda Function URL in front of it ([`function_url`]): HTTP requests become Function
//! URL events, and the bootstrap's responses, streamed ones included, go back to the HTTP client
//! as they arrive.
//!
//! [`template_env`] is the environment `infra/template.yaml` gives a function, and
//! [`moto_secret`] the Secrets Manager secret it names, so a test boots a bootstrap as deployed.
//! [`moto_proxy`] stands between an SDK client and moto, to count or cut its calls.

mod bootstrap;
pub mod function_url;
pub mod moto_proxy;
mod runtime_api;
mod template;

pub use bootstrap::{Bootstrap, Ran};
pub use runtime_api::{Posted, PostedKind, RuntimeApi};
pub use template::{TEMPLATE, moto_secret, moto_secret_rotate, template_env};

/// The emulator the AWS-path tests use (`AWS_ENDPOINT_URL`, which `scripts/test` sets when it
/// starts moto).
pub fn moto_endpoint() -> String {
    std::env::var("AWS_ENDPOINT_URL")
        .expect("AWS_ENDPOINT_URL is not set: run the tests with scripts/test, which starts moto")
}
