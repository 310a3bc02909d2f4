//! `client_from_env()` honours the standard endpoint variables (`AWS_ENDPOINT_URL_BEDROCK_RUNTIME`,
//! then `AWS_ENDPOINT_URL`), so a deployment or a test can point it at another endpoint.
//!
//! The environment is process-global and setting it is `unsafe` in this edition (which the
//! workspace forbids), so this test binary has no libtest harness: run plainly, it starts the
//! fake Bedrock and re-runs itself as a child process with the variables set; the child builds
//! the client from the environment, streams one answer through it, and prints the text.

#[allow(dead_code)] // the child sends only the shared request
mod support;

use backend::{ChatModel, ModelEvent, Reply};
use backend_bedrock::{BedrockModel, client_from_env};
use fake_bedrock::{FakeBedrock, Scenario};
use futures::StreamExt;
use std::process::{Command, ExitCode};

/// Set in the child's environment; its presence makes this binary act as the child.
const CHILD: &str = "BRIDLE_CLIENT_FROM_ENV_CHILD";

fn main() -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if std::env::var_os(CHILD).is_some() {
        return runtime.block_on(child());
    }
    let cases = [
        (
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
            "the service-specific variable",
        ),
        ("AWS_ENDPOINT_URL", "the global variable"),
    ];
    let mut failed = 0;
    for (variable, what) in cases {
        match parent(&runtime, variable) {
            Ok(()) => println!("client_from_env honours {what} ({variable}) ... ok"),
            Err(problem) => {
                failed += 1;
                println!("client_from_env honours {what} ({variable}) ... FAILED\n{problem}");
            }
        }
    }
    println!(
        "client_from_env: {} passed, {failed} failed",
        cases.len() - failed
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Start the fake, run the child with `variable` pointing at it, check what both saw.
fn parent(runtime: &tokio::runtime::Runtime, variable: &str) -> Result<(), String> {
    let fake = runtime
        .block_on(FakeBedrock::start([Scenario::reply(&Reply::text(
            "hello from the fake",
        ))]))
        .map_err(|e| format!("the fake did not start: {e}"))?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // The fake keeps serving on the runtime's worker threads while this thread waits.
    let output = Command::new(exe)
        .env(CHILD, "1")
        .env(variable, fake.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_CONFIG_FILE", "/nonexistent/bridle/aws-config")
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            "/nonexistent/bridle/aws-credentials",
        )
        .env_remove(other_endpoint_variable(variable))
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .output()
        .map_err(|e| format!("the child did not run: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("the child failed:\n{stdout}\n{stderr}"));
    }
    if stdout.trim() != "hello from the fake" {
        return Err(format!("the child streamed {stdout:?}"));
    }
    let requests = fake.requests();
    match &requests[..] {
        [only] if only.model_id == "env-test-model" => Ok(()),
        other => Err(format!("the fake saw {other:?}")),
    }
}

fn other_endpoint_variable(variable: &str) -> &'static str {
    if variable == "AWS_ENDPOINT_URL" {
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME"
    } else {
        "AWS_ENDPOINT_URL"
    }
}

/// Build the client from the environment and stream one answer; print its text.
async fn child() -> ExitCode {
    let model = BedrockModel::new(client_from_env().await, "env-test-model".into());
    let stream = match model.stream(support::hi()).await {
        Ok(stream) => stream,
        Err(err) => {
            eprintln!("the stream did not open: {err:?}");
            return ExitCode::FAILURE;
        }
    };
    let mut text = String::new();
    let items: Vec<_> = stream.collect().await;
    for item in items {
        match item {
            Ok(ModelEvent::Text { text: piece }) => text.push_str(&piece),
            Ok(ModelEvent::Done { .. }) => {
                println!("{text}");
                return ExitCode::SUCCESS;
            }
            Ok(_) => {}
            Err(err) => {
                eprintln!("the stream failed: {err:?}");
                return ExitCode::FAILURE;
            }
        }
    }
    eprintln!("the stream ended without done");
    ExitCode::FAILURE
}
