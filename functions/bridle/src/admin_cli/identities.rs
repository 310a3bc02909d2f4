//! `bridle identities …`: list the linked messaging accounts, unlink one.

use super::args::IdentitiesCommand;
use super::render::{self, BINDING_HEADER};
use super::{CliError, Deps, Format, find_account};
use serde_json::json;
use std::io::Write;

/// Run one `identities` command, printing to `out`.
pub async fn run_identities(
    command: &IdentitiesCommand,
    deps: &Deps,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let store = deps.store.as_ref();
    match command {
        IdentitiesCommand::List { user } => {
            let user = match user {
                Some(who) => Some(find_account(store, who).await?.user),
                None => None,
            };
            let bindings = store
                .bindings(user.as_ref())
                .await
                .map_err(CliError::store("cannot list the linked accounts"))?;
            match deps.format {
                Format::Json => {
                    let list: Vec<_> = bindings.iter().map(render::binding_json).collect();
                    writeln!(out, "{}", serde_json::Value::Array(list))?;
                }
                Format::Table if bindings.is_empty() => {
                    writeln!(out, "No messaging account is linked.")?
                }
                Format::Table => {
                    let rows: Vec<_> = bindings.iter().map(render::binding_row).collect();
                    write!(out, "{}", render::table(&BINDING_HEADER, &rows))?;
                }
            }
            Ok(())
        }
        IdentitiesCommand::Unlink {
            channel,
            external_id,
        } => {
            let Some(user) = store
                .unbind_identity(channel, external_id)
                .await
                .map_err(CliError::store("cannot unlink the account"))?
            else {
                return Err(CliError::refused(format!(
                    "No {channel} account {external_id:?} is linked."
                )));
            };
            match deps.format {
                Format::Json => writeln!(
                    out,
                    "{}",
                    json!({ "channel": channel, "external_id": external_id, "user": user })
                )?,
                Format::Table => writeln!(
                    out,
                    "Unlinked {channel} account {external_id:?} from {user}."
                )?,
            }
            Ok(())
        }
    }
}
