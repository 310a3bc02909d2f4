//! Splitting a reply into pieces a platform accepts: on paragraph boundaries first, then on
//! line, sentence and word boundaries, and only as a last resort inside a word: then between
//! grapheme clusters, so an emoji sequence (👨‍👩‍👧) or a letter with its accent stays whole,
//! unless one cluster alone is longer than a piece (never inside a character).

use unicode_segmentation::UnicodeSegmentation;

/// Split `text` into pieces of at most `max_chars` characters, in order. Joining the pieces
/// with the separators they were cut at gives `text` back up to whitespace at the cuts.
pub fn split(text: &str, max_chars: usize) -> Vec<String> {
    assert!(max_chars > 0, "a piece must hold at least one character");
    let mut pieces = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if rest.chars().count() <= max_chars {
            pieces.push(rest.to_owned());
            break;
        }
        // The byte index just past the first `max_chars` characters.
        let limit = rest
            .char_indices()
            .nth(max_chars)
            .map_or(rest.len(), |(i, _)| i);
        let window = &rest[..limit];
        let cut = ["\n\n", "\n", ". ", "! ", "? ", " "]
            .iter()
            .find_map(|sep| {
                window
                    .rfind(sep)
                    .filter(|&i| i > 0)
                    .map(|i| i + sep.trim_end().len())
            })
            .unwrap_or_else(|| last_cluster_start(rest, limit).unwrap_or(limit));
        pieces.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].trim_start();
    }
    pieces
}

/// The byte index of the last grapheme cluster of `text` that starts after its beginning and at
/// or before `limit`: the cut inside a word that splits no cluster.
fn last_cluster_start(text: &str, limit: usize) -> Option<usize> {
    text.grapheme_indices(true)
        .map(|(i, _)| i)
        .take_while(|&i| i <= limit)
        .filter(|&i| i > 0)
        .last()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_one_piece() {
        assert_eq!(split("Hello there.", 100), ["Hello there."]);
        assert!(split("   ", 10).is_empty());
    }

    #[test]
    fn paragraphs_are_preferred_cut_points() {
        let text = "First paragraph here.\n\nSecond one, a bit longer.\n\nThird.";
        assert_eq!(
            split(text, 30),
            [
                "First paragraph here.",
                "Second one, a bit longer.",
                "Third."
            ]
        );
    }

    #[test]
    fn then_sentences_then_words_then_characters() {
        assert_eq!(
            split("One two. Three four five.", 15),
            ["One two.", "Three four", "five."]
        );
        assert_eq!(split("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(split("ééééé", 2), ["éé", "éé", "é"]);
    }

    /// A cut inside a word falls between grapheme clusters: an emoji sequence joined by
    /// zero-width joiners, or a letter and its combining accent, is not torn apart (which
    /// would show as two half-symbols); a cluster longer than a piece is cut by character.
    #[test]
    fn a_cut_inside_a_word_keeps_each_symbol_whole() {
        let family = "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}"; // 5 characters
        assert_eq!(split(&format!("abc{family}"), 6), ["abc", family]);
        assert_eq!(split("abcde\u{301}f", 5), ["abcd", "e\u{301}f"]);
        assert_eq!(
            split(&format!("{family}{family}"), 7),
            [family, family],
            "each piece whole"
        );
        assert_eq!(split(family, 2).concat(), family, "longer than a piece");
    }

    proptest! {
        #[test]
        fn pieces_fit_and_keep_every_word_in_order(text in "[a-zé .\n]{0,400}", max in 1usize..60) {
            let pieces = split(&text, max);
            for p in &pieces {
                prop_assert!(p.chars().count() <= max, "{p:?} is longer than {max}");
                prop_assert!(!p.is_empty());
            }
            let words = |s: &str| s.split_whitespace().collect::<String>();
            prop_assert_eq!(words(&pieces.concat()), words(&text));
        }
    }
}
