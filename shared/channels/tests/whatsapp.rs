//! WhatsApp: signature and handshake checks, every fixture parsed, and the sender against a
//! local fake Graph API.

use channels::whatsapp::{WhatsAppChannel, sign};
use channels::{Channel, ChannelError, Inbound, InboundMedia, InboundMessage, RawRequest};

const SECRET: &[u8] = b"6b2e1f0c8d9a4e7b3c5d2a1f0e9b8c7d";
const VERIFY_TOKEN: &str = "meatyhamhock";
/// `hmac.new(SECRET, open("tests/fixtures/whatsapp/text.json","rb").read(), sha256).hexdigest()`
/// in Python: pins the algorithm independently of this crate's `sign`.
const TEXT_SIGNATURE: &str =
    "sha256=131be21f6d71248dbc6a6cae81d754edddb8e812c4745b084a81bd71e02ec15d";
const USER: &str = "16315551181";

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/whatsapp/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn channel() -> WhatsAppChannel {
    WhatsAppChannel::new(SECRET, VERIFY_TOKEN)
}

fn signed(signature: Option<&str>) -> Vec<(String, String)> {
    let mut headers = vec![("Content-Type".to_owned(), "application/json".to_owned())];
    if let Some(s) = signature {
        headers.push(("X-Hub-Signature-256".to_owned(), s.to_owned()));
    }
    headers
}

fn post<'a>(headers: &'a [(String, String)], body: &'a [u8]) -> RawRequest<'a> {
    RawRequest {
        method: "POST",
        path: "/webhooks/whatsapp",
        query: None,
        headers,
        body,
        origin: None,
    }
}

/// Verify then parse, as the webhook does.
fn deliver(body: &[u8], signature: Option<&str>) -> Result<Inbound, ChannelError> {
    let headers = signed(signature);
    let req = post(&headers, body);
    let ch = channel();
    ch.verify(&req, 1_750_000_000)?;
    ch.parse(&req)
}

fn refused(result: Result<Inbound, ChannelError>) -> &'static str {
    match result {
        Err(ChannelError::BadSignature(why)) => why,
        other => panic!("expected a bad signature, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Verification

#[test]
fn the_fixture_signature_matches_an_independent_hmac() {
    let body = fixture("text");
    assert_eq!(sign(SECRET, &body), TEXT_SIGNATURE);
    assert!(deliver(&body, Some(TEXT_SIGNATURE)).is_ok());
    // Uppercase hex and any header-name case are accepted.
    let upper = format!("sha256={}", TEXT_SIGNATURE[7..].to_uppercase());
    assert!(deliver(&body, Some(&upper)).is_ok());
    let headers = vec![("x-hub-signature-256".to_owned(), TEXT_SIGNATURE.to_owned())];
    channel().verify(&post(&headers, &body), 0).unwrap();
}

#[test]
fn meta_escaped_unicode_verifies_and_the_reserialised_form_does_not() {
    let body = fixture("text");
    let raw = String::from_utf8(body.clone()).unwrap();
    assert!(raw.contains(r"r\u00e9servation"), "Meta escapes non-ASCII");
    let reserialised =
        serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&body).unwrap()).unwrap();
    assert!(String::from_utf8_lossy(&reserialised).contains("réservation"));
    assert_ne!(reserialised, body);
    assert!(deliver(&body, Some(TEXT_SIGNATURE)).is_ok());
    assert_eq!(
        refused(deliver(&reserialised, Some(TEXT_SIGNATURE))),
        "signature mismatch"
    );
}

#[test]
fn tampered_bodies_and_wrong_secrets_are_refused() {
    let body = fixture("text");
    let mut tampered = body.clone();
    let at = raw_find(&tampered, b"Bonjour");
    tampered[at] = b'b';
    assert_eq!(
        refused(deliver(&tampered, Some(TEXT_SIGNATURE))),
        "signature mismatch"
    );
    let wrong = sign(b"another app's secret", &body);
    assert_eq!(refused(deliver(&body, Some(&wrong))), "signature mismatch");
    let mut extra = body.clone();
    extra.push(b'\n');
    assert_eq!(
        refused(deliver(&extra, Some(TEXT_SIGNATURE))),
        "signature mismatch"
    );
}

fn raw_find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap()
}

#[test]
fn missing_or_malformed_signatures_are_refused() {
    let body = fixture("text");
    assert_eq!(refused(deliver(&body, None)), "missing signature");
    let hex = &TEXT_SIGNATURE[7..];
    for bad in [
        "sha256=zz",
        hex,                               // no scheme
        &format!("sha1={hex}"),            // the old header's scheme
        &format!("sha256={}", &hex[..62]), // truncated
        &format!("sha256={hex}00"),        // too long
        "",
    ] {
        assert_eq!(
            refused(deliver(&body, Some(bad))),
            "malformed signature",
            "{bad:?}"
        );
    }
}

#[test]
fn an_empty_app_secret_refuses_even_a_matching_signature() {
    let body = fixture("text");
    let headers = signed(Some(&sign(b"", &body)));
    let unset = WhatsAppChannel::new("", VERIFY_TOKEN);
    assert!(matches!(
        unset.verify(&post(&headers, &body), 0),
        Err(ChannelError::BadSignature("no app secret configured"))
    ));
}

#[test]
fn there_is_no_timestamp_so_no_replay_window() {
    let body = fixture("text");
    let headers = signed(Some(TEXT_SIGNATURE));
    for now in [0, 1_750_000_000, i64::MAX, i64::MIN] {
        channel().verify(&post(&headers, &body), now).unwrap();
    }
}

fn get(query: &str) -> RawRequest<'_> {
    RawRequest {
        method: "GET",
        path: "/webhooks/whatsapp",
        query: Some(query),
        headers: &[],
        body: b"",
        origin: None,
    }
}

#[test]
fn the_get_handshake_answers_the_challenge_only_for_the_verify_token() {
    let ch = channel();
    let ok = get("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock");
    ch.verify(&ok, 0).unwrap();
    assert_eq!(
        ch.parse(&ok).unwrap(),
        Inbound::Challenge("1158201444".into())
    );
    let wrong = get("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=guess");
    assert!(matches!(
        ch.verify(&wrong, 0),
        Err(ChannelError::BadSignature("verify token mismatch"))
    ));
    let no_challenge = get("hub.mode=subscribe&hub.verify_token=meatyhamhock");
    ch.verify(&no_challenge, 0).unwrap();
    assert!(matches!(
        ch.parse(&no_challenge),
        Err(ChannelError::Malformed(_))
    ));
}

#[test]
fn a_post_cannot_pass_with_the_verify_token_instead_of_a_signature() {
    let body = fixture("text");
    let headers = signed(None);
    let req = RawRequest {
        query: Some("hub.mode=subscribe&hub.challenge=1&hub.verify_token=meatyhamhock"),
        ..post(&headers, &body)
    };
    assert!(matches!(
        channel().verify(&req, 0),
        Err(ChannelError::BadSignature("missing signature"))
    ));
}

// ---------------------------------------------------------------------------------------------
// Parsing

fn parsed(name: &str) -> Inbound {
    let body = fixture(name);
    deliver(&body, Some(&sign(SECRET, &body))).unwrap()
}

fn message(id: &str, text: &str) -> InboundMessage {
    InboundMessage {
        // Every fixture's `metadata.phone_number_id`.
        addressed_to: Some("106540352242922".into()),
        channel: "whatsapp".into(),
        external_user_id: USER.into(),
        conversation_key: USER.into(),
        message_id: id.into(),
        text: text.into(),
        button_id: None,
        media: Vec::new(),
    }
}

fn media(reference: &str, mime_type: &str) -> Vec<InboundMedia> {
    vec![InboundMedia {
        reference: reference.into(),
        mime_type: mime_type.into(),
        size_bytes: None,
    }]
}

#[test]
fn user_messages_become_neutral_messages() {
    let cases = [
        (
            "text",
            message(
                "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=",
                "Bonjour, ça va ? J'ai une question sur ma réservation.",
            ),
        ),
        (
            "button_reply",
            InboundMessage {
                button_id: Some("confirm-booking-42".into()),
                ..message(
                    "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUZCMTY0MDc2MUYwNzBDNTY5MjQA",
                    "Yes, book it",
                )
            },
        ),
        (
            "list_reply",
            InboundMessage {
                button_id: Some("slot-0930".into()),
                ..message(
                    "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUM2QzA3NzM3NjlGMkQ4MTNBMQA=",
                    "9:30",
                )
            },
        ),
        (
            "legacy_button",
            InboundMessage {
                button_id: Some("STOP_PROMOTIONS".into()),
                ..message(
                    "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTk3MkY1QjZCQUJFNjJFMzM5QQA=",
                    "Stop promotions",
                )
            },
        ),
        (
            "image",
            InboundMessage {
                media: media("1003383421387256", "image/jpeg"),
                ..message(
                    "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUIyQjI0RkQzMzRCQUJCMjY1RQA=",
                    "Is this the right form?",
                )
            },
        ),
        (
            "document",
            InboundMessage {
                media: media("1240185820938441", "application/pdf"),
                ..message(
                    "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTVGNDNBMDRBRDk4QjNGQjRFOAA=",
                    "Invoice",
                )
            },
        ),
        (
            "audio",
            InboundMessage {
                media: media("2154820608308455", "audio/ogg; codecs=opus"),
                ..message(
                    "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQThFMDlCMUI5QjAyRTBCNDkwNAA=",
                    "",
                )
            },
        ),
        (
            "video",
            InboundMessage {
                media: media("1684302945534170", "video/mp4"),
                ..message(
                    "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTc4RjlEOTlCNzE2QkE3RjFBRgA=",
                    "",
                )
            },
        ),
    ];
    for (name, expected) in cases {
        assert_eq!(parsed(name), Inbound::Messages(vec![expected]), "{name}");
    }
}

#[test]
fn a_batch_yields_each_user_message_in_order_and_drops_the_rest() {
    let Inbound::Messages(got) = parsed("batch") else {
        panic!("expected messages")
    };
    let ana = "447700900123";
    assert_eq!(
        got,
        [
            message("wamid.BATCH1", "First"),
            InboundMessage {
                external_user_id: ana.into(),
                conversation_key: ana.into(),
                ..message("wamid.BATCH3", "Second, from Ana")
            },
            message("wamid.BATCH4", "Third"),
        ]
    );
}

/// A message in a batch that cannot be read (no sender, a text with no body) costs only
/// itself: the batch's other messages are taken, and the delivery is not refused (Meta would
/// send the whole batch again for days, its good messages never queued).
#[test]
fn a_message_that_cannot_be_read_costs_only_itself() {
    let good = String::from_utf8(fixture("batch")).unwrap();
    let broken = good
        .replace(r#""from":"447700900123","#, "")
        .replace(r#""text":{"body":"Third"}"#, r#""text":{}"#);
    assert_ne!(broken, good);
    let body = broken.into_bytes();
    let Inbound::Messages(got) = deliver(&body, Some(&sign(SECRET, &body))).unwrap() else {
        panic!("expected messages")
    };
    assert_eq!(got, [message("wamid.BATCH1", "First")]);
    // None readable: acknowledged and dropped, not refused.
    let none = String::from_utf8(fixture("text"))
        .unwrap()
        .replace(r#""from":"16315551181","#, "");
    let body = none.into_bytes();
    assert!(matches!(
        deliver(&body, Some(&sign(SECRET, &body))).unwrap(),
        Inbound::Ignored { .. }
    ));
}

#[test]
fn everything_that_is_not_a_user_message_is_ignored() {
    for (name, reason) in [
        ("status_delivered", "delivery status update"),
        ("status_read", "delivery status update"),
        ("status_failed", "delivery status update"),
        ("reaction", "reaction"),
        ("unsupported", "unsupported message type"),
        ("system", "system notice"),
        ("echo", "echo of the business number's own message"),
        ("no_messages", "no messages"),
    ] {
        assert_eq!(parsed(name), Inbound::Ignored { reason }, "{name}");
    }
}

#[test]
fn a_body_that_is_not_a_delivery_is_malformed() {
    for body in [&b"not json"[..], b"", b"[1,2]", br#"{"entry":{"oops":1}}"#] {
        assert!(
            matches!(
                deliver(body, Some(&sign(SECRET, body))),
                Err(ChannelError::Malformed(_))
            ),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Fuzz: verify and parse never panic, whatever the bytes.

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    const FIXTURES: [&str; 17] = [
        "text",
        "button_reply",
        "list_reply",
        "legacy_button",
        "image",
        "document",
        "audio",
        "video",
        "batch",
        "status_delivered",
        "status_read",
        "status_failed",
        "reaction",
        "unsupported",
        "system",
        "echo",
        "no_messages",
    ];

    fn exercise(method: &str, query: Option<&str>, signature: Option<&str>, body: &[u8]) {
        let headers = signed(signature);
        let req = RawRequest {
            method,
            query,
            ..post(&headers, body)
        };
        let ch = channel();
        let _ = ch.verify(&req, 1_750_000_000);
        let _ = ch.parse(&req);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes(
            body in proptest::collection::vec(any::<u8>(), 0..512),
            signature in proptest::option::of(".{0,80}"),
            query in proptest::option::of(".{0,80}"),
            get in any::<bool>(),
        ) {
            let method = if get { "GET" } else { "POST" };
            exercise(method, query.as_deref(), signature.as_deref(), &body);
            let signature = sign(SECRET, &body);
            exercise("POST", None, Some(&signature), &body);
        }

        #[test]
        fn mutated_fixtures(
            which in 0..FIXTURES.len(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
        ) {
            let mut body = fixture(FIXTURES[which]);
            for (at, byte, op) in edits {
                let len = body.len();
                match op {
                    0 if len > 0 => body[at.index(len)] = byte,
                    1 => body.insert(at.index(len + 1), byte),
                    _ if len > 0 => {
                        body.remove(at.index(len));
                    }
                    _ => {}
                }
            }
            let signature = sign(SECRET, &body);
            exercise("POST", None, Some(&signature), &body);
        }

        /// Valid JSON with one node swapped for a value of another shape, so parsing gets past
        /// the syntax and into the structure.
        #[test]
        fn reshaped_fixtures(
            which in 0..FIXTURES.len(),
            at in any::<prop::sample::Index>(),
            replacement in prop_oneof![
                Just(serde_json::Value::Null),
                Just(serde_json::json!(0)),
                Just(serde_json::json!(-1.5)),
                Just(serde_json::json!("")),
                Just(serde_json::json!("text")),
                Just(serde_json::json!([])),
                Just(serde_json::json!({})),
                Just(serde_json::json!(true)),
                Just(serde_json::json!([{"type": "text"}])),
            ],
        ) {
            let mut value: serde_json::Value =
                serde_json::from_slice(&fixture(FIXTURES[which])).unwrap();
            let count = nodes(&value);
            replace_nth(&mut value, &mut at.index(count), &replacement);
            let body = serde_json::to_vec(&value).unwrap();
            let signature = sign(SECRET, &body);
            exercise("POST", None, Some(&signature), &body);
        }
    }

    fn nodes(v: &serde_json::Value) -> usize {
        1 + match v {
            serde_json::Value::Array(a) => a.iter().map(nodes).sum(),
            serde_json::Value::Object(o) => o.values().map(nodes).sum(),
            _ => 0,
        }
    }

    /// Replace the `n`th node in pre-order; returns once it is done.
    fn replace_nth(v: &mut serde_json::Value, n: &mut usize, with: &serde_json::Value) -> bool {
        if *n == 0 {
            *v = with.clone();
            return true;
        }
        *n -= 1;
        match v {
            serde_json::Value::Array(a) => a.iter_mut().any(|c| replace_nth(c, n, with)),
            serde_json::Value::Object(o) => o.values_mut().any(|c| replace_nth(c, n, with)),
            _ => false,
        }
    }
}
