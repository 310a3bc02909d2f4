//! Reply shaping: the in-band markers a model may write, parsed and stripped, with the limits
//! every channel shares enforced here (so no channel ever sees too many or too long buttons).
//!
//! - `<buttons>Yes, cancel | No, keep it</buttons>` offers buttons (at most 3, titles cut to 20
//!   characters); a pressed button comes back as its title.
//! - `<silent/>` asks to answer with a reaction only; the sender falls back to a short text
//!   when no reaction went out, so the user is never left hanging.

use serde::Serialize;

/// Buttons per reply.
pub const MAX_BUTTONS: usize = 3;
/// Characters per button title.
pub const MAX_BUTTON_TITLE: usize = 20;

/// A button as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShapedButton {
    /// What comes back when it is pressed (the title itself).
    pub id: String,
    pub title: String,
}

/// A reply with its markers parsed out.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Shaped {
    pub text: String,
    pub buttons: Vec<ShapedButton>,
    pub silent: bool,
}

/// Parse and strip the markers of `reply`.
pub fn shape(reply: &str) -> Shaped {
    let mut text = reply.to_owned();
    let mut buttons = Vec::new();
    while let Some(start) = text.find("<buttons>") {
        let Some(len) = text[start..].find("</buttons>") else {
            // An unclosed marker: drop the tag, keep what follows as text.
            text.replace_range(start..start + "<buttons>".len(), "");
            continue;
        };
        let inner = text[start + "<buttons>".len()..start + len].to_owned();
        text.replace_range(start..start + len + "</buttons>".len(), "");
        // The last block wins.
        buttons = inner
            .split('|')
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(title)
            .fold(Vec::new(), |mut acc: Vec<String>, t| {
                if !acc.contains(&t) {
                    acc.push(t);
                }
                acc
            })
            .into_iter()
            .take(MAX_BUTTONS)
            .map(|t| ShapedButton {
                id: t.clone(),
                title: t,
            })
            .collect();
    }
    let mut silent = false;
    for marker in ["<silent/>", "<silent />"] {
        if text.contains(marker) {
            silent = true;
            text = text.replace(marker, "");
        }
    }
    let mut text = tidy(&text);
    if text.is_empty() && !buttons.is_empty() {
        // Buttons need words to hang from (and WhatsApp refuses an empty body).
        text = "Please choose one:".to_owned();
    }
    Shaped {
        text,
        buttons,
        silent,
    }
}

fn title(t: &str) -> String {
    if t.chars().count() <= MAX_BUTTON_TITLE {
        return t.to_owned();
    }
    let mut cut: String = t.chars().take(MAX_BUTTON_TITLE - 1).collect();
    cut = cut.trim_end().to_owned();
    cut.push('…');
    cut
}

/// Trim, and close the gaps removed markers leave (no more than one blank line in a row).
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.trim().lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn titles(s: &Shaped) -> Vec<&str> {
        s.buttons.iter().map(|b| b.title.as_str()).collect()
    }

    #[test]
    fn buttons_are_parsed_stripped_and_limited() {
        let s = shape("Cancel the Spring Open?\n\n<buttons>Yes, cancel | No, keep it</buttons>");
        assert_eq!(s.text, "Cancel the Spring Open?");
        assert_eq!(titles(&s), ["Yes, cancel", "No, keep it"]);
        assert_eq!(s.buttons[0].id, "Yes, cancel");
        let s = shape("Pick <buttons>a|b|c|d|a</buttons>");
        assert_eq!(titles(&s), ["a", "b", "c"]);
        let s = shape("<buttons>A very long button title indeed</buttons>");
        assert_eq!(titles(&s), ["A very long button…"]);
        assert!(s.buttons[0].title.chars().count() <= MAX_BUTTON_TITLE);
        assert_eq!(s.text, "Please choose one:");
    }

    #[test]
    fn the_last_block_wins_and_unclosed_tags_are_dropped() {
        let s = shape("<buttons>x</buttons> Choose: <buttons>y | z</buttons>");
        assert_eq!((s.text.as_str(), titles(&s)), ("Choose:", vec!["y", "z"]));
        let s = shape("Oops <buttons>Yes | No");
        assert_eq!((s.text.as_str(), s.buttons.len()), ("Oops Yes | No", 0));
    }

    #[test]
    fn silent_is_detected_and_stripped() {
        let s = shape("<silent/>");
        assert!(s.silent && s.text.is_empty());
        assert!(shape("Noted. <silent />").silent);
        assert!(!shape("Just text").silent);
    }

    #[test]
    fn plain_text_is_untouched_but_trimmed() {
        assert_eq!(shape("  Hello\nthere.  ").text, "Hello\nthere.");
        assert_eq!(shape("a\n\n\n\nb").text, "a\n\nb");
    }
}
