//! Personal data out of an export: the names, e-mail addresses and channel handles the accounts
//! and the identity tables know, and anything shaped like an e-mail address, a phone number or
//! a link code (a code may still be live: whoever holds it can link a chat to its account),
//! replaced by placeholders (`<person-1>`, `<email-1>`, `<phone-1>`, `<handle-1>`, `<code-1>`)
//! that stay the same for the same value throughout one export.

use serde_json::Value;
use std::collections::HashMap;

/// What a placeholder stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Person,
    Email,
    Phone,
    Handle,
    Code,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Person => "person",
            Kind::Email => "email",
            Kind::Phone => "phone",
            Kind::Handle => "handle",
            Kind::Code => "code",
        }
    }
}

/// A known value to replace wherever it appears.
#[derive(Debug, Clone)]
struct Term {
    text: String,
    placeholder: String,
    /// Names are replaced as whole words only (`Lee`, not the start of `Leeds`).
    whole_word: bool,
}

/// Replaces personal data by stable placeholders. One per export, so the same person is the
/// same placeholder on every line.
#[derive(Debug, Default)]
pub struct Redactor {
    terms: Vec<Term>,
    seen: HashMap<(Kind, String), String>,
    counts: HashMap<Kind, usize>,
}

/// The structural fields of an export whose strings are not free text (tags, roles, tool
/// names, tool-call ids, model names). Everything inside a tool's input or result, a text part
/// or a visible entry is free text and always redacted.
const STRUCTURAL: &[&str] = &[
    "format",
    "type",
    "kind",
    "form",
    "role",
    "status",
    "channel",
    "purpose",
    "backend",
    "model",
    "error",
    "prompt_version",
    "tools_offered",
    "tool_use_id",
    "mime_type",
    "signature",
];

/// Fields whose contents are free text through and through.
const FREE: &[&str] = &["input", "content", "text", "raw"];

impl Redactor {
    /// A person's display name (and each of its words of three letters or more).
    pub fn add_name(&mut self, name: &str) {
        let name = name.trim();
        // The local user's stand-in name is not personal data (and a common word).
        if name.chars().count() < 3 || name == "You" {
            return;
        }
        let placeholder = self.placeholder(Kind::Person, &name.to_lowercase());
        self.push_term(name, &placeholder, true);
        for word in name.split_whitespace() {
            if word.chars().count() >= 3 {
                self.push_term(word, &placeholder, true);
            }
        }
    }

    /// An e-mail address from the accounts.
    pub fn add_email(&mut self, email: &str) {
        let email = email.trim();
        if !email.is_empty() {
            let placeholder = self.placeholder(Kind::Email, &email.to_lowercase());
            self.push_term(email, &placeholder, false);
        }
    }

    /// A channel account's id (a phone number, a chat id, a Slack user id).
    pub fn add_handle(&mut self, external_id: &str) {
        let id = external_id.trim();
        if id.chars().count() < 3 {
            return;
        }
        let placeholder = if id.contains('@') {
            self.placeholder(Kind::Email, &id.to_lowercase())
        } else if digits(id).len() >= 7
            && id
                .chars()
                .all(|c| c.is_ascii_digit() || "+ -().".contains(c))
        {
            self.placeholder(Kind::Phone, &digits(id))
        } else {
            self.placeholder(Kind::Handle, id)
        };
        self.push_term(id, &placeholder, false);
        // A phone number is also written without its `+`.
        if let Some(bare) = id.strip_prefix('+')
            && bare.len() >= 7
        {
            self.push_term(bare, &placeholder, false);
        }
    }

    /// Redact every free-text string of an exported record, in place.
    pub fn redact_value(&mut self, value: &mut Value) {
        self.walk(value, false);
    }

    fn walk(&mut self, value: &mut Value, free: bool) {
        match value {
            Value::String(s) => *s = self.redact(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.walk(v, free)),
            Value::Object(map) => {
                let tool_use = map.get("type").and_then(Value::as_str) == Some("tool_use");
                for (key, v) in map.iter_mut() {
                    let inner_free = free || FREE.contains(&key.as_str());
                    if !inner_free && STRUCTURAL.contains(&key.as_str()) {
                        continue;
                    }
                    // A tool call's name and id are structural; its input is not.
                    if !inner_free && tool_use && (key == "name" || key == "id") {
                        continue;
                    }
                    self.walk(v, inner_free);
                }
            }
            _ => {}
        }
    }

    /// `text` with every known value, link code, e-mail address and phone number replaced.
    pub fn redact(&mut self, text: &str) -> String {
        let mut out = text.to_owned();
        for term in &self.terms {
            out = replace_term(&out, term);
        }
        // E-mail addresses first, whole: a local part or a domain may be shaped like a code.
        let out = self.replace_found(&out, Kind::Email, find_email);
        let out = self.replace_found(&out, Kind::Code, find_code);
        self.replace_found(&out, Kind::Phone, find_phone)
    }

    fn replace_found(
        &mut self,
        text: &str,
        kind: Kind,
        find: fn(&str, usize) -> Option<(usize, usize)>,
    ) -> String {
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        while let Some((start, end)) = find(text, at) {
            let found = &text[start..end];
            let key = match kind {
                Kind::Phone => digits(found),
                Kind::Code => channels::link_code::canonical(found).unwrap_or_default(),
                _ => found.to_lowercase(),
            };
            out.push_str(&text[at..start]);
            out.push_str(&self.placeholder(kind, &key));
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }

    fn placeholder(&mut self, kind: Kind, key: &str) -> String {
        if let Some(p) = self.seen.get(&(kind, key.to_owned())) {
            return p.clone();
        }
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        let p = format!("<{}-{n}>", kind.word());
        self.seen.insert((kind, key.to_owned()), p.clone());
        p
    }

    fn push_term(&mut self, text: &str, placeholder: &str, whole_word: bool) {
        if self.terms.iter().any(|t| t.text == text) {
            return;
        }
        self.terms.push(Term {
            text: text.to_owned(),
            placeholder: placeholder.to_owned(),
            whole_word,
        });
        // Longest first, so a full name goes before its words.
        self.terms
            .sort_by_key(|t| std::cmp::Reverse(t.text.chars().count()));
    }
}

fn digits(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}

/// `text` with every occurrence of the term (ASCII letters in any case) replaced.
fn replace_term(text: &str, term: &Term) -> String {
    // ASCII lower-casing keeps every byte offset, so matches in `lower` are matches in `text`.
    let lower = text.to_ascii_lowercase();
    let needle = term.text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut from) = (0, 0);
    while let Some(found) = lower[from..].find(&needle) {
        let (at, end) = (from + found, from + found + needle.len());
        let bounded = !term.whole_word
            || (!text[..at]
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric)
                && !text[end..]
                    .chars()
                    .next()
                    .is_some_and(char::is_alphanumeric));
        if bounded {
            out.push_str(&text[copied..at]);
            out.push_str(&term.placeholder);
            copied = end;
            from = end;
        } else {
            // Past this match's first character.
            from = at + lower[at..].chars().next().map_or(1, char::len_utf8);
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The next link code at or after byte `from`, found as the linking code finds one
/// (`channels::link_code::find`): a token of letters, digits and dashes, its outer dashes
/// left out, shaped like a code in any case, with or without its dash.
fn find_code(text: &str, from: usize) -> Option<(usize, usize)> {
    let in_token = |c: char| c.is_ascii_alphanumeric() || c == '-';
    let mut at = from;
    while at < text.len() {
        let rest = &text[at..];
        let start = at + rest.find(in_token)?;
        let end = text[start..]
            .find(|c: char| !in_token(c))
            .map_or(text.len(), |n| start + n);
        let token = &text[start..end];
        let trimmed = token.trim_matches('-');
        if channels::link_code::canonical(trimmed).is_some() {
            let lead = token.len() - token.trim_start_matches('-').len();
            return Some((start + lead, start + lead + trimmed.len()));
        }
        at = end;
    }
    None
}

fn is_local_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._%+-".contains(c)
}

fn is_domain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '-'
}

/// The next e-mail address at or after byte `from`: `local@domain.tld`.
fn find_email(text: &str, from: usize) -> Option<(usize, usize)> {
    let mut search = from;
    while let Some(rel) = text[search..].find('@') {
        let at = search + rel;
        let start = text[..at]
            .char_indices()
            .rev()
            .take_while(|(_, c)| is_local_char(*c))
            .last()
            .map(|(i, _)| i)
            .filter(|i| *i >= from);
        let domain_len: usize = text[at + 1..]
            .chars()
            .take_while(|c| is_domain_char(*c))
            .map(char::len_utf8)
            .sum();
        let domain = text[at + 1..at + 1 + domain_len].trim_end_matches(['.', '-']);
        let tld_ok = domain.rsplit_once('.').is_some_and(|(host, tld)| {
            !host.is_empty() && tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic())
        });
        if let (Some(start), true) = (start, tld_ok) {
            return Some((start, at + 1 + domain.len()));
        }
        search = at + 1;
    }
    None
}

/// The next phone number at or after byte `from`: `+` and 7–15 digits, or 10–15 digits, with
/// single spaces, dashes, dots or brackets between them. Dates (8 digits) and times stay.
fn find_phone(text: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        let c = bytes[i];
        let starts = (c == b'+' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
            || c.is_ascii_digit()
            || (c == b'(' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
        let glued = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if !starts || glued {
            i += 1;
            continue;
        }
        let (mut j, mut count, mut last_digit_end) =
            (i + 1, usize::from(c.is_ascii_digit()), i + 1);
        let mut gap = false;
        while j < bytes.len() {
            let d = bytes[j];
            if d.is_ascii_digit() {
                count += 1;
                gap = false;
                last_digit_end = j + 1;
            } else if d == b'(' || d == b')' {
                // Brackets around an area code, after a space or not.
            } else if b" -.".contains(&d) && !gap {
                gap = true;
            } else {
                break;
            }
            j += 1;
        }
        let glued_after = bytes
            .get(last_digit_end)
            .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
        let enough = if c == b'+' {
            (7..=15).contains(&count)
        } else {
            (10..=15).contains(&count)
        };
        // A date (2026-12-01, then maybe a time) is not a phone number.
        let date = text.get(i..i + 10).is_some_and(|t| {
            let b = t.as_bytes();
            b[4] == b'-' && b[7] == b'-' && t.chars().filter(char::is_ascii_digit).count() == 8
        });
        if enough && !glued_after && !date {
            return Some((i, last_digit_end));
        }
        i = j.max(i + 1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_people_and_shapes_of_contact_data_become_stable_placeholders() {
        let mut r = Redactor::default();
        r.add_name("Dana Lee");
        r.add_email("dana@example.com");
        r.add_handle("+491701234567");
        let text = "Dana Lee (dana@example.com, +49 170 1234567) met Dana in Leeds; \
                    call 491701234567 or +1 (555) 010-9999, mail OTHER@Mail.org. \
                    On 2026-12-01 19:04.";
        let out = r.redact(text);
        assert_eq!(
            out,
            "<person-1> (<email-1>, <phone-1>) met <person-1> in Leeds; \
             call <phone-1> or <phone-2>, mail <email-2>. \
             On 2026-12-01 19:04."
        );
        // The same values later in the file get the same placeholders.
        assert_eq!(r.redact("other@mail.org / Lee"), "<email-2> / <person-1>");
        // Names in any case, also inside ids; not inside other words.
        assert_eq!(
            r.redact("u-dana, DANA LEE, Danae"),
            "u-<person-1>, <person-1>, Danae"
        );
    }

    #[test]
    fn link_codes_become_placeholders_however_they_were_typed() {
        let mut r = Redactor::default();
        let out = r.redact(
            "Send ABCD-2345 here (or abcd2345, \"--abcd-2345--\"); not ev-3f2a9c7d1e, \
             2026-12-01, SCHEDULE or 8 Dec.",
        );
        assert_eq!(
            out,
            "Send <code-1> here (or <code-1>, \"--<code-1>--\"); not ev-3f2a9c7d1e, \
             2026-12-01, SCHEDULE or 8 Dec."
        );
        assert_eq!(r.redact("MOVE JK3M-4N5P"), "MOVE <code-2>");
        // An address stays one address; a short hex id that looks like a code goes too.
        assert_eq!(
            r.redact("sam98765@gmail.com, jane@abcd2345.org, commit a3f9c7d2"),
            "<email-1>, <email-2>, commit <code-3>"
        );
    }

    #[test]
    fn structure_stays_and_free_text_is_redacted() {
        let mut r = Redactor::default();
        r.add_name("Dana Lee");
        let mut v = json!({
            "format": "bridle-export/1",
            "role": "user",
            "parts": [
                {"type": "tool_use", "id": "call_5551234567", "name": "add_note",
                 "input": {"name": "Dana Lee", "text": "ring +15551234567"}},
                {"type": "text", "text": "Hi, I'm Dana"}
            ]
        });
        r.redact_value(&mut v);
        assert_eq!(v["parts"][0]["id"], "call_5551234567");
        assert_eq!(v["parts"][0]["name"], "add_note");
        assert_eq!(v["parts"][0]["input"]["name"], "<person-1>");
        assert_eq!(v["parts"][0]["input"]["text"], "ring <phone-1>");
        assert_eq!(v["parts"][1]["text"], "Hi, I'm <person-1>");
        assert_eq!(v["role"], "user");
    }
}
