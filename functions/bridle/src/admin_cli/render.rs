//! Plain-text tables and JSON for the operator commands. Pure.

use serde_json::{Value, json};
use store::{Account, Binding};

/// `text` as a terminal may show it: control characters (an escape sequence, a carriage
/// return, a line break) written out as escapes. Names come from people (an identity
/// provider's `name` claim, a sender's id on first contact): printed as they are, one could
/// hide a row of `users list`, rewrite the lines above it, or set the operator's clipboard.
pub(crate) fn shown(text: &str) -> String {
    if !text.chars().any(char::is_control) {
        return text.to_owned();
    }
    text.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect()
}

/// Columns padded to their widest cell, two spaces apart; no trailing spaces. Cells are
/// [`shown`] safe for a terminal.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| shown(cell)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            text.push_str(cell);
            text.extend(std::iter::repeat_n(' ', w - cell.chars().count()));
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// A time in ms as RFC 3339 in UTC, to the second; `-` for 0 (not recorded).
pub(crate) fn time(ms: i64) -> String {
    if ms == 0 {
        return "-".into();
    }
    jiff::Timestamp::from_second(ms.div_euclid(1000))
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

pub(crate) const ACCOUNT_HEADER: [&str; 7] = [
    "ID",
    "EMAIL",
    "NAME",
    "STATUS",
    "ROLES",
    "TIME ZONE",
    "CREATED",
];

pub(crate) fn account_row(a: &Account) -> Vec<String> {
    vec![
        a.user.0.clone(),
        a.email.as_ref().map_or("-".into(), ToString::to_string),
        a.display_name.clone(),
        a.status.as_str().into(),
        a.roles.to_string(),
        a.time_zone.clone(),
        time(a.created_at_ms),
    ]
}

pub(crate) const BINDING_HEADER: [&str; 4] = ["USER", "CHANNEL", "EXTERNAL ID", "LINKED"];

pub(crate) fn binding_row(b: &Binding) -> Vec<String> {
    vec![
        b.user.0.clone(),
        b.channel.clone(),
        b.external_id.clone(),
        time(b.bound_at_ms),
    ]
}

/// An account as JSON: every field, the status and roles as names.
pub(crate) fn account_json(a: &Account) -> Value {
    json!({
        "id": a.user,
        "email": a.email,
        "name": a.display_name,
        "status": a.status,
        "roles": a.roles,
        "time_zone": a.time_zone,
        "created_at_ms": a.created_at_ms,
        "assistant_grant": a.assistant_grant,
    })
}

pub(crate) fn binding_json(b: &Binding) -> Value {
    json!({
        "user": b.user,
        "channel": b.channel,
        "external_id": b.external_id,
        "bound_at_ms": b.bound_at_ms,
    })
}

/// One account as `key: value` lines.
pub(crate) fn account_details(a: &Account) -> String {
    let row = account_row(a);
    // The longest label and its colon.
    let width = ACCOUNT_HEADER
        .iter()
        .map(|h| h.len() + 1)
        .max()
        .unwrap_or(0);
    ACCOUNT_HEADER
        .iter()
        .zip(&row)
        .map(|(h, v)| {
            format!(
                "{:width$}  {}\n",
                format!("{}:", h.to_lowercase()),
                shown(v)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns_and_trim_lines() {
        let text = table(
            &["ID", "NAME"],
            &[
                vec!["u-1".into(), "Ada".into()],
                vec!["u-22222".into(), "Émile".into()],
            ],
        );
        assert_eq!(text, "ID       NAME\nu-1      Ada\nu-22222  Émile\n");
    }

    /// A name that carries terminal controls is printed with them written out: it cannot
    /// move the cursor, clear a line or hide the row.
    #[test]
    fn control_characters_in_a_cell_are_written_out() {
        let text = table(
            &["ID", "NAME"],
            &[vec!["u-1".into(), "\r\u{1b}[2K\u{1b}[1AEve".into()]],
        );
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("\\r\\u{1b}[2K"), "{text:?}");
        assert_eq!(shown("Émile O'Brien"), "Émile O'Brien");
    }

    #[test]
    fn times_are_utc_seconds() {
        assert_eq!(time(1_700_000_000_999), "2023-11-14T22:13:20Z");
        assert_eq!(time(0), "-");
    }
}
