//! What goes on the wire, with no I/O: the message body of a job, and the SQS ids made from
//! its dedupe key and group.
//!
//! The body is a versioned envelope, `{"v":1,"job":{...}}`, where `job` is the [`TurnJob`] as
//! serde writes it. The version names the shape of `job`: a change that an older worker could
//! misread (a renamed or retyped field, a new field that must not be ignored) takes a new
//! version, and a worker rejects versions it does not know rather than guess. Additive fields
//! that an older worker may safely ignore keep the version.

use queue::TurnJob;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The envelope version this build writes, and the only one it reads.
pub const ENVELOPE_VERSION: u64 = 1;

/// The longest `MessageGroupId` / `MessageDeduplicationId` SQS takes.
const MAX_SQS_ID_CHARS: usize = 128;

/// A message body this build cannot read as a job.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Not JSON, not an envelope, or a version-1 envelope whose job does not decode.
    #[error("the message body is not a job envelope")]
    Malformed(#[source] serde_json::Error),
    /// A well-formed envelope of a version this build does not know.
    #[error("job envelope version {0} is unknown (this build reads version {ENVELOPE_VERSION})")]
    UnknownVersion(u64),
}

#[derive(Serialize, Deserialize)]
struct Envelope<T> {
    v: u64,
    job: T,
}

/// Only the version, read first, so an unknown version is named as such whatever its job holds.
#[derive(Deserialize)]
struct Version {
    v: u64,
}

/// The message body of `job`: `{"v":1,"job":{...}}`. Written by sonic-rs, the serde JSON
/// serialiser that escapes strings with SIMD: the body is as long as the user's text and this
/// runs once per webhook request (serde_json's byte-at-a-time escaping was a quarter of the
/// handler's time on a 4 KB text). The bytes are serde_json's (a test pins it), except that
/// U+FFFE and U+FFFF are written as `\ufffe` and `\uffff`: SQS refuses a body holding either
/// (it takes only tab, LF, CR, U+0020–U+D7FF, U+E000–U+FFFD and U+10000–U+10FFFF; JSON already
/// escapes the control characters), so a sender who typed one would have had the webhook
/// answer 500 for a message that can never be queued, and the platform retry it for days
/// (Telegram holds back the bot's later updates meanwhile). Both can only stand inside a JSON
/// string, where the escape reads back as the same character.
pub fn encode_job(job: &TurnJob) -> Result<String, serde_json::Error> {
    let body = sonic_rs::to_string(&Envelope {
        v: ENVELOPE_VERSION,
        job,
    })
    .map_err(serde::ser::Error::custom)?;
    Ok(if body.contains(SQS_REFUSES) {
        body.replace('\u{fffe}', "\\ufffe")
            .replace('\u{ffff}', "\\uffff")
    } else {
        body
    })
}

/// The characters a Rust string can hold, JSON does not escape, and SQS refuses in a body.
const SQS_REFUSES: [char; 2] = ['\u{fffe}', '\u{ffff}'];

/// The job in a message body written by [`encode_job`]; any other version is rejected.
pub fn decode_job(body: &str) -> Result<TurnJob, DecodeError> {
    let Version { v } = serde_json::from_str(body).map_err(DecodeError::Malformed)?;
    if v != ENVELOPE_VERSION {
        return Err(DecodeError::UnknownVersion(v));
    }
    let envelope: Envelope<TurnJob> = serde_json::from_str(body).map_err(DecodeError::Malformed)?;
    Ok(envelope.job)
}

/// `key` as an SQS `MessageGroupId` or `MessageDeduplicationId`: as is when SQS takes it (1 to
/// 128 characters, each an ASCII letter, digit or punctuation mark), else the lowercase hex
/// SHA-256 of it (64 characters). Equal keys give equal ids; different keys give different ids
/// (a key that is itself 64 hex digits could only meet another key's hash by finding a
/// SHA-256 preimage).
pub fn sqs_id(key: &str) -> String {
    let fits = (1..=MAX_SQS_ID_CHARS).contains(&key.len())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c.is_ascii_punctuation());
    if fits {
        key.to_owned()
    } else {
        format!("{:x}", Sha256::digest(key.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queue::JobMedia;
    use serde_json::json;

    fn job() -> TurnJob {
        TurnJob {
            addressed_to: None,
            trace_context: Default::default(),
            channel: "telegram".into(),
            message_id: "4711".into(),
            conversation_key: "chat-9".into(),
            external_user_id: "user-1".into(),
            text: "caf\u{e9} \"quoted\"\n".into(),
            button_id: Some("yes".into()),
            media: vec![JobMedia {
                reference: "file/1".into(),
                mime_type: "image/png".into(),
                size_bytes: Some(u64::MAX),
            }],
            received_at_ms: i64::MIN,
        }
    }

    #[test]
    fn the_body_is_the_job_inside_a_version_1_envelope() {
        let body = encode_job(&job()).unwrap();
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            value,
            json!({ "v": 1, "job": serde_json::to_value(job()).unwrap() })
        );
        assert!(
            body.starts_with(r#"{"v":1,"job":{"#),
            "the version leads the body: {body}"
        );
    }

    /// The body is byte for byte what serde_json writes for the envelope.
    #[test]
    fn the_body_is_serde_jsons_envelope_byte_for_byte() {
        let mut plain = job();
        plain.button_id = None;
        plain.media.push(JobMedia {
            reference: "file/\u{0}2".into(),
            mime_type: "text/plain".into(),
            size_bytes: None,
        });
        let mut empty = job();
        empty.media.clear();
        empty.text = String::new();
        for job in [job(), plain, empty] {
            let serde = serde_json::to_string(&Envelope {
                v: ENVELOPE_VERSION,
                job: &job,
            })
            .unwrap();
            assert_eq!(encode_job(&job).unwrap(), serde);
        }
    }

    /// What SQS takes in a message body (its `SendMessage` reference).
    fn sqs_takes(c: char) -> bool {
        matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
    }

    #[test]
    fn a_body_holds_only_characters_sqs_takes_and_reads_back_the_same() {
        let refused: String = ('\u{0}'..'\u{20}')
            .chain(['\u{7f}', '\u{fffe}', '\u{ffff}', '\u{fffd}', '\u{10ffff}'])
            .collect();
        let mut strange = job();
        strange.text = format!("a{refused}b\u{ffff}\u{ffff}c\\uffff");
        strange.conversation_key = refused.clone();
        strange.external_user_id = "\u{fffe}".into();
        strange.message_id = format!("m{refused}");
        strange.media[0].reference = refused.clone();
        let body = encode_job(&strange).unwrap();
        let bad: Vec<char> = body.chars().filter(|&c| !sqs_takes(c)).collect();
        assert!(bad.is_empty(), "SQS would refuse {bad:?} in {body:?}");
        assert!(body.contains(r"b\uffff\uffffc\\uffff"), "{body}");
        assert_eq!(decode_job(&body).unwrap(), strange);
    }

    proptest::proptest! {
        /// Any text, however strange, is queued as a body SQS takes and read back unchanged.
        #[test]
        fn any_text_makes_a_body_sqs_takes(
            chars in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::any::<char>(),
                    proptest::sample::select(vec!['\u{0}', '\u{1f}', '\u{fffe}', '\u{ffff}', '"', '\\']),
                ],
                0..64,
            )
        ) {
            let mut any = job();
            any.text = chars.into_iter().collect();
            let body = encode_job(&any).unwrap();
            proptest::prop_assert!(body.chars().all(sqs_takes), "{:?}", body);
            proptest::prop_assert_eq!(decode_job(&body).unwrap(), any);
        }
    }

    #[test]
    fn a_job_round_trips_exactly() {
        assert_eq!(decode_job(&encode_job(&job()).unwrap()).unwrap(), job());
        let addressed = TurnJob {
            addressed_to: Some("106540352242922".into()),
            ..job()
        };
        assert_eq!(
            decode_job(&encode_job(&addressed).unwrap()).unwrap(),
            addressed
        );
    }

    /// A job queued before jobs named the address they were sent to reads as sent to no address
    /// in particular (answered, as it was then), and such a job is still written that way.
    #[test]
    fn a_job_without_an_address_reads_as_before() {
        let body = encode_job(&job()).unwrap();
        assert!(!body.contains("addressed_to"), "{body}");
        assert_eq!(decode_job(&body).unwrap().addressed_to, None);
    }

    #[test]
    fn an_unknown_version_is_rejected_by_number() {
        let job = serde_json::to_value(job()).unwrap();
        for v in [0, 2, u64::MAX] {
            let body = json!({ "v": v, "job": job }).to_string();
            assert!(
                matches!(decode_job(&body), Err(DecodeError::UnknownVersion(n)) if n == v),
                "version {v}"
            );
        }
        let body = json!({ "v": 2, "job": "a shape this build has never seen" }).to_string();
        assert!(matches!(
            decode_job(&body),
            Err(DecodeError::UnknownVersion(2))
        ));
    }

    #[test]
    fn anything_but_an_envelope_is_malformed() {
        let bare_job = serde_json::to_string(&job()).unwrap();
        for body in [
            "",
            "not json",
            "[]",
            r#"{"job":{}}"#,
            r#"{"v":"1","job":{}}"#,
            r#"{"v":-1,"job":{}}"#,
            r#"{"v":1}"#,
            r#"{"v":1,"job":{"channel":"web"}}"#,
            bare_job.as_str(),
        ] {
            assert!(
                matches!(decode_job(body), Err(DecodeError::Malformed(_))),
                "{body:?} must be Malformed"
            );
        }
    }

    #[test]
    fn an_id_sqs_takes_is_kept_as_is() {
        let punctuation = r##"!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~"##;
        for key in ["web#m1", "a", punctuation, &"x".repeat(128)] {
            assert_eq!(sqs_id(key), key);
        }
    }

    #[test]
    fn an_id_sqs_refuses_becomes_its_sha256() {
        for key in [
            "",
            "whatsapp#+34 600 00 00 00",
            "whatsapp#wamid.HBgLMzQ2\u{e9}==",
            "tab\there",
            &"x".repeat(129),
        ] {
            let id = sqs_id(key);
            assert_eq!(id.len(), 64, "{key:?} → {id}");
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
            );
            assert_eq!(sqs_id(key), id, "the same key must give the same id");
        }
        assert_eq!(
            sqs_id(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_ne!(sqs_id(&"x".repeat(129)), sqs_id(&"x".repeat(130)));
    }
}
