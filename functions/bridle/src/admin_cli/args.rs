//! The command line of `bridle users …` and `bridle identities …` (clap). Parsing only.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Where the accounts are, and how to print. Shared by `users` and `identities`.
///
/// Which store: `--db` or `--dynamodb-table` when given; else the DynamoDB table in
/// `TABLE_NAME` when that is set (the deployed functions' variable; region and credentials from
/// the standard AWS chain); else the SQLite file in `BRIDLE_DB`; else `./bridle.db`.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// The local server's SQLite file (overrides TABLE_NAME and BRIDLE_DB).
    #[arg(
        long,
        value_name = "FILE",
        global = true,
        conflicts_with = "dynamodb_table"
    )]
    pub db: Option<PathBuf>,
    /// A DynamoDB table (overrides TABLE_NAME and BRIDLE_DB; region and credentials from the
    /// standard AWS environment).
    #[arg(long, value_name = "TABLE", global = true)]
    pub dynamodb_table: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

const EXIT_CODES: &str = "\
Store: --db FILE or --dynamodb-table NAME; else TABLE_NAME (DynamoDB, standard AWS chain) when \
set; else BRIDLE_DB; else ./bridle.db.

Exit codes: 0 done; 1 not found or bad input (unknown user, bad e-mail, unknown time zone, \
e-mail taken), with one sentence on stderr; 2 usage error; 3 the store could not be opened or \
failed.";

/// Accounts: create, list, show, pause, resume, close, and link codes for messaging apps.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct UsersArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(subcommand)]
    pub command: UsersCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum UsersCommand {
    /// Create an account (active, with the `user` role).
    #[command(after_help = EXIT_CODES)]
    Add(AddArgs),
    /// Every account, oldest first.
    #[command(after_help = EXIT_CODES)]
    List,
    /// One account and its linked messaging accounts.
    #[command(after_help = EXIT_CODES)]
    Show(Who),
    /// Hold an account: its messages are answered without any work.
    #[command(after_help = EXIT_CODES)]
    Pause(Who),
    /// Make a paused or closed account active again.
    #[command(after_help = EXIT_CODES)]
    Resume(Who),
    /// Close an account.
    #[command(after_help = EXIT_CODES)]
    Close(Who),
    /// A fresh one-time code (30 minutes) the user sends from a messaging app to link it, and
    /// the open-chat link of each enabled platform (the same channel variables as `serve`).
    #[command(after_help = EXIT_CODES)]
    LinkCode(Who),
    /// How far the account's assistant may reach for them: read (only what changes nothing),
    /// write (also changes, but no risky ones), or risky (everything; a risky call still waits
    /// for the person's yes — the default). Bites on the assistant's next call.
    #[command(after_help = EXIT_CODES)]
    Grant(GrantArgs),
}

#[derive(Debug, Clone, Args)]
pub struct GrantArgs {
    /// The account's id, or its e-mail address.
    #[arg(value_name = "ID|EMAIL")]
    pub who: String,
    /// The assistant's new grant.
    #[arg(value_enum)]
    pub grant: GrantArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GrantArg {
    Read,
    Write,
    Risky,
}

impl From<GrantArg> for transcript::Grant {
    fn from(arg: GrantArg) -> Self {
        match arg {
            GrantArg::Read => transcript::Grant::Read,
            GrantArg::Write => transcript::Grant::Write,
            GrantArg::Risky => transcript::Grant::Risky,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct AddArgs {
    /// The user's e-mail address (stored lower-case; unique).
    pub email: String,
    /// Display name (default: the e-mail's part before the @).
    #[arg(long)]
    pub name: Option<String>,
    /// IANA time zone, e.g. Europe/Paris.
    #[arg(long, default_value = "UTC")]
    pub tz: String,
    /// A role beyond `user`; repeat for more.
    #[arg(long = "role", value_name = "ROLE", value_enum)]
    pub roles: Vec<RoleArg>,
}

#[derive(Debug, Clone, Args)]
pub struct Who {
    /// The account's id, or its e-mail address.
    #[arg(value_name = "ID|EMAIL")]
    pub who: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    User,
    Admin,
    Finance,
}

/// Messaging accounts linked to users: list, unlink.
#[derive(Debug, Args)]
#[command(after_help = EXIT_CODES)]
pub struct IdentitiesArgs {
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(subcommand)]
    pub command: IdentitiesCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum IdentitiesCommand {
    /// Linked messaging accounts, by user, channel and id.
    #[command(after_help = EXIT_CODES)]
    List {
        /// Only this user's (id or e-mail address).
        #[arg(long, value_name = "ID|EMAIL")]
        user: Option<String>,
    },
    /// Unlink a messaging account: its next message is treated as from a stranger.
    #[command(after_help = EXIT_CODES)]
    Unlink {
        /// The channel: whatsapp, telegram, slack, twilio, generic.
        channel: String,
        /// The platform's id of the account (a phone number, a chat id).
        external_id: String,
    },
}
