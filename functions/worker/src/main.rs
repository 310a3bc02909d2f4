//! The worker Lambda. Wiring only: configuration and clients once per cold start, then
//! [`Worker::handle_batch`] per SQS batch.

use aws_lambda_events::sqs::{SqsBatchResponse, SqsEvent};
use backend_bedrock::BedrockModel;
use engine::EngineOptions;
use lambda_logs::InitError;
use lambda_runtime::{Error, LambdaEvent, service_fn};
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use store_dynamodb::DynamoStore;
use tools::Registry;
use worker::config::WorkerConfig;
use worker::{ChannelJobs, JobOptions, Worker, WorkerOptions};

/// One thread, as in the webhook: Lambda gives an execution environment one batch at a time,
/// and the worker runs its records one after another (FIFO order), so a worker thread per vCPU
/// would only add to each cold start.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Traces: off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (the ADOT collector layer).
    let mut traces = telemetry::Traces::from_env("bridle-worker");
    lambda_logs::init_with(traces.layer());
    traces.report();
    engine::trace_content(traces.settings.trace_content);
    let traces = &traces;
    let worker = match init().await {
        Ok(worker) => worker,
        // To Lambda on /runtime/init/error, and one problem per line in the log.
        Err(e) => return InitError::from_error("worker", e).report().await,
    };
    tracing::info!(jobs = ?worker.jobs, "worker ready");
    let worker = &worker;
    let ran = lambda_runtime::run(service_fn(move |event: LambdaEvent<SqsEvent>| async move {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let left = Duration::from_millis(event.context.deadline.saturating_sub(now_ms));
        let deadline = tokio::time::Instant::now() + left;
        let response = worker.handle_batch(event.payload, deadline).await;
        // Lambda may freeze the environment once this returns: export the batch's spans now.
        traces.flush(TRACE_FLUSH_WAIT);
        Ok::<SqsBatchResponse, Error>(response)
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

/// The longest a batch waits for its spans to reach the collector on localhost.
const TRACE_FLUSH_WAIT: Duration = Duration::from_secs(1);

/// Configuration and clients, once per cold start: every error here is a failed init.
async fn init() -> Result<Worker, Error> {
    let env = |k: &str| std::env::var(k).ok();
    let aws = aws_roots::load_config().await;
    // Reply credentials from Secrets Manager (BRIDLE_SECRETS_ARN), read once per cold start.
    let secrets = secrets::load(env, &aws)
        .await
        .map_err(|e| InitError::failed("worker", e))?;
    let var = secrets.layered(env);
    let http = worker::http::client().map_err(|e| InitError::failed("worker", e))?;
    // Every problem with the settings at once, and only what is actually wrong.
    let mut problems = Vec::new();
    let channels = channels::config::with_channels(
        WorkerConfig::from_vars(&var),
        channels::config::senders(&var, &http),
        HashMap::is_empty,
        "no reply channel is configured: set at least one channel's credentials",
    )
    .map_err(|p| problems.extend(p));
    let media = worker::media::attachments(&var, &aws).map_err(|p| problems.extend(p));
    let budget_config =
        budget::BudgetConfig::from_vars(&var).map_err(|e| problems.push(e.to_string()));
    let confirmation =
        engine::ConfirmationOptions::from_vars(&var).map_err(|problem| problems.push(problem));
    let (Ok((config, senders)), Ok(media), Ok(budget_config), Ok(confirmation)) =
        (channels, media, budget_config, confirmation)
    else {
        return Err(InitError::misconfigured("worker", problems).into());
    };
    let estimate_usd: channel_jobs::EstimateUsd = {
        let (prices, model) = (budget_config.prices.clone(), config.model_id.clone());
        Arc::new(move |usage| prices.cost(&model, usage) as f64 / 1e6)
    };
    let dynamo = aws_sdk_dynamodb::config::Builder::from(&aws)
        .timeout_config(aws_roots::table_deadlines())
        .build();
    let store = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(dynamo),
        config.table.clone(),
    ));
    // The same SDK configuration as the other clients: Lambda's credentials and region, the
    // compiled-in Amazon roots, `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` when set.
    let mut model = BedrockModel::new(backend_bedrock::client(&aws), config.model_id.clone());
    // Anthropic's models read no S3 location: attachments go to them as bytes, read back from
    // the media bucket.
    if let Some(media) = &media {
        let bytes = channel_jobs::attachments::MediaBytes(media.store.clone());
        model = model.with_media(Arc::new(bytes));
    }
    let model = Arc::new(model);
    // The same assembly as `bridle serve` (DESIGN.md invariant 11).
    let assembled = assembly::assemble(assembly::Parts {
        model,
        store: store.clone(),
        registry: Registry::default(),
        risk: None,
        engine: config.model.applied_to(EngineOptions {
            model_id: config.model_id.clone(),
            system_prompt: config.prompt.text.clone(),
            prompt_version: config.prompt.version.clone(),
            ..EngineOptions::default()
        }),
        guards: assembly::GuardOptions {
            budget: Arc::new(budget_config),
            confirmation,
            ..assembly::GuardOptions::default()
        },
    })?;
    let worker = Worker {
        jobs: ChannelJobs {
            engine: assembled.engine,
            store,
            senders,
            options: JobOptions {
                signup_url: config.public_base_url.clone(),
                lobby_retention: config.lobby_retention,
                metrics: metrics::Metrics::from_vars(env),
                media,
                estimate_usd: Some(estimate_usd),
                confirm_code_key: channel_jobs::confirm_code_key(&var),
                ..JobOptions::default()
            },
        },
        options: WorkerOptions {
            // A failed record's backoff, on the queue its record names (IAM:
            // sqs:ChangeMessageVisibility on the turn queue).
            sqs: Some(aws_sdk_sqs::Client::new(&aws)),
            ..WorkerOptions::default()
        },
    };
    Ok(worker)
}
