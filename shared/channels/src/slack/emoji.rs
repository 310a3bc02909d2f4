//! Unicode emoji → Slack reaction names (Slack's `reactions.add` takes a name, not the
//! character).

/// The emoji Bridle reacts with, by Slack name. Variation selectors are ignored when matching.
const NAMES: &[(&str, &str)] = &[
    ("👍", "thumbsup"),
    ("👎", "thumbsdown"),
    ("✅", "white_check_mark"),
    ("❌", "x"),
    ("❤", "heart"),
    ("🎉", "tada"),
    ("👀", "eyes"),
    ("🙏", "pray"),
    ("🔥", "fire"),
    ("👋", "wave"),
    ("😂", "joy"),
];

/// The Slack name for a reaction: a known unicode emoji (see the table above), or an explicit
/// `:name:`. `None` for anything else: the reaction is skipped rather than guessed.
pub fn reaction_name(emoji: &str) -> Option<String> {
    let emoji = emoji.trim();
    if let Some(name) = emoji
        .strip_prefix(':')
        .and_then(|e| e.strip_suffix(':'))
        .filter(|n| {
            !n.is_empty()
                && n.len() <= 100
                && n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_+-'".contains(&b))
        })
    {
        return Some(name.to_owned());
    }
    let bare: String = emoji.chars().filter(|&c| c != '\u{FE0F}').collect();
    NAMES
        .iter()
        .find(|(e, _)| *e == bare)
        .map(|(_, name)| (*name).to_owned())
}

#[cfg(test)]
mod tests {
    use super::reaction_name;

    #[test]
    fn known_emoji_map_to_slack_names() {
        for (emoji, name) in [
            ("👍", "thumbsup"),
            ("✅", "white_check_mark"),
            ("❤️", "heart"),
            ("❤", "heart"),
            ("🎉", "tada"),
            ("👀", "eyes"),
            (":white_check_mark:", "white_check_mark"),
            (":+1:", "+1"),
        ] {
            assert_eq!(reaction_name(emoji).as_deref(), Some(name), "{emoji}");
        }
    }

    #[test]
    fn unknown_emoji_are_skipped() {
        for emoji in ["🦀", "", "thumbsup", ":Bad Name:", "::", "👍🏽"] {
            assert_eq!(reaction_name(emoji), None, "{emoji}");
        }
    }
}
