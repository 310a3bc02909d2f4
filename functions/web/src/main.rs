//! The web app Lambda. Wiring only: configuration, sign-in discovery and clients once per cold
//! start, the worker started beside the router, then `bridle serve`'s router answering every
//! Function URL request as a streamed response (see the crate docs for why).

use backend_bedrock::BedrockModel;
use bridle::channel_setup::ChannelSetup;
use bridle::guards::GuardOptions;
use bridle::{AppOptions, Db, OtherStore, SignInOptions, build_app, server};
use engine::EngineOptions;
use lambda_logs::InitError;
use std::process::ExitCode;
use std::sync::Arc;
use store_dynamodb::DynamoStore;
use tokio::sync::watch;
use web::config::WebConfig;

const FUNCTION: &str = "web";

/// One thread, as in the other Lambdas: Lambda gives an execution environment one request at a
/// time, and the work is I/O (DynamoDB, Bedrock, the response stream). Streaming needs no more:
/// the runtime's task that writes the response body, the worker task running the turn and the
/// handler all wait on I/O and take turns on the one thread.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    // Traces: off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (the ADOT collector layer). A
    // turn's spans go out while its response streams; what is left when Lambda freezes the
    // environment goes out when it thaws.
    let mut traces = telemetry::Traces::from_env("bridle-web");
    lambda_logs::init_with(traces.layer());
    traces.report();
    engine::trace_content(traces.settings.trace_content);
    let app = match init().await {
        Ok(app) => app,
        // To Lambda on /runtime/init/error, and one problem per line in the log.
        Err(e) => return e.report().await,
    };
    tracing::info!(channels = ?app.channels.setup, "web ready");
    // The worker runs the turn a posted message queued, while the handler streams its events;
    // it lives as long as the execution environment (Lambda freezes it between invocations).
    let (_stop, stop) = watch::channel(false);
    let _worker = server::spawn_worker(&app, stop);
    let ran = lambda_http::run_with_streaming_response(web::router(app)).await;
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "the Lambda runtime stopped");
            ExitCode::FAILURE
        }
    }
}

/// Configuration, sign-in and clients, once per cold start: every error here is a failed init.
async fn init() -> Result<server::App, InitError> {
    let env = |k: &str| std::env::var(k).ok();
    let aws = aws_roots::load_config().await;
    // The sign-in settings from Secrets Manager (BRIDLE_SECRETS_ARN), read once per cold start;
    // the environment wins over the secret.
    let secrets = secrets::load(env, &aws)
        .await
        .map_err(|e| InitError::failed(FUNCTION, e))?;
    let var = secrets.layered(env);
    let config = WebConfig::from_vars(&var)
        .map_err(|problems| InitError::misconfigured(FUNCTION, problems))?;
    let s = &config.sign_in;
    let oidc = bridle::auth::Oidc::discover(bridle::auth::OidcSettings {
        issuer: s.issuer.clone(),
        client_id: s.client_id.clone(),
        client_secret: s.client_secret.clone(),
        redirect_url: format!("{}/auth/callback", s.public_url),
    })
    .await
    .map_err(|e| InitError::failed(FUNCTION, format!("cannot set up sign-in: {e}")))?;
    let dynamo = aws_sdk_dynamodb::config::Builder::from(&aws)
        .timeout_config(aws_roots::table_deadlines())
        .build();
    let store = Arc::new(DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(dynamo),
        config.table.clone(),
    ));
    // The same SDK configuration as the table's client: Lambda's credentials and region, the
    // compiled-in Amazon roots, `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` when set.
    let model = Arc::new(BedrockModel::new(
        backend_bedrock::client(&aws),
        config.model_id.clone(),
    ));
    let channels = ChannelSetup {
        // The onboarding reply of a web job (none expected) links here.
        public_base_url: Some(format!("{}/", s.public_url)),
        open_chat: config.open_chat.clone(),
        linkable_elsewhere: config.linkable.clone(),
        ..ChannelSetup::default()
    };
    let options = AppOptions {
        // The queue and the demo notes in memory; everything else in DynamoDB (crate docs).
        db: Db::Memory,
        store: Some(OtherStore(store.clone())),
        // MCP access tokens on the same table.
        tokens: Some(store),
        mcp_rate: config.mcp_rate,
        web_write_rate: config.web_write_rate,
        web_read_rate: config.web_read_rate,
        sign_in_rate: config.sign_in_rate,
        model_id: config.model_id.clone(),
        channels,
        guards: GuardOptions {
            budget: Arc::new(config.budget.clone()),
            confirmation: config.confirmation.clone(),
            ..GuardOptions::default()
        },
        sign_in: Some(SignInOptions {
            oidc: Arc::new(oidc),
            public_url: s.public_url.clone(),
            signup: s.signup,
            session_ttl: s.session_ttl,
        }),
        engine: config.model.applied_to(EngineOptions {
            system_prompt: config.prompt.text.clone(),
            prompt_version: config.prompt.version.clone(),
            ..EngineOptions::default()
        }),
        ..AppOptions::default()
    };
    build_app(model, web::in_one_invocation(options))
        .map_err(|e| InitError::from_error(FUNCTION, Box::new(e)))
}
