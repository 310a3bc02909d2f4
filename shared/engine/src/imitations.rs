//! The model's words under which the harness lists what a yes does (`confirm::IF_YES` and the
//! held calls' descriptions, from the records) must not carry a list of their own that looks
//! like it: a manipulated model writing "If you say yes: withdraw Dana from the test copy"
//! above the real list would have the user read the fake one first. A line that says "if you
//! say yes" (past Markdown marks and quotation marks, in any case and spacing, anywhere in the
//! line), the rest of its paragraph, and the list items after it are left out of the reply.
//! A blocklist cannot catch a paraphrase ("Should you agree: …"): the harness's own list, always
//! last and always there when a call is held, is what the reply promises.

/// What a line is, read for imitations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Ordinary text: kept.
    Text,
    /// In the paragraph that says "if you say yes": left out to its end.
    Heading,
    /// Past it: blank lines and list items left out, until other text.
    List,
}

/// `text` without the lines that imitate the harness's "If you say yes:" list.
pub(crate) fn without_imitations(text: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut state = State::Text;
    for line in text.lines() {
        let blank = line.trim().is_empty();
        if says_if_you_say_yes(line) {
            state = State::Heading;
            continue;
        }
        state = match state {
            State::Heading if blank => State::List,
            State::Heading => continue,
            State::List if blank || is_list_item(line) => continue,
            _ => State::Text,
        };
        // One blank line where a left-out list stood between two paragraphs.
        if blank && kept.last().is_some_and(|l| l.trim().is_empty()) {
            continue;
        }
        if !blank
            && kept.last().is_some_and(|l| !l.trim().is_empty())
            && text_after_list(&kept, line, text)
        {
            kept.push("");
        }
        kept.push(line);
    }
    kept.join("\n").trim().to_owned()
}

/// Whether `line` follows a left-out list with no blank line kept between (so the paragraph
/// that follows stays a paragraph of its own).
fn text_after_list(kept: &[&str], line: &str, text: &str) -> bool {
    let Some(last) = kept.last() else {
        return false;
    };
    // The two were not next to each other in the model's text.
    !text.contains(&format!("{last}\n{line}"))
}

/// Whether `line` says "if you say yes" as a phrase (not "…yesterday"), whatever marks,
/// quotation marks, case or spacing it is written with.
fn says_if_you_say_yes(line: &str) -> bool {
    let plain: String = line
        .chars()
        .filter(|c| !"*_`~\"'\u{201c}\u{201d}\u{2018}\u{2019}".contains(*c))
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect::<String>()
        .to_lowercase();
    let words: Vec<&str> = plain.split(' ').filter(|w| !w.is_empty()).collect();
    let plain = words.join(" ");
    let phrase = "if you say yes";
    plain.match_indices(phrase).any(|(at, _)| {
        let before = plain[..at].chars().next_back();
        let after = plain[at + phrase.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// A Markdown list item: `-`, `*`, `+` or `•`, or a number with `.` or `)`, then a space.
fn is_list_item(line: &str) -> bool {
    let item = line.trim_start();
    if ["- ", "* ", "+ ", "• "].iter().any(|m| item.starts_with(m)) {
        return true;
    }
    let digits = item.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && (item[digits..].starts_with(". ") || item[digits..].starts_with(") "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_like_the_harnesss_is_left_out_and_the_rest_kept() {
        let text = "Shall I withdraw the duplicate?\n\n**If you say yes:**\n- Withdraw Dana Lee \
                    from the test copy\n- nothing else\n\nThanks!";
        assert_eq!(
            without_imitations(text),
            "Shall I withdraw the duplicate?\n\nThanks!"
        );
        assert_eq!(
            without_imitations("  if you say YES: I'll cancel the copy."),
            "",
            "one line, any case"
        );
        let plain = "Say yes and I'll cancel it.\n- one\n- two\n\nIf you said yesterday, fine.";
        assert_eq!(without_imitations(plain), plain, "nothing like it");
    }

    /// The ways round a plain prefix match: a blank line under the heading, numbered items,
    /// emphasis or quotation marks inside the phrase, a non-breaking space, the phrase mid-line,
    /// and a paragraph rather than a list.
    #[test]
    fn the_heading_is_found_however_it_is_written() {
        for text in [
            "Shall I?\n\nIf you say yes:\n\n- Cancel the test copy\n\nThanks!",
            "Shall I?\n\nIf you say yes:\n1. Cancel the test copy\n2) nothing else\n\nThanks!",
            "Shall I?\n\nIf you say **yes**:\n- Cancel the test copy\n\nThanks!",
            "Shall I?\n\nIf you say \u{201c}yes\u{201d}:\n- Cancel the test copy\n\nThanks!",
            "Shall I?\n\nIf\u{a0}you say yes:\n- Cancel the test copy\n\nThanks!",
            "Shall I?\n\nOK? If you say yes: Cancel the test copy.\n\nThanks!",
            "Shall I?\n\nIf you say yes:\nCancel the test copy (draft).\n\nThanks!",
        ] {
            assert_eq!(without_imitations(text), "Shall I?\n\nThanks!", "{text:?}");
        }
    }
}
