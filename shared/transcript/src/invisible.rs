/// Unicode's invisible formatting characters (category Cf): a right-to-left override turns the
/// rest of a line around as it is shown ("…to 5" read as "…5 ot"), a zero-width one makes two
/// names that read alike differ, or splits a word a check looks for without changing how it
/// reads. Text from users and models is checked with them left out.
pub fn is_invisible_format(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
        | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}' | '\u{e0001}'
        | '\u{e0020}'..='\u{e007f}')
}

#[cfg(test)]
mod tests {
    use super::is_invisible_format;

    #[test]
    fn the_invisible_ones_and_no_others() {
        for c in [
            '\u{200b}',
            '\u{202e}',
            '\u{2066}',
            '\u{feff}',
            '\u{ad}',
            '\u{e0041}',
        ] {
            assert!(is_invisible_format(c), "{c:?}");
        }
        for c in ['a', ' ', '\n', '<', 'é', '‹', '😀'] {
            assert!(!is_invisible_format(c), "{c:?}");
        }
    }
}
