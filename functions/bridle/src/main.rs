//! The `bridle` command. Wiring only: parse, configure, build, run.

use bridle::admin_cli::{
    self, CliError, Deps, IdentitiesArgs, StoreSource, UsersArgs, UsersCommand,
};
use bridle::budget_report::{self, Format, LedgerSource, ReportOptions};
use bridle::channel_setup::ChannelSetup;
use bridle::config::ConfigErrors;
use bridle::config::{BackendChoice, ServeConfig};
use bridle::guards::GuardOptions;
use bridle::{AppOptions, Db, backends, build_app, server};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The local server's allocator: mimalloc (see ARCHITECTURE, the `serve` profile's note).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Bridle: a chat-agent harness.
#[derive(Debug, Parser)]
#[command(name = "bridle", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run Bridle locally: web chat and API on BRIDLE_ADDR (default 127.0.0.1:8080), data in
    /// BRIDLE_DB (default ./bridle.db). The model comes from BRIDLE_BACKEND / OPENAI_* /
    /// BEDROCK_MODEL_ID / BRIDLE_SCRIPT; without one, the assistant explains how to connect it.
    Serve,
    /// A live check to run after changing the prompt, the tools or the model: an 8-message
    /// conversation (greeting, note, event, correction, a risky change and its confirmation,
    /// undo, thanks) with the configured model, on a throwaway in-memory store. Prints every
    /// reply, tool call and result, tokens, cost and latency; exits 1 on harness failures, never
    /// on the model's wording. BRIDLE_BACKEND=scripted without BRIDLE_SCRIPT plays a built-in
    /// script.
    Smoke,
    /// Budgets: usage against caps, with prices and caps and where they came from.
    #[command(subcommand)]
    Budget(BudgetCommand),
    /// Accounts: add, list, show, pause, resume, close, link codes — on the SQLite file or the
    /// DynamoDB table.
    Users(UsersArgs),
    /// Linked messaging accounts: list, unlink — on the SQLite file or the DynamoDB table.
    Identities(IdentitiesArgs),
    /// MCP access tokens for a user's AI clients: create, list, revoke.
    Tokens(admin_cli::tokens::TokensArgs),
    /// Conversations as JSON lines (both transcripts, every call record), optionally with
    /// personal data replaced by placeholders: the input of `bridle eval`.
    Export(bridle::export::cli::ExportArgs),
    /// Replay an export's user turns against the current prompt, model and tools, and report
    /// what changed (exit 1 past --max-changed).
    Eval(bridle::eval::cli::EvalArgs),
    /// Dead jobs (messages whose every attempt failed): list, retry. The local server's queue,
    /// or on AWS the SQS dead-letter queue (--dlq-url, and --queue-url to retry).
    #[command(subcommand)]
    Jobs(JobsCommand),
}

#[derive(Debug, Subcommand)]
enum JobsCommand {
    /// List the dead jobs, oldest first.
    Dead {
        /// The local server's SQLite file (default: BRIDLE_DB or ./bridle.db).
        #[arg(long)]
        db: Option<PathBuf>,
        /// On AWS: the SQS dead-letter queue's URL (the stack's DeadLetterQueueUrl output).
        #[arg(long, value_name = "URL", conflicts_with = "db")]
        dlq_url: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Put a dead job (or all) back in the queue; the running server (on AWS, the worker)
    /// answers it.
    Retry {
        /// The job's ID from `bridle jobs dead`.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        id: Option<String>,
        /// Every dead job.
        #[arg(long)]
        all: bool,
        /// The local server's SQLite file (default: BRIDLE_DB or ./bridle.db).
        #[arg(long)]
        db: Option<PathBuf>,
        /// On AWS: the SQS dead-letter queue's URL (the stack's DeadLetterQueueUrl output).
        #[arg(
            long,
            value_name = "URL",
            conflicts_with = "db",
            requires = "queue_url"
        )]
        dlq_url: Option<String>,
        /// On AWS: the queue to put them back on (the stack's QueueUrl output).
        #[arg(long, value_name = "URL", requires = "dlq_url")]
        queue_url: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum BudgetCommand {
    /// Per user and window: usage, cap, fill; the global fill; the top conversations by cost.
    /// Caps and prices come from the same BRIDLE_CAP_* / BRIDLE_PRICES_FILE variables as
    /// `serve`.
    Report(ReportArgs),
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// The local server's SQLite file (default: BRIDLE_DB or ./bridle.db).
    #[arg(long, conflicts_with = "dynamodb_table")]
    db: Option<PathBuf>,
    /// Read a DynamoDB table instead (region and credentials from the AWS environment).
    #[arg(long)]
    dynamodb_table: Option<String>,
    /// Print JSON.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print CSV.
    #[arg(long)]
    csv: bool,
    /// How many conversations to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // `bridle smoke` prints the conversation: only warnings, unless RUST_LOG asks for more.
    let level = if matches!(cli.command, Command::Smoke) {
        "warn"
    } else {
        "info"
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let set = std::env::var("TOKIO_WORKER_THREADS").ok();
    let workers = match bridle::config::async_worker_threads(set.as_deref(), cores) {
        Ok(n) => n,
        Err(problem) => {
            eprintln!("bridle: {problem}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("bridle: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Traces: off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (gRPC's exporter wants the runtime).
    let mut traces = {
        let _in_runtime = runtime.enter();
        telemetry::Traces::from_env("bridle")
    };
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into());
    let logs = tracing_subscriber::fmt::layer();
    let logs = match cli.command {
        Command::Serve => logs.with_filter(filter).boxed(),
        // Every other command's stdout is its answer (tables, JSON and CSV for scripts): logs go
        // to stderr (`budget report --json` and `jobs dead --json` got a log line first).
        _ => logs
            .with_writer(std::io::stderr)
            .with_filter(filter)
            .boxed(),
    };
    let layers: Vec<telemetry::BoxedLayer> = std::iter::once(logs).chain(traces.layer()).collect();
    tracing_subscriber::registry().with(layers).init();
    traces.report();
    engine::trace_content(traces.settings.trace_content);
    let code = run(cli.command, &runtime);
    traces.shutdown();
    code
}

fn run(command: Command, runtime: &tokio::runtime::Runtime) -> ExitCode {
    match command {
        Command::Serve => runtime.block_on(serve()),
        Command::Smoke => runtime.block_on(smoke()),
        Command::Budget(BudgetCommand::Report(args)) => runtime.block_on(report(args)),
        Command::Users(args) => runtime.block_on(users(args)),
        Command::Identities(args) => runtime.block_on(identities(args)),
        Command::Tokens(args) => runtime.block_on(tokens(args)),
        Command::Jobs(command) => runtime.block_on(jobs(command)),
        Command::Export(args) => runtime.block_on(bridle::export::cli::main(args)),
        Command::Eval(args) => runtime.block_on(bridle::eval::cli::main(args)),
    }
}

async fn jobs(command: JobsCommand) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let on_aws = match &command {
        JobsCommand::Dead {
            dlq_url: Some(dlq),
            json,
            ..
        } => Some(
            admin_cli::jobs::list_dead_sqs(
                &admin_cli::jobs::sqs_client().await,
                dlq,
                *json,
                &mut out,
            )
            .await,
        ),
        JobsCommand::Retry {
            dlq_url: Some(dlq),
            queue_url: Some(queue),
            id,
            ..
        } => Some(
            admin_cli::jobs::retry_sqs(
                &admin_cli::jobs::sqs_client().await,
                dlq,
                queue,
                id.as_deref(),
                &mut out,
            )
            .await,
        ),
        _ => None,
    };
    if let Some(done) = on_aws {
        return match done {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => admin_failed(&err),
        };
    }
    let path = |db: Option<PathBuf>| {
        db.unwrap_or_else(|| {
            PathBuf::from(std::env::var("BRIDLE_DB").unwrap_or_else(|_| "./bridle.db".into()))
        })
    };
    let db = match &command {
        JobsCommand::Dead { db, .. } | JobsCommand::Retry { db, .. } => path(db.clone()),
    };
    if !db.exists() {
        eprintln!(
            "bridle: there is no Bridle database at {}: pass --db FILE or set BRIDLE_DB.",
            db.display()
        );
        return ExitCode::from(admin_cli::EXIT_BAD_INPUT);
    }
    // Not upgraded under a running server of an older build (held while the queue opens).
    let upgrading = match admin_cli::upgrade_guard(&db, admin_cli::Opens::Queue) {
        Ok(held) => held,
        Err(err) => {
            eprintln!("bridle: {err}");
            return ExitCode::from(err.exit_code());
        }
    };
    let opened = queue_sqlite::SqliteQueue::open_beside(&db, queue::QueueSettings::default());
    drop(upgrading);
    let queue = match opened {
        Ok(q) => q,
        Err(err) => {
            fail("cannot open the job queue", &err);
            return ExitCode::from(admin_cli::EXIT_STORE);
        }
    };
    let done = match command {
        JobsCommand::Dead { json, .. } => admin_cli::jobs::list_dead(&queue, json, &mut out),
        JobsCommand::Retry { id: None, .. } => admin_cli::jobs::retry(&queue, None, &mut out),
        JobsCommand::Retry { id: Some(id), .. } => match id.parse() {
            Ok(seq) => admin_cli::jobs::retry(&queue, Some(seq), &mut out),
            Err(_) => Err(CliError::Refused(format!(
                "There is no dead job {id} (bridle jobs dead lists them)."
            ))),
        },
    };
    match done {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => admin_failed(&err),
    }
}

async fn users(args: UsersArgs) -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    // Only a link code needs the channels (which apps are on, their open-chat links).
    let channels = if matches!(args.command, UsersCommand::LinkCode(_)) {
        match ChannelSetup::from_vars(&env, &reqwest::Client::new()) {
            Ok(c) => c,
            Err(problems) => {
                eprintln!("{}", ConfigErrors(problems));
                return ExitCode::from(admin_cli::EXIT_BAD_INPUT);
            }
        }
    } else {
        ChannelSetup::default()
    };
    // Adding the first user may create the SQLite file; every other command needs it.
    let create = matches!(args.command, UsersCommand::Add(_));
    let deps = match admin_deps(&args.store, create, channels).await {
        Ok(d) => d,
        Err(err) => return admin_failed(&err),
    };
    let mut out = std::io::stdout().lock();
    match admin_cli::run_users(&args.command, &deps, &mut out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => admin_failed(&err),
    }
}

async fn identities(args: IdentitiesArgs) -> ExitCode {
    let deps = match admin_deps(&args.store, false, ChannelSetup::default()).await {
        Ok(d) => d,
        Err(err) => return admin_failed(&err),
    };
    let mut out = std::io::stdout().lock();
    match admin_cli::run_identities(&args.command, &deps, &mut out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => admin_failed(&err),
    }
}

async fn tokens(args: admin_cli::tokens::TokensArgs) -> ExitCode {
    let source = StoreSource::choose(&args.store, &|k| std::env::var(k).ok());
    let (store, tokens) = match admin_cli::tokens::open_token_store(&source).await {
        Ok(opened) => opened,
        Err(err) => return admin_failed(&err),
    };
    let deps = admin_cli::tokens::TokenDeps {
        store,
        tokens,
        format: if args.store.json {
            admin_cli::Format::Json
        } else {
            admin_cli::Format::Table
        },
        clock: budget::system_clock(),
    };
    let mut out = std::io::stdout().lock();
    match admin_cli::tokens::run_tokens(&args.command, &deps, &mut out).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => admin_failed(&err),
    }
}

async fn admin_deps(
    args: &admin_cli::StoreArgs,
    create: bool,
    channels: ChannelSetup,
) -> Result<Deps, CliError> {
    let source = StoreSource::choose(args, &|k| std::env::var(k).ok());
    let (store, tokens) = admin_cli::open_store_with_tokens(&source, create).await?;
    Ok(Deps {
        store,
        tokens,
        format: if args.json {
            admin_cli::Format::Json
        } else {
            admin_cli::Format::Table
        },
        channels,
        clock: budget::system_clock(),
    })
}

/// One line on stderr; the exit code says what kind of failure it was.
fn admin_failed(err: &CliError) -> ExitCode {
    let mut message = format!("bridle: {err}");
    let mut source = std::error::Error::source(err).and_then(|s| s.source());
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    eprintln!("{message}");
    ExitCode::from(err.exit_code())
}

async fn report(args: ReportArgs) -> ExitCode {
    let config = match budget::BudgetConfig::from_vars(|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(err) => return fail("the budget settings are not valid", &err),
    };
    let source = match args.dynamodb_table {
        Some(table) => LedgerSource::DynamoDb { table },
        None => LedgerSource::Sqlite(args.db.unwrap_or_else(|| {
            PathBuf::from(std::env::var("BRIDLE_DB").unwrap_or_else(|_| "./bridle.db".into()))
        })),
    };
    // Not upgraded under a running server of an older build (held while the store opens).
    let upgrading = match &source {
        LedgerSource::Sqlite(path) => match admin_cli::upgrade_guard(path, admin_cli::Opens::Store)
        {
            Ok(held) => held,
            Err(err) => {
                eprintln!("bridle: {err}");
                return ExitCode::from(err.exit_code());
            }
        },
        LedgerSource::DynamoDb { .. } => None,
    };
    let ledger = match budget_report::open_ledger(&source).await {
        Ok(l) => l,
        Err(err) => return fail("cannot open the budget ledger", &err),
    };
    drop(upgrading);
    let options = ReportOptions {
        format: if args.json {
            Format::Json
        } else if args.csv {
            Format::Csv
        } else {
            Format::Table
        },
        top: args.top,
        now_ms: (budget::system_clock())(),
    };
    match budget_report::report(ledger.as_ref(), &config, &options).await {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(err) => fail("cannot read the budget ledger", &err),
    }
}

async fn smoke() -> ExitCode {
    let config = match bridle::smoke::SmokeConfig::from_vars(|k| std::env::var(k).ok()) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!(
                "bridle smoke is not configured correctly:\n  - {}",
                errors.0.join("\n  - ")
            );
            return ExitCode::from(2);
        }
    };
    let (model, model_id): (Arc<dyn backend::ChatModel>, String) = match &config.backend {
        None => (
            Arc::new(bridle::smoke::script::BuiltInScript::default()),
            "scripted".into(),
        ),
        Some(choice) => match backends::model_for(choice).await {
            Ok(m) => m,
            Err(err) => return fail("cannot set up the model", &err),
        },
    };
    let mut out = std::io::stdout();
    match bridle::smoke::run(model, &model_id, &config, &mut out).await {
        Ok(findings) if findings.failures.is_empty() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(err) => fail("cannot start the smoke check", &err),
    }
}

async fn serve() -> ExitCode {
    let env = |k: &str| std::env::var(k).ok();
    let http = match reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(err) => return fail("cannot build the HTTP client", &err),
    };
    let (config, mut channels) = match (
        ServeConfig::from_vars(env),
        ChannelSetup::from_vars(&env, &http),
    ) {
        (Ok(c), Ok(ch)) => (c, ch),
        (config, channels) => {
            let mut problems = config.err().map(|e| e.0).unwrap_or_default();
            problems.extend(channels.err().unwrap_or_default());
            eprintln!("{}", ConfigErrors(problems));
            return ExitCode::from(2);
        }
    };
    if channels.public_base_url.is_none() {
        // The onboarding reply links to the web app: where people sign in, if configured.
        channels.public_base_url = Some(match &config.sign_in {
            Some(s) => format!("{}/", s.public_url),
            None => format!("http://{}/", config.addr),
        });
    }
    let sign_in = match &config.sign_in {
        None => None,
        Some(s) => {
            let settings = bridle::auth::OidcSettings {
                issuer: s.issuer.clone(),
                client_id: s.client_id.clone(),
                client_secret: s.client_secret.clone(),
                redirect_url: format!("{}/auth/callback", s.public_url),
            };
            match bridle::auth::Oidc::discover(settings).await {
                Ok(oidc) => Some(bridle::SignInOptions {
                    oidc: Arc::new(oidc),
                    public_url: s.public_url.clone(),
                    signup: s.signup,
                    session_ttl: s.session_ttl,
                }),
                Err(err) => return fail("cannot set up sign-in", &err),
            }
        }
    };
    tracing::info!(?channels, "channels");
    tracing::info!(?config, "starting");
    let (model, model_id) = match backends::model_for(&config.backend).await {
        Ok(m) => m,
        Err(err) => return fail("cannot set up the model", &err),
    };
    let options = AppOptions {
        db: Db::File(config.db.clone()),
        model_id,
        max_message_chars: config.max_message_chars,
        max_concurrent_turns: config.max_concurrent_turns,
        shutdown_grace: config.shutdown_grace,
        http: config.http,
        channels,
        guards: GuardOptions {
            budget: Arc::new(config.budget.clone()),
            no_model: (config.backend == BackendChoice::None)
                .then(|| backends::UNPLUGGED.to_owned()),
            confirmation: config.confirmation.clone(),
            ..GuardOptions::default()
        },
        admin_token: config.admin_token.clone(),
        mcp_rate: config.mcp_rate,
        web_write_rate: config.web_write_rate,
        web_read_rate: config.web_read_rate,
        sign_in_rate: config.sign_in_rate,
        trusted_proxies: config.trusted_proxies.clone(),
        streams_per_user: config.streams_per_user,
        sign_in,
        engine: config.model.applied_to(engine::EngineOptions {
            system_prompt: config.prompt.text.clone(),
            prompt_version: config.prompt.version.clone(),
            ..engine::EngineOptions::default()
        }),
        ..AppOptions::default()
    };
    // One server per database: held until the process ends, not only until `serve` returns (a
    // turn cut short by the stop may still run on the runtime while it shuts down; a server
    // started meanwhile would run that job again).
    let lock = match bridle::serve_lock::take(&config.db) {
        Ok(lock) => lock,
        Err(err) => return fail("cannot start", &err),
    };
    std::mem::forget(lock);
    // The port first: a start that cannot listen changes nothing in the database (building the
    // app releases a dead server's claims and makes its jobs visible again).
    let listener = match tokio::net::TcpListener::bind(config.addr).await {
        Ok(l) => l,
        Err(err) => return fail(&format!("cannot listen on {}", config.addr), &err),
    };
    let app = match build_app(model, options) {
        Ok(app) => app,
        Err(err) => return fail("cannot start", &err),
    };
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    println!("Bridle is running. Open http://{addr}/ in your browser (Ctrl-C stops it).");
    // SIGTERM is what systemd, Docker and Kubernetes send; SIGINT is Ctrl-C. Both drain.
    let shutdown = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            },
            Err(err) => {
                tracing::warn!(%err, "cannot listen for SIGTERM; only Ctrl-C stops the server");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        tracing::info!("shutting down; letting running turns finish");
    };
    match server::run(listener, app, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail("the server stopped", &err),
    }
}

fn fail(what: &str, err: &dyn std::error::Error) -> ExitCode {
    let mut message = format!("bridle: {what}: {err}");
    let mut source = err.source();
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    eprintln!("{message}");
    ExitCode::FAILURE
}
