//! `bridle export`: conversations as JSON lines, one conversation per line ([`record`]), in the
//! neutral transcript — both transcripts (the model's, with every call record and tool result,
//! and the visible one), so `bridle eval` can replay them against a changed prompt or model.
//! With `--redact`, personal data is replaced by placeholders ([`redact`]).
//!
//! Nothing here reads the environment: `main.rs` opens the store and passes a writer.

pub mod cli;
pub mod record;
pub mod redact;

use crate::admin_cli::{CliError, find_account};
use record::{ExportedConversation, FORMAT, Segment};
use redact::Redactor;
use std::io::Write;
use store::Store;
use transcript::{Conversation, ConversationId};

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Only this user's conversations (id or e-mail address).
    pub user: Option<String>,
    /// Only conversations with a message at or after this time (ms since the epoch).
    pub since_ms: Option<i64>,
    /// Only this conversation.
    pub conversation: Option<String>,
    /// Replace personal data by placeholders.
    pub redact: bool,
}

/// Write the chosen conversations, oldest first, one JSON line each; returns how many.
pub async fn export(
    store: &dyn Store,
    options: &ExportOptions,
    out: &mut dyn Write,
) -> Result<usize, CliError> {
    let conversations = chosen(store, options).await?;
    let mut redactor = match options.redact {
        true => Some(redactor_for(store).await?),
        false => None,
    };
    let mut written = 0;
    for conversation in conversations {
        let record = read(store, conversation).await?;
        let active_since = |since: i64| {
            record.conversation.created_at_ms >= since
                || record
                    .segments
                    .iter()
                    .flat_map(|s| &s.messages)
                    .any(|m| m.created_at_ms >= since)
        };
        if options.since_ms.is_some_and(|since| !active_since(since)) {
            continue;
        }
        let mut value = serde_json::to_value(&record)
            .map_err(|e| CliError::Refused(format!("A conversation could not be written: {e}.")))?;
        if let Some(r) = redactor.as_mut() {
            r.redact_value(&mut value);
            value["redacted"] = true.into();
        }
        writeln!(out, "{value}")?;
        written += 1;
    }
    Ok(written)
}

/// The conversations asked for, oldest first.
async fn chosen(store: &dyn Store, options: &ExportOptions) -> Result<Vec<Conversation>, CliError> {
    let user = match &options.user {
        Some(who) => Some(find_account(store, who).await?.user),
        None => None,
    };
    let mut found = match (&options.conversation, &user) {
        (Some(id), _) => {
            let conv = store
                .conversation(&ConversationId(id.clone()))
                .await
                .map_err(CliError::store("cannot read the conversations"))?
                .filter(|c| user.as_ref().is_none_or(|u| &c.user_id == u))
                .ok_or_else(|| {
                    CliError::Refused(match &options.user {
                        Some(who) => format!("{who} has no conversation {id:?}."),
                        None => format!("There is no conversation {id:?}."),
                    })
                })?;
            vec![conv]
        }
        (None, Some(user)) => store
            .conversations_of(user)
            .await
            .map_err(CliError::store("cannot read the conversations"))?,
        (None, None) => {
            let accounts = store
                .all_accounts()
                .await
                .map_err(CliError::store("cannot read the accounts"))?;
            let mut all = Vec::new();
            for account in accounts {
                all.extend(
                    store
                        .conversations_of(&account.user)
                        .await
                        .map_err(CliError::store("cannot read the conversations"))?,
                );
            }
            all
        }
    };
    found.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    Ok(found)
}

/// Everything recorded about one conversation.
async fn read(
    store: &dyn Store,
    conversation: Conversation,
) -> Result<ExportedConversation, CliError> {
    let what = "cannot read a conversation's transcript";
    let mut segments = Vec::new();
    for segment in 0..=conversation.segment {
        let messages = store
            .messages(&conversation.id, segment)
            .await
            .map_err(CliError::store(what))?;
        if !messages.is_empty() {
            segments.push(Segment { segment, messages });
        }
    }
    let visible = store
        .visible(&conversation.id)
        .await
        .map_err(CliError::store(what))?;
    Ok(ExportedConversation {
        format: FORMAT.to_owned(),
        conversation,
        segments,
        visible,
        redacted: false,
    })
}

/// A redactor that knows every account's name and e-mail address and every linked channel
/// account's id.
async fn redactor_for(store: &dyn Store) -> Result<Redactor, CliError> {
    let mut r = Redactor::default();
    for account in store
        .all_accounts()
        .await
        .map_err(CliError::store("cannot read the accounts"))?
    {
        r.add_name(&account.display_name);
        if let Some(email) = &account.email {
            r.add_email(email.as_str());
        }
    }
    for binding in store
        .bindings(None)
        .await
        .map_err(CliError::store("cannot read the linked accounts"))?
    {
        r.add_handle(&binding.external_id);
    }
    Ok(r)
}

/// `--since`: a date (`2026-11-01`, midnight UTC) or a duration back from `now_ms` (`7d`,
/// `12h`, `30m`).
pub fn parse_since(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    let bad = || {
        format!(
            "--since {text:?} is neither a date like 2026-11-01 nor a duration like 7d, 12h or 30m."
        )
    };
    if let Some(unit) = text.chars().last().filter(|c| "dhm".contains(*c)) {
        let n: i64 = text[..text.len() - 1].parse().map_err(|_| bad())?;
        let ms = match unit {
            'd' => 86_400_000,
            'h' => 3_600_000,
            _ => 60_000,
        };
        return Ok(now_ms - n.checked_mul(ms).ok_or_else(bad)?);
    }
    let date: jiff::civil::Date = text.parse().map_err(|_| bad())?;
    let at = date.to_zoned(jiff::tz::TimeZone::UTC).map_err(|_| bad())?;
    Ok(at.timestamp().as_millisecond())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_date_or_a_duration() {
        let now = 1_800_000_000_000;
        assert_eq!(parse_since("7d", now), Ok(now - 7 * 86_400_000));
        assert_eq!(parse_since("12h", now), Ok(now - 12 * 3_600_000));
        assert_eq!(parse_since("2026-11-01", now), Ok(1_793_491_200_000));
        for bad in ["yesterday", "7w", "2026-13-01", "d"] {
            assert!(
                parse_since(bad, now).unwrap_err().contains("--since"),
                "{bad}"
            );
        }
    }
}
