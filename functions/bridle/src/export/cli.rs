//! `bridle export` on the command line: the arguments, and the wiring from the environment
//! (which store) to [`super::export`].

use super::{ExportOptions, export, parse_since};
use crate::admin_cli::{self, CliError, StoreArgs, StoreSource};
use clap::Args;
use std::process::ExitCode;

const AFTER_HELP: &str = "\
One JSON object per line and conversation (format bridle-export/1): the conversation, its model \
transcript segment by segment (every call record and tool result), and what the user saw. \
Feed it to `bridle eval`.

Store: --db FILE or --dynamodb-table NAME; else TABLE_NAME (DynamoDB) when set; else BRIDLE_DB; \
else ./bridle.db.

Exit codes: 0 done; 1 unknown user or conversation, or a bad --since; 2 usage error; 3 the store \
could not be opened or failed.";

/// Conversations as JSON lines, for `bridle eval` or analysis.
#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ExportArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    /// Only this user's conversations (id or e-mail address).
    #[arg(long, value_name = "ID|EMAIL")]
    pub user: Option<String>,
    /// Only conversations with a message since then: a date (2026-11-01, UTC) or a duration
    /// back from now (7d, 12h, 30m).
    #[arg(long, value_name = "DATE|DURATION")]
    pub since: Option<String>,
    /// Only this conversation.
    #[arg(long, value_name = "ID")]
    pub conversation: Option<String>,
    /// Replace personal data by placeholders (<person-1>, <email-1>, <phone-1>, <handle-1>):
    /// names, e-mail addresses and channel ids from the accounts and linked accounts, and
    /// anything shaped like an e-mail address or a phone number — context blocks and tool
    /// data included.
    #[arg(long)]
    pub redact: bool,
}

/// Run `bridle export`.
pub async fn main(args: ExportArgs) -> ExitCode {
    let now_ms = (budget::system_clock())();
    let since_ms = match args.since.as_deref().map(|s| parse_since(s, now_ms)) {
        Some(Err(problem)) => return failed(&CliError::Refused(problem)),
        Some(Ok(ms)) => Some(ms),
        None => None,
    };
    let source = StoreSource::choose(&args.store, &|k| std::env::var(k).ok());
    let store = match admin_cli::open_store(&source, false).await {
        Ok(s) => s,
        Err(err) => return failed(&err),
    };
    let options = ExportOptions {
        user: args.user,
        since_ms,
        conversation: args.conversation,
        redact: args.redact,
    };
    let mut out = std::io::stdout().lock();
    match export(store.as_ref(), &options, &mut out).await {
        Ok(n) => {
            eprintln!("bridle: exported {n} conversation(s).");
            ExitCode::SUCCESS
        }
        Err(err) => failed(&err),
    }
}

fn failed(err: &CliError) -> ExitCode {
    let mut message = format!("bridle: {err}");
    let mut source = std::error::Error::source(err).and_then(|s| s.source());
    while let Some(s) = source {
        message.push_str(&format!(": {s}"));
        source = s.source();
    }
    eprintln!("{message}");
    ExitCode::from(err.exit_code())
}
