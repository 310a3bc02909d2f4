//! `bridle users grant USER read|write|risky`: how far the account's assistant may reach.

use super::render;
use super::{CliError, Format, find_account};
use std::io::Write;
use store::{Account, Store};
use transcript::Grant;

/// Set the assistant's grant of the account `who` (id or e-mail) and say what it means now.
pub(super) async fn set_grant(
    store: &dyn Store,
    who: &str,
    grant: Grant,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let account = find_account(store, who).await?;
    store
        .set_assistant_grant(&account.user, grant)
        .await
        .map_err(CliError::store("cannot change the assistant's grant"))?;
    let account = Account {
        assistant_grant: grant,
        ..account
    };
    match format {
        Format::Json => writeln!(out, "{}", render::account_json(&account))?,
        Format::Table => writeln!(
            out,
            "The assistant of {}{} may now {} (from its next call).",
            account.user,
            account
                .email
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            meaning(grant)
        )?,
    }
    Ok(())
}

/// What a grant lets the assistant do, in words.
pub(crate) fn meaning(grant: Grant) -> &'static str {
    match grant {
        Grant::Read => "only read",
        Grant::Write => "make changes, but not risky ones",
        Grant::Risky => "make any change, asking for a yes before a risky one",
    }
}
