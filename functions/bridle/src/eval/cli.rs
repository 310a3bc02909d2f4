//! `bridle eval` on the command line: the arguments, and the wiring from the environment (the
//! model) and the file to an [`super::Evaluator`].

use super::config::{EvalConfig, engine_for};
use super::{Evaluator, read_export};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit code: more turns changed than `--max-changed` allows.
pub const EXIT_CHANGED: u8 = 1;
/// Exit code: the evaluation could not run (the file, the model settings).
pub const EXIT_CANNOT_RUN: u8 = 3;

const AFTER_HELP: &str = "\
Replays each recorded user turn of an export against the current prompt, model and tools: the \
recorded history and context block, tools answered from the recorded results (nothing runs; a \
changed call gets a \"not recorded\" error). Reports per turn and in total: tool calls (names, \
arguments), stop reasons, reply length, tokens and estimated cost, and turns that now fail.

A turn is changed when its tool calls, its last stop reason or whether it fails differ.

The model: as for `bridle serve` (OPENAI_*, BEDROCK_MODEL_ID, BRIDLE_BACKEND, BRIDLE_SCRIPT, \
BRIDLE_MODEL_*). BRIDLE_BACKEND=scripted without BRIDLE_SCRIPT plays the recorded answers back: \
an export evaluated as it is shows no change.

Exit codes: 0 at most --max-changed turns changed; 1 more changed; 2 usage error; 3 the file or \
the model settings are not usable.";

/// Replay recorded conversations against the current prompt, model and tools.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct EvalArgs {
    /// An export from `bridle export` (JSON lines).
    pub file: PathBuf,
    /// A system prompt file to try (default: BRIDLE_SYSTEM_PROMPT_FILE, else the built-in one).
    #[arg(long, value_name = "FILE")]
    pub prompt: Option<PathBuf>,
    /// A model id to try instead of OPENAI_MODEL / BEDROCK_MODEL_ID.
    #[arg(long, value_name = "MODEL")]
    pub model: Option<String>,
    /// Print JSON (format bridle-eval/1).
    #[arg(long)]
    pub json: bool,
    /// How many changed turns still pass (exit 0).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_changed: usize,
}

/// Run `bridle eval`.
pub async fn main(args: EvalArgs) -> ExitCode {
    let config = match EvalConfig::from_vars(
        |k| std::env::var(k).ok(),
        args.model.as_deref(),
        args.prompt.as_deref(),
    ) {
        Ok(c) => c,
        Err(problems) => {
            eprintln!("{problems}");
            return ExitCode::from(EXIT_CANNOT_RUN);
        }
    };
    let text = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(err) => {
            eprintln!("bridle: cannot read {}: {err}", args.file.display());
            return ExitCode::from(EXIT_CANNOT_RUN);
        }
    };
    let conversations = match read_export(&text) {
        Ok(c) => c,
        Err(err) => {
            eprintln!("bridle: {}: {err}.", args.file.display());
            return ExitCode::from(EXIT_CANNOT_RUN);
        }
    };
    let (engine, answerer) = match engine_for(&config).await {
        Ok(built) => built,
        Err(err) => {
            let mut message = format!("bridle: cannot set up the model: {err}");
            let mut source = std::error::Error::source(&err);
            while let Some(s) = source {
                message.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("{message}");
            return ExitCode::from(EXIT_CANNOT_RUN);
        }
    };
    let evaluator = Evaluator {
        engine: &engine,
        answerer,
        prices: &config.serve.budget.prices,
    };
    let report = evaluator
        .run(&conversations)
        .await
        .with_threshold(args.max_changed);
    let text = if args.json {
        report.json()
    } else {
        report.table()
    };
    if std::io::stdout().lock().write_all(text.as_bytes()).is_err() {
        return ExitCode::from(EXIT_CANNOT_RUN);
    }
    if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CHANGED)
    }
}
