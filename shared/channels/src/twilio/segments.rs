//! How many segments a carrier bills for one text message: what a reply costs on SMS.
//!
//! A body of GSM-7 characters only goes as 7-bit septets, 160 to a lone segment; any other
//! character sends the whole body as UCS-2, 70 UTF-16 units to a lone segment. A longer body
//! is sent as concatenated segments, each giving room to a header: 153 septets or 67 units,
//! and a character is never split between two (an escaped GSM-7 character is two septets, a
//! character outside the Basic Multilingual Plane two units). Twilio's smart encoding, which
//! may swap look-alikes (curly quotes) for GSM-7 ones, is off by default, and counted off here:
//! never fewer segments than billed.

/// The GSM 03.38 basic character set: one septet each.
const BASIC: &str = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?\
¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
/// The extension table: an escape septet and one more each.
const EXTENDED: &str = "\u{c}^{}\\[~]|€";

/// The segments a carrier bills for `body` sent as one message (0 for an empty body).
pub fn segments(body: &str) -> u32 {
    let gsm: Option<Vec<u32>> = body
        .chars()
        .map(|c| match c {
            c if BASIC.contains(c) => Some(1),
            c if EXTENDED.contains(c) => Some(2),
            _ => None,
        })
        .collect();
    let (units, single, each) = match gsm {
        Some(septets) => (septets, 160, 153),
        None => (body.chars().map(|c| c.len_utf16() as u32).collect(), 70, 67),
    };
    let total: u32 = units.iter().sum();
    if total == 0 {
        return 0;
    }
    if total <= single {
        return 1;
    }
    let (mut count, mut room) = (1, each);
    for unit in units {
        if unit > room {
            count += 1;
            room = each;
        }
        room -= unit;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::segments;

    #[test]
    fn gsm_text_fills_160_alone_and_153_joined() {
        assert_eq!(segments(""), 0);
        assert_eq!(segments("Hello"), 1);
        assert_eq!(segments(&"a".repeat(160)), 1);
        assert_eq!(segments(&"a".repeat(161)), 2);
        assert_eq!(segments(&"a".repeat(306)), 2);
        assert_eq!(segments(&"a".repeat(307)), 3);
        // Twilio's longest body, 1,600 GSM-7 characters, bills 11 segments.
        assert_eq!(segments(&"a".repeat(1_600)), 11);
    }

    #[test]
    fn an_extended_character_takes_two_septets_never_split() {
        assert_eq!(segments(&"€".repeat(80)), 1);
        assert_eq!(segments(&format!("{}€", "a".repeat(159))), 2);
        // 152 septets, then a pair that does not fit in the one left: a third segment starts.
        let body = format!("{}€{}", "a".repeat(152), "b".repeat(152));
        assert_eq!(segments(&body), 3);
    }

    #[test]
    fn any_other_character_sends_the_body_as_ucs2() {
        assert_eq!(segments(&"é".repeat(160)), 1, "é is GSM-7");
        assert_eq!(segments(&format!("{}ç", "a".repeat(69))), 1);
        assert_eq!(segments(&format!("{}ç", "a".repeat(70))), 2);
        assert_eq!(segments(&"ç".repeat(134)), 2);
        assert_eq!(segments(&"ç".repeat(135)), 3);
        // An emoji is two UTF-16 units, never split: 33 fill 66 units of 67.
        assert_eq!(segments(&"😀".repeat(35)), 1);
        assert_eq!(segments(&"😀".repeat(36)), 2);
        assert_eq!(segments(&"😀".repeat(67)), 3);
        assert_eq!(segments(&"ç".repeat(1_600)), 24);
    }
}
