//! Slack inbound: signature checks (Slack's own published example first), every fixture parsed,
//! and a fuzz over arbitrary and mutated bytes.

use channels::slack::{self, SlackChannel};
use channels::{Channel, ChannelError, Inbound, InboundMedia, InboundMessage, RawRequest};
use proptest::prelude::*;

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const NOW: i64 = 1_531_420_618;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/slack/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn headers(ts: &str, signature: &str) -> Vec<(String, String)> {
    vec![
        ("X-Slack-Request-Timestamp".into(), ts.into()),
        ("X-Slack-Signature".into(), signature.into()),
    ]
}

fn request<'a>(headers: &'a [(String, String)], body: &'a [u8]) -> RawRequest<'a> {
    RawRequest {
        method: "POST",
        path: "/webhooks/slack",
        query: None,
        headers,
        body,
        origin: None,
    }
}

fn verify(headers: &[(String, String)], body: &[u8], now: i64) -> Result<(), ChannelError> {
    SlackChannel::new(SECRET).verify(&request(headers, body), now)
}

#[track_caller]
fn refused(result: Result<(), ChannelError>, why: &str) {
    match result {
        Err(ChannelError::BadSignature(w)) => assert_eq!(w, why),
        other => panic!("expected BadSignature({why:?}), got {other:?}"),
    }
}

/// Sign a body as Slack would at `NOW`, verify it, parse it.
fn check(body: &[u8]) -> Inbound {
    let ts = NOW.to_string();
    let h = headers(&ts, &slack::sign(SECRET.as_bytes(), &ts, body));
    let ch = SlackChannel::new(SECRET);
    let req = request(&h, body);
    ch.verify(&req, NOW).expect("a signed request verifies");
    ch.parse(&req).expect("a fixture parses")
}

fn one_message(body: &[u8]) -> InboundMessage {
    match check(body) {
        Inbound::Messages(mut m) if m.len() == 1 => m.remove(0),
        other => panic!("expected one message, got {other:?}"),
    }
}

// ---- verification -------------------------------------------------------------------------

/// https://api.slack.com/authentication/verifying-requests-from-slack, step by step.
const SLACK_EXAMPLE_TS: &str = "1531420618";
const SLACK_EXAMPLE_SIGNATURE: &str =
    "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

#[test]
fn slacks_published_example_verifies() {
    let body = fixture("slash_command.txt");
    assert!(body.starts_with(b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J"));
    assert_eq!(
        slack::sign(SECRET.as_bytes(), SLACK_EXAMPLE_TS, &body),
        SLACK_EXAMPLE_SIGNATURE
    );
    let h = headers(SLACK_EXAMPLE_TS, SLACK_EXAMPLE_SIGNATURE);
    verify(&h, &body, NOW).unwrap();
    // The example is a slash command, which Bridle does not offer.
    assert_eq!(
        SlackChannel::new(SECRET)
            .parse(&request(&h, &body))
            .unwrap(),
        Inbound::Ignored {
            reason: "a slash command"
        }
    );
}

#[test]
fn a_tampered_body_or_another_secret_fails() {
    let body = fixture("slash_command.txt");
    let h = headers(SLACK_EXAMPLE_TS, SLACK_EXAMPLE_SIGNATURE);
    let tampered = String::from_utf8(body.clone())
        .unwrap()
        .replace("roadrunner", "coyote");
    refused(verify(&h, tampered.as_bytes(), NOW), "signature mismatch");
    let mut extra = body.clone();
    extra.push(b'\n');
    refused(verify(&h, &extra, NOW), "signature mismatch");
    let wrong = slack::sign(b"another-secret", SLACK_EXAMPLE_TS, &body);
    refused(
        verify(&headers(SLACK_EXAMPLE_TS, &wrong), &body, NOW),
        "signature mismatch",
    );
    // The timestamp is signed too: moving it breaks the signature.
    refused(
        verify(&headers("1531420619", SLACK_EXAMPLE_SIGNATURE), &body, NOW),
        "signature mismatch",
    );
    refused(
        SlackChannel::new("").verify(&request(&h, &body), NOW),
        "no signing secret configured",
    );
}

#[test]
fn missing_or_malformed_headers_fail() {
    let body = fixture("slash_command.txt");
    let only_ts = vec![("X-Slack-Request-Timestamp".into(), SLACK_EXAMPLE_TS.into())];
    refused(verify(&only_ts, &body, NOW), "missing signature");
    let only_sig = vec![("X-Slack-Signature".into(), SLACK_EXAMPLE_SIGNATURE.into())];
    refused(verify(&only_sig, &body, NOW), "missing timestamp");
    refused(verify(&[], &body, NOW), "missing timestamp");
    let hex = SLACK_EXAMPLE_SIGNATURE.trim_start_matches("v0=");
    for bad in [
        format!("v1={hex}"),
        hex.to_owned(),
        "v0=zz".into(),
        format!("v0={}", &hex[..62]),
        format!("sha256={hex}"),
        String::new(),
    ] {
        refused(
            verify(&headers(SLACK_EXAMPLE_TS, &bad), &body, NOW),
            "malformed signature",
        );
    }
    // Header names are case-insensitive.
    let lower = vec![
        ("x-slack-request-timestamp".into(), SLACK_EXAMPLE_TS.into()),
        ("x-slack-signature".into(), SLACK_EXAMPLE_SIGNATURE.into()),
    ];
    verify(&lower, &body, NOW).unwrap();
}

#[test]
fn stale_future_and_non_numeric_timestamps_fail() {
    let body = br#"{"type":"url_verification","challenge":"c"}"#;
    let signed = |ts: &str| headers(ts, &slack::sign(SECRET.as_bytes(), ts, body));
    for ts in [NOW - 301, NOW + 301, 0, NOW - 86_400] {
        refused(
            verify(&signed(&ts.to_string()), body, NOW),
            "timestamp too far from now",
        );
    }
    for ts in [NOW - 300, NOW + 300] {
        verify(&signed(&ts.to_string()), body, NOW).unwrap();
    }
    // Correctly signed, but not a plain number of seconds.
    for ts in [
        "abc",
        "",
        "1531420618.5",
        " 1531420618",
        "+1531420618",
        "-1531420618",
        "1e9",
        "99999999999999999999999",
    ] {
        refused(verify(&signed(ts), body, NOW), "timestamp is not a number");
    }
}

#[test]
fn the_same_json_with_other_bytes_fails() {
    let body = fixture("message_im.json");
    let ts = NOW.to_string();
    let h = headers(&ts, &slack::sign(SECRET.as_bytes(), &ts, &body));
    verify(&h, &body, NOW).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    for reserialised in [
        serde_json::to_vec(&value).unwrap(),
        serde_json::to_vec_pretty(&value).unwrap(),
    ] {
        assert_ne!(reserialised, body);
        refused(verify(&h, &reserialised, NOW), "signature mismatch");
    }
}

#[test]
fn retries_are_verified_and_parsed_like_the_first_delivery() {
    let body = fixture("message_im.json");
    let ts = NOW.to_string();
    let mut h = headers(&ts, &slack::sign(SECRET.as_bytes(), &ts, &body));
    let first = request(&h, &body);
    assert!(!slack::is_retry(&first));
    let first = SlackChannel::new(SECRET).parse(&first).unwrap();
    h.push(("X-Slack-Retry-Num".into(), "1".into()));
    h.push(("X-Slack-Retry-Reason".into(), "http_timeout".into()));
    let retry = request(&h, &body);
    assert!(slack::is_retry(&retry));
    SlackChannel::new(SECRET).verify(&retry, NOW).unwrap();
    // Same message id: the queue's dedupe makes the retry a no-op.
    assert_eq!(SlackChannel::new(SECRET).parse(&retry).unwrap(), first);
}

// ---- parsing ------------------------------------------------------------------------------

#[test]
fn url_verification_answers_the_challenge() {
    assert_eq!(
        check(&fixture("url_verification.json")),
        Inbound::Challenge("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".into())
    );
}

#[test]
fn a_direct_message_is_a_user_message() {
    assert_eq!(
        one_message(&fixture("message_im.json")),
        InboundMessage {
            addressed_to: None,
            channel: "slack".into(),
            external_user_id: "U0G9QF9C6".into(),
            conversation_key: "D0PNCRP9N".into(),
            message_id: "D0PNCRP9N:1355517523.000005".into(),
            text: "Hi! Can you move my 3pm & tell Ana? Use <tomorrow> if needed é".into(),
            button_id: None,
            media: vec![],
        }
    );
}

#[test]
fn a_mention_in_a_thread_drops_the_bot_mention_and_keeps_the_thread() {
    let m = one_message(&fixture("app_mention_thread.json"));
    assert_eq!(m.text, "what's on my calendar today?");
    assert_eq!(m.external_user_id, "U061F7AUR");
    assert_eq!(m.conversation_key, "C0LAN2Q65:1515449438.000011");
    assert_eq!(m.message_id, "C0LAN2Q65:1515449522.000016");
    assert_eq!(
        slack::split_conversation_key(&m.conversation_key),
        ("C0LAN2Q65", Some("1515449438.000011"))
    );
}

#[test]
fn the_same_channel_message_as_message_and_app_mention_has_one_id() {
    let mention = fixture("app_mention_thread.json");
    let as_message = String::from_utf8(mention.clone())
        .unwrap()
        .replace(r#""type": "app_mention""#, r#""type": "message""#)
        .replace("Ev0LAN670R", "Ev0LAN670S");
    let a = one_message(&mention);
    let b = one_message(as_message.as_bytes());
    assert_eq!(a.message_id, b.message_id);
    assert_eq!(a.text, b.text, "the bot's mention is stripped from both");
}

#[test]
fn a_file_share_carries_the_file_by_reference() {
    let m = one_message(&fixture("file_share.json"));
    assert_eq!(m.text, "What is on this receipt?");
    assert_eq!(m.message_id, "D0PNCRP9N:1700000000.000100");
    // The tombstoned file (no url_private) is left out.
    assert_eq!(
        m.media,
        [InboundMedia {
            reference: "https://files.slack.com/files-pri/T061EG9R6-F0123ABCDEF/receipt.png".into(),
            mime_type: "image/png".into(),
            size_bytes: Some(48_213),
        }]
    );
}

#[test]
fn a_button_press_is_a_message_with_its_button_id() {
    assert_eq!(
        one_message(&fixture("block_actions.txt")),
        InboundMessage {
            addressed_to: None,
            channel: "slack".into(),
            external_user_id: "U0G9QF9C6".into(),
            conversation_key: "C0LAN2Q65:1515449438.000011".into(),
            message_id: "C0LAN2Q65:1700000100.000200:1700000123.456789".into(),
            text: "Yes, move it".into(),
            button_id: Some("confirm:7f3a".into()),
            media: vec![],
        }
    );
    assert_eq!(
        slack::reaction_target("C0LAN2Q65:1700000100.000200:1700000123.456789"),
        Some("1700000100.000200")
    );
}

#[test]
fn everything_that_is_not_a_user_message_is_ignored() {
    for (name, reason) in [
        ("bot_message.json", "a bot's message"),
        ("own_message.json", "a bot's message"),
        ("message_changed.json", "an edit"),
        ("message_deleted.json", "a deletion"),
        ("channel_join.json", "a membership notice"),
        ("member_joined_channel.json", "a membership change"),
        ("reaction_added.json", "a reaction"),
        ("app_home_opened.json", "the app home was opened"),
        ("user_change.json", "not a message event"),
        (
            "app_rate_limited.json",
            "Slack is rate limiting event delivery",
        ),
        (
            "view_submission.txt",
            "an interaction that is not a button press",
        ),
        ("slash_command.txt", "a slash command"),
    ] {
        assert_eq!(check(&fixture(name)), Inbound::Ignored { reason }, "{name}");
    }
}

/// Variations on the DM fixture's event.
fn dm_with(edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(&fixture("message_im.json")).unwrap();
    edit(&mut v["event"]);
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn the_bots_own_user_hidden_and_empty_messages_are_ignored() {
    let own = dm_with(|e| e["user"] = "U0LAN0Z89".into());
    assert_eq!(
        check(&own),
        Inbound::Ignored {
            reason: "the bot's own message"
        }
    );
    let hidden = dm_with(|e| e["hidden"] = true.into());
    assert_eq!(
        check(&hidden),
        Inbound::Ignored {
            reason: "a hidden message"
        }
    );
    let empty = dm_with(|e| e["text"] = "<@U0LAN0Z89>  ".into());
    assert_eq!(
        check(&empty),
        Inbound::Ignored {
            reason: "an empty message"
        }
    );
    let other_subtype = dm_with(|e| e["subtype"] = "channel_topic".into());
    assert!(matches!(check(&other_subtype), Inbound::Ignored { .. }));
}

#[test]
fn mentions_of_other_people_and_thread_broadcasts_are_kept() {
    let other = dm_with(|e| e["text"] = "<@U0ALICE> says hi".into());
    assert_eq!(one_message(&other).text, "<@U0ALICE> says hi");
    let broadcast = dm_with(|e| {
        e["subtype"] = "thread_broadcast".into();
        e["thread_ts"] = "1355517500.000001".into();
    });
    assert_eq!(
        one_message(&broadcast).conversation_key,
        "D0PNCRP9N:1355517500.000001"
    );
}

#[test]
fn a_message_without_its_essential_fields_is_malformed() {
    let ch = SlackChannel::new(SECRET);
    for body in [
        dm_with(|e| e["user"] = serde_json::Value::Null),
        dm_with(|e| e["channel"] = "".into()),
        dm_with(|e| {
            e.as_object_mut().unwrap().remove("ts");
        }),
        br#"{"type":"event_callback","event_id":"Ev1"}"#.to_vec(),
        br#"{"type":"url_verification"}"#.to_vec(),
        b"payload=%7Bnot%20json".to_vec(),
        b"".to_vec(),
    ] {
        let result = ch.parse(&request(&[], &body));
        assert!(
            matches!(result, Err(ChannelError::Malformed(_))),
            "{}: {result:?}",
            String::from_utf8_lossy(&body)
        );
    }
}

// ---- fuzz ---------------------------------------------------------------------------------

const FIXTURES: &[&str] = &[
    "url_verification.json",
    "message_im.json",
    "app_mention_thread.json",
    "file_share.json",
    "block_actions.txt",
    "view_submission.txt",
    "slash_command.txt",
    "bot_message.json",
    "own_message.json",
    "message_changed.json",
    "message_deleted.json",
    "channel_join.json",
    "member_joined_channel.json",
    "reaction_added.json",
    "app_home_opened.json",
    "user_change.json",
    "app_rate_limited.json",
];

fn poke(headers: &[(String, String)], body: &[u8]) {
    let ch = SlackChannel::new(SECRET);
    let req = request(headers, body);
    let _ = ch.verify(&req, NOW);
    let _ = ch.parse(&req);
    let _ = slack::is_retry(&req);
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600),
                                   ts in ".{0,24}", sig in ".{0,80}") {
        poke(&headers(&ts, &sig), &body);
        poke(&[], &body);
        let mut form = b"payload=".to_vec();
        form.extend_from_slice(&body);
        poke(&[], &form);
    }

    #[test]
    fn mutated_fixtures_never_panic(which in 0..FIXTURES.len(),
                                    edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..8)) {
        let mut body = fixture(FIXTURES[which]);
        for (at, byte, op) in edits {
            let at = at % (body.len() + 1);
            match op {
                0 if at < body.len() => body[at] = byte,
                1 => body.insert(at, byte),
                _ => body.truncate(at),
            }
        }
        let ts = NOW.to_string();
        let h = headers(&ts, &slack::sign(SECRET.as_bytes(), &ts, &body));
        poke(&h, &body);
    }

    #[test]
    fn format_never_panics_and_never_makes_a_mention(text in "(?s).{0,300}") {
        let out = slack::format(&text);
        prop_assert!(!out.contains("<!") && !out.contains("<@") && !out.contains("<#"), "{out:?}");
    }
}
