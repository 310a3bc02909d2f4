//! The webhook Lambda. Wiring only: configuration and clients once per cold start, then
//! [`webhook::lambda::handle`] per request.

use lambda_http::{Error, Request, service_fn};
use lambda_logs::InitError;
use queue::QueueSettings;
use queue_sqs::SqsQueue;
use std::process::ExitCode;
use std::sync::Arc;
use webhook::Webhook;
use webhook::config::WebhookConfig;

/// One thread: Lambda hands an execution environment one request at a time, and each request is
/// a signature check, a parse and one SQS call. A multi-thread runtime would start a worker per
/// vCPU at every cold start for nothing; this way the bootstrap reaches the Runtime API about
/// 0.4 ms sooner (`scripts/cold-start`).
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Traces: off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (the ADOT collector layer).
    let mut traces = telemetry::Traces::from_env("bridle-webhook");
    lambda_logs::init_with(traces.layer());
    traces.report();
    let traces = &traces;
    let webhook = match init().await {
        Ok(webhook) => webhook,
        // To Lambda on /runtime/init/error, and one problem per line in the log.
        Err(e) => return e.report().await,
    };
    tracing::info!(channels = ?webhook.channel_names(), "webhook ready");
    let webhook = &webhook;
    let ran = lambda_http::run(service_fn(move |req: Request| async move {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let response = webhook::lambda::handle(webhook, req, now_ms).await;
        // Lambda may freeze the environment once this returns: export the request's spans now.
        traces.flush(TRACE_FLUSH_WAIT);
        Ok::<_, Error>(response)
    }))
    .await;
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the Lambda runtime stopped");
            ExitCode::FAILURE
        }
    }
}

/// The longest a request waits for its spans to reach the collector on localhost.
const TRACE_FLUSH_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Configuration and clients, once per cold start.
async fn init() -> Result<Webhook, InitError> {
    let env = |k: &str| std::env::var(k).ok();
    let aws = aws_roots::load_config().await;
    // Signing secrets from Secrets Manager (BRIDLE_SECRETS_ARN), read once per cold start.
    let secrets = secrets::load(env, &aws)
        .await
        .map_err(|e| InitError::failed("webhook", e))?;
    let var = secrets.layered(env);
    let (config, channels) = channels::config::with_channels(
        WebhookConfig::from_vars(&var),
        channels::config::inbound(&var),
        Vec::is_empty,
        "no channel is configured: set at least one channel's webhook secret",
    )
    .map_err(|problems| InitError::misconfigured("webhook", problems))?;
    let sqs = aws_sdk_sqs::Client::new(&aws);
    if config.warm_queue_at_init {
        warm(&sqs, &config.queue_url).await;
    }
    let queue = SqsQueue::new(sqs, config.queue_url.clone(), QueueSettings::default());
    let webhook = Webhook::new(channels, Arc::new(queue), config.max_body_bytes)
        .with_metrics(metrics::Metrics::from_vars(env));
    // A secret in Secrets Manager may be rotated while this instance runs; the environment
    // cannot change under it.
    Ok(
        match env("BRIDLE_SECRETS_ARN").filter(|v| !v.trim().is_empty()) {
            Some(_) => webhook.with_rekey(secrets_read_again(aws)),
            None => webhook,
        },
    )
}

/// The channels as the secret holds them now: read as at cold start, environment first.
fn secrets_read_again(aws: aws_config::SdkConfig) -> webhook::ReadAgain {
    Arc::new(move || {
        let aws = aws.clone();
        Box::pin(async move {
            let env = |k: &str| std::env::var(k).ok();
            let secrets = secrets::load(env, &aws).await.map_err(|e| e.to_string())?;
            let var = secrets.layered(env);
            channels::config::inbound(&var).map_err(|problems| problems.join("; "))
        })
    })
}

/// Open the queue's connection (TLS included) with one cheap call, so the first delivery does
/// not pay for it; at most 3 s, and a failure is only logged.
async fn warm(sqs: &aws_sdk_sqs::Client, queue_url: &str) {
    let call = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::FifoQueue)
        .send();
    match tokio::time::timeout(std::time::Duration::from_secs(3), call).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "could not warm the queue connection"),
        Err(_) => tracing::warn!("could not warm the queue connection within 3 s"),
    }
}
