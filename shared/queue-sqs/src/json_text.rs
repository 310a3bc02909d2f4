//! JSON strings written fast, byte for byte as serde_json writes them.
//!
//! serde_json checks a string one byte at a time; a job's text is most of a message body, so
//! [`push_str`] looks at 32 bytes at a time (four 8-byte words) and copies the runs that need
//! no escaping whole.

/// `s` as a JSON string (quotes included), appended to `out`: `"` and `\` escaped, the control
/// characters below U+0020 as `\b \t \n \f \r` or `\u00XX`, everything else as is. (The
/// bytes to escape are ASCII, so every run between them is whole characters.)
pub(crate) fn push_str(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push('"');
    let mut start = 0;
    let mut i = 0;
    loop {
        i += clean_words(&bytes[i..]);
        let Some(&b) = bytes.get(i) else { break };
        if b < 0x20 || b == b'"' || b == b'\\' {
            out.push_str(&s[start..i]);
            escape(out, b);
            start = i + 1;
        }
        i += 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// How many leading bytes of `bytes`, in whole 8-byte words, need no escaping.
fn clean_words(bytes: &[u8]) -> usize {
    let word = |chunk: &[u8]| u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
    let mut n = 0;
    for block in bytes.chunks_exact(32) {
        let flagged = to_escape(word(&block[..8]))
            | to_escape(word(&block[8..16]))
            | to_escape(word(&block[16..24]))
            | to_escape(word(&block[24..]));
        if flagged != 0 {
            break;
        }
        n += 32;
    }
    for chunk in bytes[n..].chunks_exact(8) {
        if to_escape(word(chunk)) != 0 {
            break;
        }
        n += 8;
    }
    n
}

/// Non-zero when any of the eight bytes in `word` is below 0x20, `"` or `\`.
fn to_escape(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Some byte of x is below n (n <= 0x80) exactly when `(x - ONES * n) & !x & HIGHS` is
    // non-zero; a byte equal to c becomes zero, so below 1, after `^ ONES * c`.
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGHS;
    below(word, 0x20)
        | below(word ^ (ONES * u64::from(b'"')), 1)
        | below(word ^ (ONES * u64::from(b'\\')), 1)
}

fn escape(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.push_str("\\\""),
        b'\\' => out.push_str("\\\\"),
        b'\x08' => out.push_str("\\b"),
        b'\t' => out.push_str("\\t"),
        b'\n' => out.push_str("\\n"),
        b'\x0c' => out.push_str("\\f"),
        b'\r' => out.push_str("\\r"),
        _ => {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xf)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &str) {
        let mut out = String::new();
        push_str(&mut out, s);
        assert_eq!(out, serde_json::to_string(s).unwrap(), "{s:?}");
    }

    #[test]
    fn every_byte_is_written_as_serde_json_writes_it() {
        let every_char: String = (0u32..0x200).filter_map(char::from_u32).collect();
        check(&every_char);
        check("");
        check("café \"quoted\" \\ back\nslash\u{7f}\u{1f}\u{0}\u{2028}😀");
        // Bytes to escape at every position of a 32-byte block, an 8-byte word and the tail.
        let base = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ-+".repeat(2);
        for pos in 0..base.len() {
            for special in [
                '"', '\\', '\n', '\u{1}', '\u{1f}', ' ', '!', '#', '[', ']', 'é',
            ] {
                let mut s = base.clone();
                s.replace_range(pos..pos + 1, &special.to_string());
                check(&s);
                check(&s[..pos + special.len_utf8()]);
            }
        }
    }

    #[test]
    fn only_the_bytes_to_escape_stop_the_fast_path() {
        for b in 0u8..=0xff {
            let word = u64::from_le_bytes([b'a', b'a', b'a', b, b'a', b'a', b'a', b'a']);
            let flagged = to_escape(word) != 0;
            assert_eq!(flagged, b < 0x20 || b == b'"' || b == b'\\', "{b:#x}");
        }
    }
}
