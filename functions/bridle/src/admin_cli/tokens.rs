//! `bridle tokens …`: MCP access tokens for a user's external AI clients — create (the token
//! is printed once, alone on the last line of stdout; `--json` gives `{"id", "token", …}`),
//! list, revoke. USER is an account id or e-mail; `local` is the one user of `bridle serve`
//! without sign-in. [`issue_token`] is also what the web app's "Connect an AI client" calls.

use super::{CliError, Format, StoreSource, find_account, render};
use crate::server::LOCAL_USER;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use store::{McpToken, Store, StoreError, TokenScope, Tokens};
use transcript::UserId;

/// MCP access tokens: create, list, revoke.
#[derive(Debug, Args)]
#[command(
    after_help = "Store: --db FILE or --dynamodb-table NAME; else TABLE_NAME (DynamoDB, \
standard AWS chain) when set; else BRIDLE_DB; else ./bridle.db.\n\nExit codes: 0 done; 1 not \
found or bad input, with one sentence on stderr; 2 usage error; 3 the store could not be opened \
or failed."
)]
pub struct TokensArgs {
    #[command(flatten)]
    pub store: super::StoreArgs,
    #[command(subcommand)]
    pub command: TokensCommand,
}

#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Create a token for USER's AI client; it is shown once, on the last line.
    Create(CreateArgs),
    /// List USER's tokens (never the tokens themselves).
    List {
        /// The account: its id or e-mail (`local`: the local server's user).
        #[arg(value_name = "USER")]
        user: String,
    },
    /// Revoke a token by its id: it stops working at once.
    Revoke {
        #[arg(value_name = "ID")]
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The account: its id or e-mail (`local`: the local server's user).
    #[arg(value_name = "USER")]
    pub user: String,
    /// What the client may do: read (read-only tools), write (also changes), risky (also
    /// changes that need a person's yes, asked through the client).
    #[arg(long, value_enum)]
    pub scope: ScopeArg,
    /// How long it works: e.g. 90d, 12h, or `never` (default 90d).
    #[arg(long, default_value = "90d")]
    pub expires: String,
    /// A label for the owner ("Claude Desktop at home").
    #[arg(long, default_value = "AI client")]
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScopeArg {
    Read,
    Write,
    Risky,
}

impl From<ScopeArg> for TokenScope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::Read => TokenScope::Read,
            ScopeArg::Write => TokenScope::Write,
            ScopeArg::Risky => TokenScope::Risky,
        }
    }
}

/// What the token commands work with.
#[derive(Clone)]
pub struct TokenDeps {
    pub store: Arc<dyn Store>,
    pub tokens: Arc<dyn Tokens>,
    pub format: Format,
    pub clock: budget::Clock,
}

impl std::fmt::Debug for TokenDeps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenDeps")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

/// Open the store once, as accounts and as tokens (the file must exist).
pub async fn open_token_store(
    source: &StoreSource,
) -> Result<(Arc<dyn Store>, Arc<dyn Tokens>), CliError> {
    if let StoreSource::Sqlite(path) = source
        && !path.exists()
    {
        return Err(CliError::refused(format!(
            "There is no Bridle database at {}: pass --db FILE, set BRIDLE_DB, or run \
             `bridle serve` first.",
            path.display()
        )));
    }
    super::open_store_with_tokens(source, false).await
}

/// A new token for `user`: stored as its hash, returned once. A clash of ids or hashes (never
/// expected with 256 random bits) is tried again.
pub async fn issue_token(
    tokens: &dyn Tokens,
    user: &UserId,
    name: &str,
    scope: TokenScope,
    expires_at_ms: Option<i64>,
    now_ms: i64,
) -> Result<(McpToken, String), StoreError> {
    let mut last = None;
    for _ in 0..3 {
        let secret = mcp::mint_token().map_err(|e| StoreError::Unavailable(Box::new(e)))?;
        let token = McpToken {
            id: mcp::new_token_id(),
            hash: mcp::hash_token(&secret),
            user: user.clone(),
            name: name.to_owned(),
            scope,
            created_at_ms: now_ms,
            expires_at_ms,
            last_used_ms: None,
            revoked_at_ms: None,
        };
        match tokens.create_token(&token).await {
            Ok(()) => return Ok((token, secret)),
            Err(err @ StoreError::Conflict { .. }) => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last.expect("three tries were made"))
}

/// `90d`, `12h`, `30m` → milliseconds; `never` → `None`. `Err`: one sentence.
pub fn parse_lifetime(text: &str) -> Result<Option<i64>, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("never") {
        return Ok(None);
    }
    let bad = || {
        format!(
            "--expires {text:?} is not a lifetime: give a number of days, hours or minutes \
             (90d, 12h, 30m) or `never`."
        )
    };
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let unit_ms = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        _ => return Err(bad()),
    };
    if !(1..=3650 * 86_400_000 / unit_ms).contains(&n) {
        return Err(bad());
    }
    Ok(Some(n * unit_ms))
}

/// The account a token is for: an id or e-mail; `local` even before `bridle serve` made it.
async fn token_owner(store: &dyn Store, who: &str) -> Result<UserId, CliError> {
    match find_account(store, who).await {
        Ok(account) => Ok(account.user),
        Err(CliError::Refused(_)) if who == LOCAL_USER => Ok(LOCAL_USER.into()),
        Err(err) => Err(err),
    }
}

pub async fn run_tokens(
    command: &TokensCommand,
    deps: &TokenDeps,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let now = (deps.clock)();
    match command {
        TokensCommand::Create(args) => {
            let user = token_owner(deps.store.as_ref(), &args.user).await?;
            let lifetime = parse_lifetime(&args.expires).map_err(CliError::refused)?;
            let name = args.name.trim();
            if name.is_empty() || name.chars().count() > 100 {
                return Err(CliError::refused(
                    "--name must be 1 to 100 characters.".to_owned(),
                ));
            }
            let (token, secret) = issue_token(
                deps.tokens.as_ref(),
                &user,
                name,
                args.scope.into(),
                lifetime.map(|ms| now + ms),
                now,
            )
            .await
            .map_err(CliError::store("cannot store the token"))?;
            match deps.format {
                Format::Json => {
                    let mut value = token_json(&token, now);
                    value["token"] = json!(secret);
                    writeln!(out, "{value}")?;
                }
                Format::Table => {
                    writeln!(
                        out,
                        "Created {} ({:?}, scope {}, {}) for {}.",
                        token.id,
                        token.name,
                        token.scope.as_str(),
                        token
                            .expires_at_ms
                            .map_or("never expires".into(), |t| format!(
                                "expires {}",
                                render::time(t)
                            )),
                        token.user
                    )?;
                    writeln!(
                        out,
                        "Give it to the client as `Authorization: Bearer <token>` for /mcp. It \
                         is shown only this once:"
                    )?;
                    writeln!(out, "{secret}")?;
                }
            }
        }
        TokensCommand::List { user } => {
            let user = token_owner(deps.store.as_ref(), user).await?;
            let list = deps
                .tokens
                .tokens_of(&user)
                .await
                .map_err(CliError::store("cannot read the tokens"))?;
            match deps.format {
                Format::Json => {
                    let list: Vec<Value> = list.iter().map(|t| token_json(t, now)).collect();
                    writeln!(out, "{}", Value::Array(list))?;
                }
                Format::Table => {
                    let rows: Vec<Vec<String>> = list
                        .iter()
                        .map(|t| {
                            vec![
                                t.id.clone(),
                                t.name.clone(),
                                t.scope.as_str().into(),
                                status(t, now).into(),
                                render::time(t.created_at_ms),
                                t.last_used_ms.map_or("-".into(), render::time),
                                t.expires_at_ms.map_or("never".into(), render::time),
                            ]
                        })
                        .collect();
                    let header = [
                        "ID",
                        "NAME",
                        "SCOPE",
                        "STATUS",
                        "CREATED",
                        "LAST USED",
                        "EXPIRES",
                    ];
                    write!(out, "{}", render::table(&header, &rows))?;
                }
            }
        }
        TokensCommand::Revoke { id } => {
            let revoked = deps
                .tokens
                .revoke_token(id, now)
                .await
                .map_err(CliError::store("cannot revoke the token"))?;
            if !revoked {
                return Err(CliError::refused(format!("No token has the id {id:?}.")));
            }
            match deps.format {
                Format::Json => writeln!(out, "{}", json!({"id": id, "revoked": true}))?,
                Format::Table => writeln!(out, "Revoked {id}: it no longer opens anything.")?,
            }
        }
    }
    Ok(())
}

/// `live`, `revoked` or `expired`.
pub fn status(t: &McpToken, now_ms: i64) -> &'static str {
    if t.revoked_at_ms.is_some() {
        "revoked"
    } else if t.is_live(now_ms) {
        "live"
    } else {
        "expired"
    }
}

/// A token's listing entry as JSON (never the token or its hash).
pub fn token_json(t: &McpToken, now_ms: i64) -> Value {
    json!({
        "id": t.id,
        "user": t.user.0,
        "name": t.name,
        "scope": t.scope.as_str(),
        "status": status(t, now_ms),
        "created_at_ms": t.created_at_ms,
        "last_used_ms": t.last_used_ms,
        "expires_at_ms": t.expires_at_ms,
        "revoked_at_ms": t.revoked_at_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes() {
        assert_eq!(parse_lifetime("90d"), Ok(Some(90 * 86_400_000)));
        assert_eq!(parse_lifetime("12h"), Ok(Some(12 * 3_600_000)));
        assert_eq!(parse_lifetime("never"), Ok(None));
        for bad in ["", "d", "0d", "90", "9x", "-1d", "99999d"] {
            assert!(parse_lifetime(bad).is_err(), "{bad}");
        }
    }
}
