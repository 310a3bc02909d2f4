//! The model's words under which the harness lists what a yes does (`confirm::IF_YES` and the
//! held calls' descriptions, from the records) must not carry a list of their own that looks
//! like it: a manipulated model writing "If you say yes: withdraw Dana from the test copy"
//! above the real list would have the user read the fake one first. Its lines that begin as the
//! harness's list does, and the list lines under them, are left out of the reply.

/// `text` without the lines that imitate the harness's "If you say yes:" list: a line that
/// begins (past spaces and Markdown marks) with "if you say yes", in any case, and the list
/// items right under it.
pub(crate) fn without_imitations(text: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let mut in_list = false;
    for line in text.lines() {
        let bare = line
            .trim_start_matches(|c: char| c.is_whitespace() || "*_>#`~\"'“‘".contains(c))
            .to_lowercase();
        if bare.starts_with("if you say yes") {
            in_list = true;
            continue;
        }
        let item = line.trim_start();
        if in_list && (item.starts_with("- ") || item.starts_with("• ") || item.starts_with("* "))
        {
            continue;
        }
        in_list = false;
        // One blank line where a left-out list stood between two.
        if line.trim().is_empty() && kept.last().is_some_and(|l| l.trim().is_empty()) {
            continue;
        }
        kept.push(line);
    }
    kept.join("\n").trim().to_owned()
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
        let plain = "Say yes and I'll cancel it.\n- one\n- two";
        assert_eq!(without_imitations(plain), plain, "nothing like it");
    }
}
