//! `bridle users …` and `bridle identities …`: the built binary on a temp SQLite file and on a
//! DynamoDB table in moto (exit codes, stdout, stderr), and the commands called directly.
//!
//! The DynamoDB tests need `AWS_ENDPOINT_URL` (moto), as `scripts/test` sets it.

use bridle::admin_cli::{
    self, CliError, Deps, Format, IdentitiesCommand, StoreArgs, StoreSource, UsersCommand,
};
use bridle::channel_setup::ChannelSetup;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use store::{AccountStatus, Email, Store};
use store_dynamodb::DynamoStore;
use store_sqlite::SqliteStore;

/// Which store the binary is pointed at.
#[derive(Debug, Clone)]
enum Target {
    Sqlite(PathBuf),
    Dynamo(String),
}

impl Target {
    fn args(&self) -> Vec<String> {
        match self {
            Target::Sqlite(path) => vec!["--db".into(), path.display().to_string()],
            Target::Dynamo(table) => vec!["--dynamodb-table".into(), table.clone()],
        }
    }
}

/// What a run of the binary did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        assert_eq!(self.code, 0, "expected success: {self:?}");
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }

    /// A refusal: exit 1, nothing on stdout, one line on stderr containing `words`.
    fn refused(&self, words: &str) {
        assert_eq!(self.code, 1, "expected exit 1: {self:?}");
        assert!(self.stdout.is_empty(), "nothing on stdout: {self:?}");
        let line = self.stderr.trim_end();
        assert!(!line.contains('\n'), "one line on stderr: {self:?}");
        assert!(
            line.starts_with("bridle: ") && line.ends_with('.'),
            "a sentence: {self:?}"
        );
        assert!(line.contains(words), "stderr must say {words:?}: {self:?}");
    }
}

/// Run the built `bridle` with `args` and the target's store flags, in a clean environment
/// (plus `env`).
fn bridle(target: &Target, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bridle"));
    cmd.args(args).args(target.args());
    for var in ["TABLE_NAME", "BRIDLE_DB", "RUST_LOG"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let out = cmd.output().expect("run bridle");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A database path in a fresh directory (not created): the directory, removed with the file and
/// its WAL companions when dropped (pass or fail), and the path.
fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = temp_dir();
    let path = dir.path().join("bridle.db");
    (dir, path)
}

/// A fresh directory, removed when dropped.
fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("bridle-admin-cli-")
        .tempdir()
        .unwrap()
}

fn moto() -> String {
    std::env::var("AWS_ENDPOINT_URL").unwrap_or_else(|_| {
        panic!("AWS_ENDPOINT_URL is not set: run these tests through scripts/test (moto)")
    })
}

/// A client for moto with the test credentials `scripts/test` exports.
async fn dynamo_client() -> aws_sdk_dynamodb::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .endpoint_url(moto())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "static",
        ))
        .load()
        .await;
    aws_sdk_dynamodb::Client::new(&config)
}

/// A fresh table in moto, and the store on it.
async fn fresh_table() -> (String, Arc<dyn Store>) {
    let client = dynamo_client().await;
    let table = format!("bridle-admin-cli-{}", uuid::Uuid::new_v4());
    store_dynamodb::create_table(&client, &table).await.unwrap();
    (table.clone(), Arc::new(DynamoStore::new(client, table)))
}

/// The binary's environment for moto (the standard AWS chain reads these).
fn aws_env() -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", moto()),
        ("AWS_ACCESS_KEY_ID", "test".into()),
        ("AWS_SECRET_ACCESS_KEY", "test".into()),
        ("AWS_REGION", "us-east-1".into()),
        ("AWS_EC2_METADATA_DISABLED", "true".into()),
    ]
}

/// Telegram switched on (webhook secret + bot token) with its bot name, for link-code links.
const TELEGRAM: [(&str, &str); 3] = [
    ("TELEGRAM_SECRET_TOKEN", "s3cret-0123456789abcdef0123456789"),
    ("TELEGRAM_BOT_TOKEN", "123456:ABC-def"),
    ("TELEGRAM_BOT_USERNAME", "BridleBot"),
];

/// Every subcommand through the binary, good input and bad, on one store. `store` is the same
/// store opened in the test, to bind an identity and check what the binary wrote.
async fn every_subcommand(target: Target, store: Arc<dyn Store>, env: &[(&str, &str)]) {
    let run = |args: &[&str]| bridle(&target, args, env);

    // users add
    let ada = run(&[
        "users",
        "add",
        "Ada@Example.org",
        "--name",
        "Ada Lovelace",
        "--tz",
        "Europe/Paris",
        "--role",
        "admin",
        "--role",
        "finance",
        "--json",
    ])
    .json();
    assert_eq!(ada["email"], "ada@example.org", "stored lower-case");
    assert_eq!(ada["name"], "Ada Lovelace");
    assert_eq!(ada["time_zone"], "Europe/Paris");
    assert_eq!(ada["status"], "active");
    assert_eq!(
        ada["roles"],
        serde_json::json!(["user", "admin", "finance"])
    );
    let ada_id = ada["id"].as_str().unwrap().to_owned();
    let stored = store
        .account(&ada_id.as_str().into())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.email, Some(Email::parse("ada@example.org").unwrap()));

    let bob = run(&["users", "add", "bob@example.org"]);
    assert_eq!(bob.code, 0, "{bob:?}");
    assert!(bob.stdout.contains("bob@example.org") && bob.stdout.contains("UTC"));

    run(&["users", "add", "ADA@example.org"]).refused("already belongs to an account");
    run(&["users", "add", "not-an-email"]).refused("is not an e-mail address");
    run(&["users", "add", "carl@example.org", "--tz", "Mars/Olympus"])
        .refused("is not a known time zone");
    run(&["users", "add", "carl@example.org", "--name", "  "]).refused("must not be empty");
    let usage = run(&["users", "add", "carl@example.org", "--role", "root"]);
    assert_eq!(usage.code, 2, "an unknown role is a usage error: {usage:?}");
    assert!(usage.stderr.contains("possible values"), "{usage:?}");

    // users list
    let list = run(&["users", "list", "--json"]).json();
    let emails: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["email"].as_str().unwrap())
        .collect();
    assert_eq!(
        emails,
        ["ada@example.org", "bob@example.org"],
        "oldest first"
    );
    let table = run(&["users", "list"]);
    assert_eq!(table.code, 0);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("EMAIL"),
        "{table:?}"
    );
    assert!(lines[1].contains("ada@example.org") && lines[1].contains("user,admin,finance"));
    assert_eq!(lines.len(), 3, "{table:?}");

    // users show, by id and by e-mail, with the linked accounts
    store
        .bind_identity(
            "telegram",
            "5550001",
            &ada_id.as_str().into(),
            1_800_000_000_000,
        )
        .await
        .unwrap();
    let shown = run(&["users", "show", "ada@EXAMPLE.org", "--json"]).json();
    assert_eq!(shown["id"], ada_id.as_str());
    assert_eq!(shown["linked"][0]["external_id"], "5550001");
    let shown = run(&["users", "show", &ada_id]);
    assert_eq!(shown.code, 0);
    assert!(shown.stdout.contains("Ada Lovelace") && shown.stdout.contains("5550001"));
    run(&["users", "show", "u-nobody"]).refused("No account has the id");
    run(&["users", "show", "nobody@example.org"]).refused("No account has the e-mail address");
    run(&["users", "show", "bad@"]).refused("is not an e-mail address");

    // users pause | resume | close; closing revokes the account's access tokens for good
    for scope in ["read", "write"] {
        let made = run(&["tokens", "create", "bob@example.org", "--scope", scope]);
        assert_eq!(made.code, 0, "{made:?}");
    }
    let before_close = now_ms();
    for (verb, status) in [
        ("pause", "paused"),
        ("resume", "active"),
        ("close", "closed"),
    ] {
        let changed = run(&["users", verb, "bob@example.org", "--json"]).json();
        assert_eq!(changed["status"], status, "{verb}");
    }
    let bob = store
        .account_by_email(&Email::parse("bob@example.org").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bob.status, AccountStatus::Closed, "the change is stored");
    // Closing signs the account out everywhere as of then: a web session or a link code made
    // before is void even once the account is resumed (a session that made no request while
    // the account was closed was never ended by the gate, and came back with `resume`).
    assert!(
        bob.sessions_ended_at_ms >= before_close,
        "signed out everywhere at the close: {} < {before_close}",
        bob.sessions_ended_at_ms
    );
    let resumed = run(&["users", "resume", "bob@example.org", "--json"]).json();
    assert_eq!(resumed["status"], "active");
    let listed = run(&["tokens", "list", "bob@example.org", "--json"]).json();
    let states: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(states, ["revoked", "revoked"], "{listed}");
    let closed_again = run(&["users", "close", "bob@example.org"]);
    assert_eq!(
        closed_again.stdout,
        format!("{} (bob@example.org) is now closed.\n", bob.user),
        "no working token was left to revoke"
    );
    let paused = run(&["users", "pause", &ada_id]);
    assert_eq!(paused.code, 0);
    assert_eq!(
        paused.stdout,
        format!("{ada_id} (ada@example.org) is now paused.\n")
    );
    run(&["users", "resume", "ghost@example.org"]).refused("No account has the e-mail address");

    // users link-code: a real code, and the link of each enabled platform
    let issued = run(&["users", "link-code", "ada@example.org", "--json"]).json();
    let code = issued["code"].as_str().unwrap().to_owned();
    let links = issued["links"].as_array().unwrap();
    assert_eq!(
        links.len(),
        1,
        "telegram is the one enabled platform: {issued}"
    );
    assert_eq!(links[0]["channel"], "telegram");
    let url = links[0]["url"].as_str().unwrap();
    assert!(url.starts_with("https://t.me/BridleBot?start="), "{url}");
    let canonical = channels::link_code::canonical(&code).expect("a valid code");
    let redeemed = store
        .consume_link_code(&canonical, "telegram#5550009", now_ms())
        .await
        .unwrap();
    assert_eq!(
        redeemed,
        Some(ada_id.as_str().into()),
        "the code links to Ada"
    );
    let table = run(&["users", "link-code", &ada_id]);
    assert_eq!(table.code, 0, "{table:?}");
    assert!(
        table
            .stdout
            .starts_with(&format!("Link code for {ada_id}: "))
    );
    assert!(table.stdout.contains("Telegram") && table.stdout.contains("https://t.me/BridleBot"));
    run(&["users", "link-code", "bob@example.org"]).refused("is closed");
    run(&["users", "link-code", "u-nobody"]).refused("No account has the id");

    // identities list | unlink
    let all = run(&["identities", "list", "--json"]).json();
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    assert_eq!(all[0]["user"], ada_id.as_str());
    let mine = run(&["identities", "list", "--user", "ada@example.org"]);
    assert_eq!(mine.code, 0);
    assert!(mine.stdout.starts_with("USER") && mine.stdout.contains("5550001"));
    let none = run(&["identities", "list", "--user", "bob@example.org", "--json"]).json();
    assert_eq!(none, serde_json::json!([]));
    run(&["identities", "list", "--user", "u-nobody"]).refused("No account has the id");
    let unlinked = run(&["identities", "unlink", "telegram", "5550001", "--json"]).json();
    assert_eq!(unlinked["user"], ada_id.as_str());
    assert_eq!(store.identity("telegram", "5550001").await.unwrap(), None);
    run(&["identities", "unlink", "telegram", "5550001"]).refused("is linked");
    let usage = run(&["identities", "unlink", "telegram"]);
    assert_eq!(
        usage.code, 2,
        "a missing argument is a usage error: {usage:?}"
    );
}

fn now_ms() -> i64 {
    (budget::system_clock())()
}

#[tokio::test]
async fn every_subcommand_on_sqlite() {
    let (_dir, path) = temp_db();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    every_subcommand(Target::Sqlite(path.clone()), store, &TELEGRAM).await;
}

#[tokio::test]
async fn every_subcommand_on_dynamodb() {
    let (table, store) = fresh_table().await;
    let aws = aws_env();
    let mut env: Vec<(&str, &str)> = aws.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend(TELEGRAM);
    every_subcommand(Target::Dynamo(table), store, &env).await;
}

#[tokio::test]
async fn a_missing_database_is_created_only_by_users_add() {
    let (_dir, path) = temp_db();
    let target = Target::Sqlite(path.clone());
    bridle(&target, &["users", "list"], &[]).refused("There is no Bridle database at");
    bridle(&target, &["identities", "list"], &[]).refused("There is no Bridle database at");
    assert!(!path.exists(), "a read must not create the file");
    let added = bridle(
        &target,
        &["users", "add", "first@example.org", "--json"],
        &[],
    )
    .json();
    let listed = bridle(&target, &["users", "list", "--json"], &[]).json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["id"], added["id"]);
}

#[tokio::test]
async fn table_name_picks_dynamodb_and_the_flags_win() {
    let (table, _store) = fresh_table().await;
    let aws = aws_env();
    let mut env: Vec<(&str, &str)> = aws.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.push(("TABLE_NAME", &table));
    let (_dir, db) = temp_db();
    env.push(("BRIDLE_DB", db.to_str().unwrap()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bridle"));
    cmd.args(["users", "add", "t@example.org", "--json"])
        .env_remove("RUST_LOG")
        .envs(env.iter().copied());
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(!db.exists(), "TABLE_NAME wins over BRIDLE_DB");
    let on_table = bridle(
        &Target::Dynamo(table.clone()),
        &["users", "list", "--json"],
        &env,
    )
    .json();
    assert_eq!(on_table[0]["email"], "t@example.org");
    // --db wins over TABLE_NAME.
    let local = bridle(&Target::Sqlite(db.clone()), &["users", "list"], &env);
    local.refused("There is no Bridle database at");
}

#[test]
fn help_says_which_store_wins_and_what_the_exit_codes_mean() {
    for command in [
        &["users", "--help"][..],
        &["users", "add", "--help"],
        &["identities", "--help"],
    ] {
        let (_dir, db) = temp_db();
        let run = bridle(&Target::Sqlite(db), command, &[]);
        assert_eq!(run.code, 0, "{run:?}");
        for words in [
            "else TABLE_NAME (DynamoDB, standard AWS chain) when set; else BRIDLE_DB",
            "Exit codes: 0 done; 1 not found or bad input",
            "2 usage error; 3 the store",
        ] {
            assert!(
                run.stdout.contains(words),
                "{command:?} --help must say {words:?}: {run:?}"
            );
        }
    }
}

#[test]
fn the_store_is_chosen_flags_first_then_table_name_then_bridle_db() {
    let args = |db: Option<&str>, table: Option<&str>| StoreArgs {
        db: db.map(PathBuf::from),
        dynamodb_table: table.map(str::to_owned),
        json: false,
    };
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let both = vars(&[("TABLE_NAME", "prod"), ("BRIDLE_DB", "/var/b.db")]);
    assert_eq!(
        StoreSource::choose(&args(Some("x.db"), None), &both),
        StoreSource::Sqlite("x.db".into())
    );
    assert_eq!(
        StoreSource::choose(&args(None, Some("t")), &both),
        StoreSource::DynamoDb { table: "t".into() }
    );
    assert_eq!(
        StoreSource::choose(&args(None, None), &both),
        StoreSource::DynamoDb {
            table: "prod".into()
        }
    );
    let local = vars(&[("TABLE_NAME", " "), ("BRIDLE_DB", "/var/b.db")]);
    assert_eq!(
        StoreSource::choose(&args(None, None), &local),
        StoreSource::Sqlite("/var/b.db".into()),
        "a blank TABLE_NAME is unset"
    );
    assert_eq!(
        StoreSource::choose(&args(None, None), &vars(&[])),
        StoreSource::Sqlite("./bridle.db".into())
    );
}

/// The commands called directly, on an in-memory store, with a writer.
fn deps(store: Arc<SqliteStore>, format: Format, channels: ChannelSetup) -> Deps {
    Deps {
        tokens: store.clone(),
        store,
        format,
        channels,
        clock: Arc::new(|| 1_800_000_000_000),
    }
}

async fn users(deps: &Deps, command: UsersCommand) -> (Result<(), CliError>, String) {
    let mut out = Vec::new();
    let result = admin_cli::run_users(&command, deps, &mut out).await;
    (result, String::from_utf8(out).unwrap())
}

fn who(text: &str) -> admin_cli::args::Who {
    admin_cli::args::Who { who: text.into() }
}

#[tokio::test]
async fn direct_calls_print_tables_and_refuse_with_exit_code_one() {
    let sqlite = Arc::new(SqliteStore::open_in_memory().unwrap());
    let whatsapp = [
        ("WHATSAPP_APP_SECRET", "w"),
        ("WHATSAPP_VERIFY_TOKEN", "v"),
        ("WHATSAPP_ACCESS_TOKEN", "a"),
        ("WHATSAPP_PHONE_NUMBER_ID", "123"),
        ("WHATSAPP_DISPLAY_NUMBER", "+1 555 0100"),
    ];
    let var = |k: &str| {
        whatsapp
            .iter()
            .chain(TELEGRAM.iter())
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_owned())
    };
    let channels = ChannelSetup::from_vars(&var, &reqwest::Client::new()).unwrap();
    let table = deps(sqlite, Format::Table, channels);

    let (empty, text) = users(&table, UsersCommand::List).await;
    empty.unwrap();
    assert_eq!(
        text,
        "No accounts yet: add one with `bridle users add EMAIL`.\n"
    );

    let add = admin_cli::args::AddArgs {
        email: " Zoe@Example.ORG ".into(),
        name: None,
        tz: "America/Sao_Paulo".into(),
        roles: vec![],
    };
    let (added, text) = users(&table, UsersCommand::Add(add.clone())).await;
    added.unwrap();
    assert!(
        text.contains("name:       zoe\n"),
        "the name defaults to the local part: {text}"
    );
    assert!(
        text.contains("created:    2027-01-15T08:00:00Z\n"),
        "{text}"
    );
    let (again, _) = users(&table, UsersCommand::Add(add)).await;
    let err = again.unwrap_err();
    assert_eq!(err.exit_code(), admin_cli::EXIT_BAD_INPUT);
    assert!(
        err.to_string()
            .starts_with("The e-mail address zoe@example.org already belongs")
    );

    let (code, text) = users(&table, UsersCommand::LinkCode(who("zoe@example.org"))).await;
    code.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].ends_with("(valid until 2027-01-15T08:30:00Z)."),
        "{text}"
    );
    assert!(lines[1].starts_with("APP"), "{text}");
    assert!(lines[2].starts_with("WhatsApp") && lines[2].contains("https://wa.me/15550100?text="));
    assert!(lines[3].starts_with("Telegram"), "{text}");

    let (status, text) = users(&table, UsersCommand::Pause(who("zoe@example.org"))).await;
    status.unwrap();
    assert!(
        text.ends_with("(zoe@example.org) is now paused.\n"),
        "{text}"
    );

    let (missing, _) = users(&table, UsersCommand::Close(who("u-404"))).await;
    let err = missing.unwrap_err();
    assert_eq!(err.exit_code(), admin_cli::EXIT_BAD_INPUT);
    assert_eq!(err.to_string(), "No account has the id \"u-404\".");

    let mut out = Vec::new();
    admin_cli::run_identities(&IdentitiesCommand::List { user: None }, &table, &mut out)
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "No messaging account is linked.\n"
    );
}

#[tokio::test]
async fn a_failing_store_is_exit_code_three() {
    let dir = temp_dir();
    // A directory is no database: opening it fails in SQLite, not in the input.
    let Err(err) = admin_cli::open_store(&StoreSource::Sqlite(dir.path().to_owned()), true).await
    else {
        panic!("a directory must not open as a database");
    };
    assert_eq!(err.exit_code(), admin_cli::EXIT_STORE, "{err:?}");
}

/// `bridle users grant`: sets the assistant's grant of one account (by id or e-mail), says what
/// it means, leaves everything else (and other accounts) as it was; a bad grant is a usage
/// error, an unknown account exit 1.
async fn users_grant(target: Target, store: Arc<dyn Store>, env: &[(&str, &str)]) {
    let run = |args: &[&str]| bridle(&target, args, env);
    let ada = run(&["users", "add", "ada@example.org", "--json"]).json();
    let bo = run(&["users", "add", "bo@example.org", "--json"]).json();
    assert_eq!(ada["assistant_grant"], "risky", "the default: {ada}");
    let ada_id: transcript::UserId = ada["id"].as_str().unwrap().into();
    let bo_id: transcript::UserId = bo["id"].as_str().unwrap().into();
    let before = store.account(&ada_id).await.unwrap().unwrap();

    let said = run(&["users", "grant", "ada@example.org", "read"]);
    assert_eq!(said.code, 0, "{said:?}");
    assert_eq!(
        said.stdout,
        format!(
            "The assistant of {ada_id} (ada@example.org) may now only read (from its next call).\n"
        )
    );
    let after = store.account(&ada_id).await.unwrap().unwrap();
    assert_eq!(after.assistant_grant, transcript::Grant::Read);
    assert_eq!(
        store::Account {
            assistant_grant: before.assistant_grant,
            ..after
        },
        before,
        "only the grant changed"
    );
    let bo_now = store.account(&bo_id).await.unwrap().unwrap();
    assert_eq!(
        bo_now.assistant_grant,
        transcript::Grant::Risky,
        "bo's is untouched"
    );

    let json = run(&["users", "grant", ada_id.0.as_str(), "write", "--json"]).json();
    assert_eq!(json["assistant_grant"], "write");
    let shown = run(&["users", "show", ada_id.0.as_str(), "--json"]).json();
    assert_eq!(shown["assistant_grant"], "write");

    let bad = run(&["users", "grant", "ada@example.org", "admin"]);
    assert_eq!(bad.code, 2, "an unknown grant is a usage error: {bad:?}");
    assert!(
        bad.stderr.contains("read") && bad.stderr.contains("risky"),
        "{bad:?}"
    );
    run(&["users", "grant", "nobody@example.org", "read"]).refused("nobody@example.org");
    assert_eq!(
        store
            .account(&ada_id)
            .await
            .unwrap()
            .unwrap()
            .assistant_grant,
        transcript::Grant::Write
    );
}

#[tokio::test]
async fn users_grant_on_sqlite() {
    let (_dir, path) = temp_db();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).unwrap());
    users_grant(Target::Sqlite(path.clone()), store, &[]).await;
}

#[tokio::test]
async fn users_grant_on_dynamodb() {
    let (table, store) = fresh_table().await;
    let aws = aws_env();
    let env: Vec<(&str, &str)> = aws.iter().map(|(k, v)| (*k, v.as_str())).collect();
    users_grant(Target::Dynamo(table), store, &env).await;
}
