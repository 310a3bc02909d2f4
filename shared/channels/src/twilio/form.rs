//! Strict `application/x-www-form-urlencoded` decoding, shared by verification and parsing.
//!
//! Twilio always encodes its parameters properly, so anything sloppy is refused rather than
//! guessed at: every field must be `name=value`, every `%` must start a two-digit escape, and the
//! decoded bytes must be UTF-8. (The lenient WHATWG decoder would map different bodies to the
//! same parameters, e.g. any invalid UTF-8 to U+FFFD, which a signature check must not do.)

/// Why a body is not a form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotAForm;

/// The decoded `(name, value)` pairs, in body order, repeats kept.
pub(crate) fn decode(body: &[u8]) -> Result<Vec<(String, String)>, NotAForm> {
    body.split(|&b| b == b'&')
        .filter(|field| !field.is_empty())
        .map(|field| {
            let eq = field.iter().position(|&b| b == b'=').ok_or(NotAForm)?;
            Ok((unescape(&field[..eq])?, unescape(&field[eq + 1..])?))
        })
        .collect()
}

fn unescape(raw: &[u8]) -> Result<String, NotAForm> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = raw.get(i + 1).and_then(|&b| hex_digit(b)).ok_or(NotAForm)?;
                let lo = raw.get(i + 2).and_then(|&b| hex_digit(b)).ok_or(NotAForm)?;
                out.push((hi << 4) | lo);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| NotAForm)
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(body: &str) -> Vec<(String, String)> {
        decode(body.as_bytes()).unwrap()
    }

    #[test]
    fn plus_and_percent_twenty_both_decode_to_a_space() {
        assert_eq!(
            pairs("Body=Hi+there%20you&From=%2B15551234567"),
            [
                ("Body".to_owned(), "Hi there you".to_owned()),
                ("From".to_owned(), "+15551234567".to_owned())
            ]
        );
    }

    #[test]
    fn utf8_escapes_repeats_and_empty_values_are_kept() {
        assert_eq!(
            pairs("Body=caf%C3%A9&A=&A=2&&"),
            [
                ("Body".to_owned(), "café".to_owned()),
                ("A".to_owned(), String::new()),
                ("A".to_owned(), "2".to_owned())
            ]
        );
        assert!(pairs("").is_empty());
    }

    #[test]
    fn sloppy_bodies_are_refused() {
        for body in [
            &b"no-equals-sign"[..],
            b"A=%",
            b"A=%4",
            b"A=%zz",
            b"A=%FF",
            b"A=\xff",
        ] {
            assert_eq!(decode(body), Err(NotAForm), "{body:?}");
        }
    }
}
