//! The length of a value's JSON text, counted as it is written, never stored.

use serde::Serialize;

/// How many characters `value` takes as compact JSON (as `serde_json::to_string` writes it),
/// without building the text: size checks and estimates run on every call, over whole
/// histories. A value that cannot be serialised counts as 0.
pub fn json_chars<T: Serialize + ?Sized>(value: &T) -> usize {
    // Every character has exactly one byte that is not a UTF-8 continuation byte.
    counted(value, |buf| {
        buf.iter().filter(|b| (**b as i8) >= -0x40).count()
    })
}

/// How many bytes `value` takes as compact JSON (UTF-8, as `serde_json::to_vec` writes it),
/// without building the text. A value that cannot be serialised counts as 0.
pub fn json_bytes<T: Serialize + ?Sized>(value: &T) -> usize {
    counted(value, <[u8]>::len)
}

/// Σ `measure` over the pieces of `value`'s JSON as they are written; 0 if it cannot be.
fn counted<T: Serialize + ?Sized>(value: &T, measure: fn(&[u8]) -> usize) -> usize {
    struct Count(usize, fn(&[u8]) -> usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += (self.1)(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0, measure);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn characters_and_bytes_are_counted_as_the_text_has_them() {
        for v in [
            json!({"a": "xxxx"}),
            json!({"text": "é€😀\n\"q\"", "n": [1.5, null, true, -3]}),
            json!("\u{0}\u{1f}"),
        ] {
            assert_eq!(json_chars(&v), v.to_string().chars().count(), "{v}");
            assert_eq!(json_bytes(&v), v.to_string().len(), "{v}");
        }
    }
}
