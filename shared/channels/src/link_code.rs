//! One-time link codes: how a channel account is bound to a signed-in user.
//!
//! A code is 8 characters from an alphabet without look-alikes (no `0`/`O`, `1`/`I`/`L`),
//! shown as `ABCD-2345`, and always holds at least one letter and one digit, so an ordinary word
//! is never mistaken for one. People retype codes: the finder accepts any case, with or without
//! the dash, anywhere in a message — also after Telegram's `/start` deep link
//! (`https://t.me/<bot>?start=ABCD2345` arrives as `/start ABCD2345`). Codes are stored and
//! redeemed in their canonical form ([`canonical`]): upper case, no dash.

/// The characters a code is made of: digits 2–9 and letters without I, L, O.
pub const ALPHABET: &[u8] = b"23456789ABCDEFGHJKMNPQRSTUVWXYZ";

/// Characters in a code (without the dash).
pub const LENGTH: usize = 8;

/// How long a link code made from the web or by the operator stays live: 30 minutes.
pub const LIFETIME_MS: i64 = 30 * 60 * 1000;

/// Why a code could not be made.
#[derive(Debug, thiserror::Error)]
#[error("the system's random number source failed; try again")]
pub struct NoRandomness(#[source] getrandom::Error);

/// A fresh random code in canonical form (e.g. `ABCD2345`).
pub fn generate() -> Result<String, NoRandomness> {
    loop {
        let mut bytes = [0u8; LENGTH];
        getrandom::fill(&mut bytes).map_err(NoRandomness)?;
        // 31 symbols: reject bytes ≥ 248 (= 8 × 31) so every symbol is equally likely.
        if bytes.iter().any(|&b| b >= 248) {
            continue;
        }
        let code: String = bytes
            .iter()
            .map(|&b| ALPHABET[(b % 31) as usize] as char)
            .collect();
        if is_code_shaped(&code) {
            return Ok(code);
        }
    }
}

/// The code as people are shown it: `ABCD-2345`.
pub fn display(code: &str) -> String {
    let canonical = canonical(code).unwrap_or_else(|| code.to_owned());
    if canonical.len() == LENGTH {
        format!("{}-{}", &canonical[..4], &canonical[4..])
    } else {
        canonical
    }
}

/// The canonical form of `token` if it is shaped like a code: 8 alphabet characters (any case),
/// optionally split 4-4 by one dash, at least one letter and one digit.
pub fn canonical(token: &str) -> Option<String> {
    let compact: String = match token.split_once('-') {
        Some((a, b)) if a.len() == 4 && b.len() == 4 => format!("{a}{b}"),
        Some(_) => return None,
        None => token.to_owned(),
    };
    let upper = compact.to_ascii_uppercase();
    is_code_shaped(&upper).then_some(upper)
}

fn is_code_shaped(s: &str) -> bool {
    s.len() == LENGTH
        && s.bytes().all(|b| ALPHABET.contains(&b))
        && s.bytes().any(|b| b.is_ascii_digit())
        && s.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Every code-shaped token in a message, canonical, in order, without repeats. Tokens are
/// split on anything that cannot be part of a code, so punctuation and quotes around a code
/// (`"abcd-2345".`) do not hide it.
pub fn find(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for token in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
        let token = token.trim_matches('-');
        if let Some(code) = canonical(token)
            && !found.contains(&code)
        {
            found.push(code);
        }
    }
    found
}

/// Whether the message is nothing but a code (optionally after `/start`): such a message is a
/// linking attempt even when the code is no longer valid.
pub fn is_only_a_code(text: &str) -> bool {
    let rest = text.trim();
    let rest = rest.strip_prefix("/start").unwrap_or(rest).trim();
    let rest = rest.trim_matches(|c: char| c.is_ascii_punctuation() && c != '-');
    canonical(rest).is_some()
}

/// The word a chat linked to one account sends before the move code it was given, to move to
/// another account: `MOVE ABCD-2345` (see [`is_move`]).
pub const MOVE_WORD: &str = "MOVE";

/// Whether the message is [`MOVE_WORD`] and a code, nothing else (any case): an attempt to
/// move a linked chat, answered as a linking attempt even when the code does not work. What
/// moves a chat is the code (a move code made for that chat), not the word.
pub fn is_move(text: &str) -> bool {
    is_word_and_code(text, MOVE_WORD)
}

/// The word before a code that links a number whose sender the platform does not prove (SMS)
/// to the account a link code named: `LINK <code>`, with the code texted to that number.
pub const LINK_WORD: &str = "LINK";

/// Whether `text` is `LINK` and a code alone ([`LINK_WORD`]), as [`is_move`] reads `MOVE`.
pub fn is_link(text: &str) -> bool {
    is_word_and_code(text, LINK_WORD)
}

fn is_word_and_code(text: &str, word: &str) -> bool {
    text.trim()
        .split_once(char::is_whitespace)
        .is_some_and(|(first, rest)| {
            first.trim_end_matches(':').eq_ignore_ascii_case(word) && is_only_a_code(rest)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_is_the_word_and_a_code_alone() {
        for text in ["MOVE ABCD-2345", "move abcd2345", "  Move   ABCD-2345. "] {
            assert!(is_move(text), "{text}");
            assert_eq!(find(text), ["ABCD2345"]);
        }
        for text in [
            "ABCD-2345",
            "/start ABCD2345",
            "MOVE",
            "MOVE it ABCD-2345",
            "please move ABCD-2345",
            "REMOVE ABCD-2345",
            "MOVE ABCD-2345 now",
        ] {
            assert!(!is_move(text), "{text}");
        }
    }

    #[test]
    fn generated_codes_are_found_in_any_form() {
        for _ in 0..200 {
            let code = generate().unwrap();
            assert_eq!(canonical(&code).as_deref(), Some(code.as_str()));
            let shown = display(&code);
            assert_eq!(shown.len(), 9);
            assert_eq!(
                find(&format!("my code is {shown}, thanks")),
                vec![code.clone()]
            );
            assert_eq!(find(&shown.to_lowercase()), vec![code.clone()]);
            assert_eq!(find(&format!("/start {code}")), vec![code.clone()]);
            assert!(is_only_a_code(&format!("/start {code}")));
            assert!(is_only_a_code(&format!(" {shown}. ")));
        }
    }

    #[test]
    fn codes_differ() {
        let a: std::collections::HashSet<String> = (0..100).map(|_| generate().unwrap()).collect();
        assert_eq!(a.len(), 100);
    }

    #[test]
    fn ordinary_words_and_numbers_are_not_codes() {
        for text in [
            "strength",
            "STRENGTH",
            "12345678",
            "call me at 555-1234",
            "ABCD-23456",
            "ABCD2345X",
            "a1b2c3d",
            "hello world",
            "ABCD-2-345",
            "OOOO1111",
        ] {
            assert!(find(text).is_empty(), "{text}");
            assert!(!is_only_a_code(text), "{text}");
        }
        assert!(!is_only_a_code("link ABCD-2345 please"));
        assert_eq!(find("link ABCD-2345 please"), ["ABCD2345"]);
    }
}
