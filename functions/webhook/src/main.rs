//! The webhook Lambda. Wiring only: configuration and clients once per cold start, then
//! [`webhook::lambda::handle`] per request.

use lambda_http::{Error, Request, service_fn};
use queue::QueueSettings;
use queue_sqs::SqsQueue;
use std::sync::Arc;
use webhook::Webhook;
use webhook::config::WebhookConfig;

#[tokio::main]
async fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_ansi(false)
        .without_time()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let env = |k: &str| std::env::var(k).ok();
    let (config, channels) = channels::config::with_channels(
        WebhookConfig::from_vars(env),
        channels::config::inbound(&env),
        Vec::is_empty,
        "no channel is configured: set at least one channel's webhook secret",
    )
    .map_err(|problems| {
        Error::from(format!(
            "webhook misconfigured:\n  - {}",
            problems.join("\n  - ")
        ))
    })?;
    let aws = aws_roots::load_config().await;
    let sqs = aws_sdk_sqs::Client::new(&aws);
    let queue = SqsQueue::new(sqs, config.queue_url.clone(), QueueSettings::default());
    let webhook = Webhook::new(channels, Arc::new(queue), config.max_body_bytes);
    tracing::info!(channels = ?webhook.channel_names(), "webhook ready");
    let webhook = &webhook;
    lambda_http::run(service_fn(move |req: Request| async move {
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        Ok::<_, Error>(webhook::lambda::handle(webhook, req, now_s).await)
    }))
    .await
}
