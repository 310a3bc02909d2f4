//! Where an attachment is stored: `media/<channel>/<conversation key>/<message id>/<n>`, each
//! segment sanitised so it is a safe path segment and S3 key part on every platform.
//!
//! A segment keeps `A-Z a-z 0-9 . _ -`; anything else becomes `_`. When that changed the
//! segment (or it is empty, `.`/`..`, or longer than 80 characters), a short SHA-256 of the
//! original is appended, so two different ids never share a key. The same message always gets
//! the same key: a retried job overwrites what it stored before.

use sha2::{Digest, Sha256};

const MAX_SEGMENT: usize = 80;

/// The storage key of attachment `n` of a message.
pub fn media_key(channel: &str, conversation_key: &str, message_id: &str, n: usize) -> String {
    format!(
        "media/{}/{}/{}/{n}",
        segment(channel),
        segment(conversation_key),
        segment(message_id)
    )
}

/// Whether `key` is one [`media_key`] could have made (adapters refuse anything else, so a key
/// can never climb out of the store's folder).
pub fn is_media_key(key: &str) -> bool {
    let mut parts = key.split('/');
    parts.next() == Some("media")
        && parts.clone().count() == 4
        && parts.all(|p| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        })
}

fn segment(raw: &str) -> String {
    let clean: String = raw
        .chars()
        .take(MAX_SEGMENT)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean == raw && raw != "." && raw != ".." && !raw.is_empty() {
        return clean;
    }
    let digest = hex::encode(&Sha256::digest(raw.as_bytes())[..6]);
    format!("{clean}-{digest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ids_are_kept_as_they_are() {
        assert_eq!(
            media_key("whatsapp", "16315551181", "wamid.HBgL-abc_1", 0),
            "media/whatsapp/16315551181/wamid.HBgL-abc_1/0"
        );
    }

    #[test]
    fn unsafe_characters_are_replaced_and_the_original_is_hashed_in() {
        let a = media_key("twilio", "+15558675310:+15557654321", "SM1", 2);
        assert!(
            a.starts_with("media/twilio/_15558675310__15557654321-"),
            "{a}"
        );
        assert!(a.ends_with("/SM1/2"));
        assert!(is_media_key(&a), "{a}");
        // Two ids that sanitise alike still get different keys.
        let b = media_key("twilio", "_15558675310:+15557654321", "SM1", 2);
        assert_ne!(a, b);
        for evil in ["..", ".", "", "a/../../etc", "x\u{0}y", &"z".repeat(500)] {
            let k = media_key("slack", evil, evil, 0);
            assert!(is_media_key(&k), "{evil:?} gave {k}");
        }
    }

    #[test]
    fn the_same_message_always_gets_the_same_key() {
        assert_eq!(
            media_key("slack", "D0PNCRP9N:1700.1", "D0PNCRP9N:1700.2", 1),
            media_key("slack", "D0PNCRP9N:1700.1", "D0PNCRP9N:1700.2", 1)
        );
    }

    #[test]
    fn only_media_keys_are_accepted() {
        assert!(!is_media_key("media/a/b/../0"));
        assert!(!is_media_key("/etc/passwd"));
        assert!(!is_media_key("media/a/b/c"));
        assert!(!is_media_key("media/a/b/c/0/extra"));
        assert!(!is_media_key("other/a/b/c/0"));
    }
}
