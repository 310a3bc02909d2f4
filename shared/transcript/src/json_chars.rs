//! The length of a value's JSON text, counted as it is written, never stored.

use serde::Serialize;

/// How many characters `value` takes as compact JSON (as `serde_json::to_string` writes it),
/// without building the text: size checks and estimates run on every call, over whole
/// histories. A value that cannot be serialised counts as 0.
pub fn json_chars<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            // Every character has exactly one byte that is not a UTF-8 continuation byte.
            self.0 += buf.iter().filter(|b| (**b as i8) >= -0x40).count();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => 0,
    }
}

/// How many bytes `value` takes as compact JSON (UTF-8, as `serde_json::to_vec` writes it),
/// without building the text. A value that cannot be serialised counts as 0.
pub fn json_bytes<T: Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
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
    fn characters_are_counted_not_bytes() {
        for v in [
            json!({"a": "xxxx"}),
            json!({"text": "é€😀\n\"q\"", "n": [1.5, null, true, -3]}),
            json!("\u{0}\u{1f}"),
        ] {
            assert_eq!(json_chars(&v), v.to_string().chars().count(), "{v}");
        }
    }
}
