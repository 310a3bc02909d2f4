//! `bridle users …`: add, list, show, pause / resume / close, link-code (and grant, in
//! `grant.rs`).

use super::args::{AddArgs, RoleArg, UsersCommand};
use super::render::{self, ACCOUNT_HEADER};
use super::{CliError, Deps, Format, find_account};
use crate::channel_setup::LINK_CODE_LIFETIME_MS;
use channels::open_chat::OpenChatLink;
use serde_json::json;
use std::io::Write;
use store::{
    Account, AccountRole, AccountStatus, CreateAccountError, Email, Roles, Store, StoreError,
};
use transcript::UserId;

/// Run one `users` command, printing to `out`.
pub async fn run_users(
    command: &UsersCommand,
    deps: &Deps,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = deps.store.as_ref();
    match command {
        UsersCommand::Add(args) => {
            let account = add(store, args, (deps.clock)()).await?;
            print_account(out, deps.format, &account, &[])
        }
        UsersCommand::List => {
            let accounts = store
                .all_accounts()
                .await
                .map_err(CliError::store("cannot list the accounts"))?;
            match deps.format {
                Format::Json => {
                    let list: Vec<_> = accounts.iter().map(render::account_json).collect();
                    writeln!(out, "{}", serde_json::Value::Array(list))?;
                }
                Format::Table if accounts.is_empty() => writeln!(
                    out,
                    "No accounts yet: add one with `bridle users add EMAIL`."
                )?,
                Format::Table => {
                    let rows: Vec<_> = accounts.iter().map(render::account_row).collect();
                    write!(out, "{}", render::table(&ACCOUNT_HEADER, &rows))?;
                }
            }
            Ok(())
        }
        UsersCommand::Show(who) => {
            let account = find_account(store, &who.who).await?;
            let bindings = store
                .bindings(Some(&account.user))
                .await
                .map_err(CliError::store("cannot list the linked accounts"))?;
            print_account(out, deps.format, &account, &bindings)
        }
        UsersCommand::Pause(who) => {
            set_status(store, &who.who, AccountStatus::Paused, deps, out).await
        }
        UsersCommand::Resume(who) => {
            set_status(store, &who.who, AccountStatus::Active, deps, out).await
        }
        UsersCommand::Close(who) => {
            set_status(store, &who.who, AccountStatus::Closed, deps, out).await
        }
        UsersCommand::LinkCode(who) => {
            let account = find_account(store, &who.who).await?;
            if account.status == AccountStatus::Closed {
                return Err(CliError::refused(format!(
                    "The account {} is closed: resume it before linking a messaging app.",
                    account.user
                )));
            }
            let linkable = deps.channels.linkable();
            let issued = issue_link_code(store, &account.user, (deps.clock)())
                .await
                .map_err(CliError::store("cannot store a link code"))?;
            let links = deps.channels.open_chat.links(&issued.code, &linkable);
            print_link_code(out, deps.format, &account, &issued, &links)
        }
        UsersCommand::Grant(args) => {
            super::grant::set_grant(store, &args.who, args.grant.into(), deps.format, out).await
        }
    }
}

/// A link code as stored (canonical) and as shown to people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedLinkCode {
    pub code: String,
    pub display: String,
    pub expires_at_ms: i64,
}

/// Store a fresh one-time link code for `user`, live for [`LINK_CODE_LIFETIME_MS`]. A clash with
/// a live code is astronomically rare; a few fresh codes are tried.
pub async fn issue_link_code(
    store: &dyn Store,
    user: &UserId,
    now_ms: i64,
) -> Result<IssuedLinkCode, StoreError> {
    let expires_at_ms = now_ms + LINK_CODE_LIFETIME_MS;
    for _ in 0..5 {
        let code = channels::link_code::generate().map_err(|e| StoreError::Invalid {
            what: format!("no randomness for a link code: {e}"),
        })?;
        match store
            .create_link_code(&code, user, now_ms, expires_at_ms)
            .await
        {
            Ok(()) => {
                return Ok(IssuedLinkCode {
                    display: channels::link_code::display(&code),
                    code,
                    expires_at_ms,
                });
            }
            Err(StoreError::Conflict { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Unavailable(
        "five link codes in a row were taken".into(),
    ))
}

/// Check the input, then create the account (a fresh id; the e-mail must be free).
async fn add(store: &dyn Store, args: &AddArgs, now_ms: i64) -> Result<Account, CliError> {
    let email = Email::parse(&args.email).map_err(|e| CliError::refused(format!("{e}.")))?;
    let tz = args.tz.trim();
    if jiff::tz::TimeZone::get(tz).is_err() {
        return Err(CliError::refused(format!(
            "{tz:?} is not a known time zone: use an IANA name such as Europe/Paris or UTC."
        )));
    }
    let name = match args.name.as_deref().map(str::trim) {
        Some("") => return Err(CliError::refused("The display name must not be empty.")),
        Some(name) => name.to_owned(),
        None => email
            .as_str()
            .split('@')
            .next()
            .unwrap_or_default()
            .to_owned(),
    };
    let roles: Roles = args
        .roles
        .iter()
        .map(|r| match r {
            RoleArg::User => AccountRole::User,
            RoleArg::Admin => AccountRole::Admin,
            RoleArg::Finance => AccountRole::Finance,
        })
        .fold(Roles::default(), Roles::with);
    // A clash of fresh ids is as rare as a link code's; try a few.
    for _ in 0..5 {
        let account = Account {
            email: Some(email.clone()),
            time_zone: tz.to_owned(),
            roles,
            created_at_ms: now_ms,
            ..Account::new(new_user_id(), name.clone())
        };
        match store.create_account(&account).await {
            Ok(()) => return Ok(account),
            Err(CreateAccountError::UserTaken(_)) => continue,
            Err(CreateAccountError::EmailTaken(email)) => {
                let owner = store
                    .account_by_email(&email)
                    .await
                    .ok()
                    .flatten()
                    .map(|a| format!(" ({})", a.user))
                    .unwrap_or_default();
                return Err(CliError::refused(format!(
                    "The e-mail address {email} already belongs to an account{owner}."
                )));
            }
            Err(CreateAccountError::Store(e)) => {
                return Err(CliError::store("cannot create the account")(e));
            }
        }
    }
    Err(CliError::refused(
        "Five fresh user ids in a row were taken; try again.",
    ))
}

/// `u-` and 12 hex digits from a random UUID.
fn new_user_id() -> UserId {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    UserId(format!("u-{}", &hex[..12]))
}

async fn set_status(
    store: &dyn Store,
    who: &str,
    status: AccountStatus,
    deps: &Deps,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let account = find_account(store, who).await?;
    // Closed for good as far as what it had signed in goes: resuming the account later (say,
    // once the leak it was closed for is dealt with) must not bring back a web session (one
    // that made no request while closed was never ended by the gate), a link code made
    // before (it would link a chat that acts as the user once resumed) or an access token.
    // Signed out everywhere first, as `POST /auth/logout-everywhere` does: the MCP door then
    // refuses a token made before now that the revocation's listing misses.
    if status == AccountStatus::Closed {
        store
            .end_sessions(&account.user, (deps.clock)())
            .await
            .map_err(CliError::store("cannot sign the account out everywhere"))?;
    }
    store
        .set_account_status(&account.user, status)
        .await
        .map_err(CliError::store("cannot change the account's status"))?;
    let revoked = if status == AccountStatus::Closed {
        revoke_tokens(deps, &account.user).await?
    } else {
        0
    };
    let account = Account { status, ..account };
    match deps.format {
        Format::Json => writeln!(out, "{}", render::account_json(&account))?,
        Format::Table => writeln!(
            out,
            "{}{} is now {}{}.",
            account.user,
            account
                .email
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            status.as_str(),
            match revoked {
                0 => String::new(),
                1 => "; its access token is revoked".to_owned(),
                n => format!("; its {n} access tokens are revoked"),
            }
        )?,
    }
    Ok(())
}

/// Revoke every working MCP access token of `user`; how many there were.
async fn revoke_tokens(deps: &Deps, user: &UserId) -> Result<usize, CliError> {
    deps.tokens
        .revoke_tokens_of(user, (deps.clock)())
        .await
        .map_err(CliError::store("cannot revoke the account's access tokens"))
}

fn print_account(
    out: &mut dyn Write,
    format: Format,
    account: &Account,
    bindings: &[store::Binding],
) -> Result<(), CliError> {
    match format {
        Format::Json => {
            let mut value = render::account_json(account);
            value["linked"] = bindings.iter().map(render::binding_json).collect();
            writeln!(out, "{value}")?;
        }
        Format::Table => {
            write!(out, "{}", render::account_details(account))?;
            if !bindings.is_empty() {
                writeln!(out)?;
                let rows: Vec<_> = bindings.iter().map(render::binding_row).collect();
                write!(out, "{}", render::table(&render::BINDING_HEADER, &rows))?;
            }
        }
    }
    Ok(())
}

fn print_link_code(
    out: &mut dyn Write,
    format: Format,
    account: &Account,
    issued: &IssuedLinkCode,
    links: &[OpenChatLink],
) -> Result<(), CliError> {
    match format {
        Format::Json => writeln!(
            out,
            "{}",
            json!({
                "user": account.user,
                "code": issued.display,
                "expires_at_ms": issued.expires_at_ms,
                "links": links,
            })
        )?,
        Format::Table => {
            writeln!(
                out,
                "Link code for {}: {} (valid until {}).",
                account.user,
                issued.display,
                render::time(issued.expires_at_ms)
            )?;
            if links.is_empty() {
                writeln!(
                    out,
                    "No messaging app is enabled here (set the same channel variables as `bridle serve` to list their links); the user sends the code to the assistant from their messaging app."
                )?;
            } else {
                let rows: Vec<_> = links
                    .iter()
                    .map(|l| {
                        vec![
                            l.label.clone(),
                            l.url.clone().unwrap_or_else(|| "-".into()),
                            l.instruction.clone(),
                        ]
                    })
                    .collect();
                write!(out, "{}", render::table(&["APP", "LINK", "HOW"], &rows))?;
            }
        }
    }
    Ok(())
}
