//! The Telegram channel, inbound: the secret-token check and every fixture's meaning.

use channels::telegram::{ConfigError, TelegramChannel, reaction_target};
use channels::{Channel, ChannelError, Inbound, InboundMedia, InboundMessage, RawRequest};
use proptest::prelude::*;

const SECRET: &str = "s3cret-Token_42-and-then-some-more";
const NOW: i64 = 1_749_712_900;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/telegram/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn channel() -> TelegramChannel {
    TelegramChannel::new(SECRET, Some("@BridleBot".into())).unwrap()
}

fn request<'a>(headers: &'a [(String, String)], body: &'a [u8]) -> RawRequest<'a> {
    RawRequest {
        method: "POST",
        path: "/webhooks/telegram",
        query: None,
        headers,
        body,
        origin: None,
    }
}

fn with_secret(name: &str, value: &str) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "application/json".into()),
        (name.into(), value.into()),
    ]
}

fn verify(headers: &[(String, String)], body: &[u8]) -> Result<(), ChannelError> {
    channel().verify(&request(headers, body), NOW)
}

// ---- verification ----

#[test]
fn the_configured_secret_token_is_accepted_whatever_the_header_name_case() {
    let body = fixture("text_message");
    for name in [
        "X-Telegram-Bot-Api-Secret-Token",
        "x-telegram-bot-api-secret-token",
        "X-TELEGRAM-BOT-API-SECRET-TOKEN",
    ] {
        assert!(verify(&with_secret(name, SECRET), &body).is_ok(), "{name}");
    }
}

#[test]
fn any_other_value_is_refused() {
    let body = fixture("text_message");
    let mut one_byte_off = SECRET.as_bytes().to_vec();
    *one_byte_off.last_mut().unwrap() ^= 1;
    let one_byte_off = String::from_utf8(one_byte_off).unwrap();
    let mut first_byte_off = SECRET.to_owned();
    first_byte_off.replace_range(0..1, "t");
    for value in [
        one_byte_off.as_str(),
        first_byte_off.as_str(),
        "S3CRET-TOKEN_42",  // the value is case-sensitive
        "s3cret-Token_4",   // a prefix
        "s3cret-Token_422", // a longer one
        " s3cret-Token_42", // whitespace is part of the value
        "",
        "other",
    ] {
        assert!(
            matches!(
                verify(
                    &with_secret("X-Telegram-Bot-Api-Secret-Token", value),
                    &body
                ),
                Err(ChannelError::BadSignature("secret token mismatch"))
            ),
            "{value:?} must not verify"
        );
    }
}

#[test]
fn a_missing_or_repeated_header_is_refused() {
    let body = fixture("text_message");
    assert!(matches!(
        verify(&[("content-type".into(), "application/json".into())], &body),
        Err(ChannelError::BadSignature("missing secret token"))
    ));
    // A look-alike header name is not the header.
    assert!(matches!(
        verify(&with_secret("X-Telegram-Bot-Api-Secret", SECRET), &body),
        Err(ChannelError::BadSignature("missing secret token"))
    ));
    let mut twice = with_secret("X-Telegram-Bot-Api-Secret-Token", SECRET);
    twice.push(("x-telegram-bot-api-secret-token".into(), "other".into()));
    assert!(matches!(
        verify(&twice, &body),
        Err(ChannelError::BadSignature("secret token header repeated"))
    ));
}

#[test]
fn a_wrong_configured_secret_refuses_the_right_header() {
    let other = TelegramChannel::new("another-secret-token-of-32-chars", None).unwrap();
    let headers = with_secret("X-Telegram-Bot-Api-Secret-Token", SECRET);
    let body = fixture("text_message");
    assert!(other.verify(&request(&headers, &body), NOW).is_err());
}

/// Telegram signs nothing: the secret token authenticates the request, not its bytes. A tampered
/// or re-serialised body with the right header verifies — this pins that limit (it is documented
/// in the module) so that nobody mistakes the check for a body signature.
#[test]
fn the_body_is_not_authenticated_only_the_header_is() {
    let headers = with_secret("X-Telegram-Bot-Api-Secret-Token", SECRET);
    let body = fixture("text_message");
    let reserialised =
        serde_json::to_vec(&serde_json::from_slice::<serde_json::Value>(&body).unwrap()).unwrap();
    assert_ne!(reserialised, body);
    let tampered = String::from_utf8(body.clone())
        .unwrap()
        .replace("Thursday", "Saturday");
    for b in [&body[..], &reserialised, tampered.as_bytes()] {
        assert!(verify(&headers, b).is_ok());
    }
    // And there is no time in it: any `now` verifies.
    let ch = channel();
    assert!(ch.verify(&request(&headers, &body), 0).is_ok());
    assert!(ch.verify(&request(&headers, &body), i64::MAX).is_ok());
}

#[test]
fn secrets_telegram_would_not_accept_are_refused_at_construction() {
    assert_eq!(
        TelegramChannel::new("", None).unwrap_err(),
        ConfigError::EmptySecret
    );
    for bad in ["has space", "semi;colon", "ünïcode", &"a".repeat(257)] {
        assert_eq!(
            TelegramChannel::new(bad, None).unwrap_err(),
            ConfigError::InvalidSecret,
            "{bad:?}"
        );
    }
    assert!(TelegramChannel::new("a".repeat(256), None).is_ok());
    // Guessable: refused, though Telegram would take it.
    assert_eq!(
        TelegramChannel::new("tg-secret-token", None).unwrap_err(),
        ConfigError::ShortSecret
    );
}

#[test]
fn debug_output_hides_the_secret() {
    let dbg = format!("{:?}", channel());
    assert!(!dbg.contains(SECRET) && dbg.contains("[redacted]"), "{dbg}");
    assert_eq!(channel().name(), "telegram");
}

// ---- parsing ----

fn parse(name: &str) -> Inbound {
    let body = fixture(name);
    let headers = with_secret("X-Telegram-Bot-Api-Secret-Token", SECRET);
    let ch = channel();
    let req = request(&headers, &body);
    ch.verify(&req, NOW).unwrap();
    ch.parse(&req).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn message(name: &str) -> InboundMessage {
    match parse(name) {
        Inbound::Messages(mut m) if m.len() == 1 => m.remove(0),
        other => panic!("{name}: expected one message, got {other:?}"),
    }
}

#[test]
fn a_text_message() {
    assert_eq!(
        message("text_message"),
        InboundMessage {
            addressed_to: None,
            channel: "telegram".into(),
            external_user_id: "111222333".into(),
            conversation_key: "111222333".into(),
            message_id: "111222333:4021".into(),
            text: "Can you move my dentist appointment to Thursday? ✨".into(),
            button_id: None,
            media: vec![],
        }
    );
}

#[test]
fn a_command_for_this_bot_in_a_group() {
    let m = message("group_command");
    assert_eq!(m.text, "/ask what's on tomorrow?");
    assert_eq!(m.conversation_key, "-1001987654321");
    assert_eq!(m.external_user_id, "111222333");
    assert_eq!(m.message_id, "-1001987654321:9001");
}

/// In a group (the bot an admin, or its privacy mode off: Telegram then delivers everything),
/// only what is for the bot is a message: a command, a mention, a reply to one of its
/// messages. The members' talk among themselves is ignored; a private chat is all for it.
#[test]
fn in_a_group_only_what_is_addressed_to_the_bot_is_a_message() {
    let group = |text: &str, reply_from: Option<serde_json::Value>, kind: &str| {
        let mut v: serde_json::Value = serde_json::from_slice(&fixture("group_command")).unwrap();
        v["message"]["text"] = text.into();
        v["message"].as_object_mut().unwrap().remove("entities");
        v["message"]["chat"]["type"] = kind.into();
        if let Some(from) = reply_from {
            v["message"]["reply_to_message"] = serde_json::json!({"message_id": 8000, "from": from, "chat": v["message"]["chat"].clone(), "date": 1});
        }
        let body = serde_json::to_vec(&v).unwrap();
        channel().parse(&request(&[], &body)).unwrap()
    };
    let ours = serde_json::json!({"id": 42, "is_bot": true, "username": "BridleBot"});
    let friend = serde_json::json!({"id": 7, "is_bot": false, "username": "bob"});
    for (text, reply, kind) in [
        ("cancel my 3pm, I'll move it to Friday", None, "supergroup"),
        ("cancel my 3pm", Some(friend.clone()), "group"),
        ("ask @BridleBotFan about it", None, "supergroup"),
    ] {
        assert!(
            matches!(group(text, reply, kind), Inbound::Ignored { .. }),
            "{text:?} in a {kind}"
        );
    }
    for (text, reply, kind) in [
        ("@bridlebot what's on tomorrow?", None, "supergroup"),
        ("and Friday?", Some(ours.clone()), "group"),
        ("/ask what's on?", None, "group"),
        ("UNLINK", None, "group"),
        ("MOVE ABCD-2345", None, "supergroup"),
        ("ABCD-2345", None, "supergroup"),
        ("cancel my 3pm, I'll move it to Friday", None, "private"),
    ] {
        assert!(
            matches!(group(text, reply, kind), Inbound::Messages(_)),
            "{text:?} in a {kind}"
        );
    }
}

/// In a forum supergroup each topic is a conversation of its own (`chat/topic`), a button
/// press in it too; the General topic's messages are the chat's.
#[test]
fn a_forum_topic_is_a_conversation_of_its_own() {
    let topic = |in_topic: bool| {
        let mut v: serde_json::Value = serde_json::from_slice(&fixture("group_command")).unwrap();
        v["message"]["message_thread_id"] = 42.into();
        v["message"]["is_topic_message"] = in_topic.into();
        let body = serde_json::to_vec(&v).unwrap();
        match channel().parse(&request(&[], &body)).unwrap() {
            Inbound::Messages(m) => m[0].conversation_key.clone(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(topic(true), "-1001987654321/42");
    assert_eq!(topic(false), "-1001987654321");
    let mut v: serde_json::Value = serde_json::from_slice(&fixture("callback_query")).unwrap();
    v["callback_query"]["message"]["message_thread_id"] = 7.into();
    v["callback_query"]["message"]["is_topic_message"] = true.into();
    let body = serde_json::to_vec(&v).unwrap();
    let Inbound::Messages(m) = channel().parse(&request(&[], &body)).unwrap() else {
        panic!("a press")
    };
    assert_eq!(m[0].conversation_key, "111222333/7");
}

#[test]
fn a_button_press() {
    assert_eq!(
        message("callback_query"),
        InboundMessage {
            addressed_to: None,
            channel: "telegram".into(),
            external_user_id: "111222333".into(),
            conversation_key: "111222333".into(),
            message_id: "111222333:4022:4382bfdwdsb323b2d9".into(),
            text: "Yes, book it".into(),
            button_id: Some("confirm:7f3a".into()),
            media: vec![],
        }
    );
}

#[test]
fn a_button_press_whose_label_is_gone_uses_its_data() {
    let mut v: serde_json::Value = serde_json::from_slice(&fixture("callback_query")).unwrap();
    v["callback_query"]["message"]
        .as_object_mut()
        .unwrap()
        .remove("reply_markup");
    let body = serde_json::to_vec(&v).unwrap();
    let headers = [];
    let Inbound::Messages(m) = channel().parse(&request(&headers, &body)).unwrap() else {
        panic!("expected a message")
    };
    assert_eq!(m[0].text, "confirm:7f3a");
    assert_eq!(m[0].button_id.as_deref(), Some("confirm:7f3a"));
}

#[test]
fn a_photo_is_its_largest_size_and_the_caption_is_the_text() {
    let m = message("photo");
    assert_eq!(m.text, "Is this rash worth a doctor's visit?");
    assert_eq!(
        m.media,
        [InboundMedia {
            reference: "AgACAgQAAxkBAAIBZ2ZlargeAAQ".into(),
            mime_type: "image/jpeg".into(),
            size_bytes: Some(126_543),
        }]
    );
}

#[test]
fn a_document_keeps_its_file_id_and_type() {
    let m = message("document");
    assert_eq!(m.text, "");
    assert_eq!(
        m.media,
        [InboundMedia {
            reference: "BQACAgQAAxkBAAIBaGZinvoiceAAQ".into(),
            mime_type: "application/pdf".into(),
            size_bytes: Some(88_211),
        }]
    );
}

#[test]
fn everything_that_is_not_a_person_writing_is_ignored() {
    for (name, reason) in [
        ("edited_message", "edited message"),
        ("channel_post", "channel post"),
        ("edited_channel_post", "channel post"),
        ("bot_message", "message from a bot"),
        ("new_chat_members", "service message"),
        ("left_chat_member", "service message"),
        ("pinned_message", "service message"),
        ("my_chat_member", "membership change"),
        ("chat_member", "membership change"),
        ("chat_join_request", "membership change"),
        ("message_reaction", "reaction"),
        ("poll", "poll"),
        ("poll_answer", "poll"),
        ("inline_query", "inline query"),
        ("sticker", "no text or supported media"),
        ("automatic_forward", "message on behalf of a chat"),
        ("command_other_bot", "command for another bot"),
        ("callback_game", "callback without data"),
        ("callback_inline", "callback on an inline message"),
        ("unknown_kind", "unsupported update kind"),
    ] {
        assert_eq!(parse(name), Inbound::Ignored { reason }, "{name}");
    }
}

#[test]
fn bodies_that_are_not_updates_are_malformed() {
    for body in [
        &b"not json"[..],
        b"[]",
        b"{}",
        br#"{"update_id":"12"}"#,
        br#"{"update_id":1,"message":{"message_id":1,"from":{"id":1,"is_bot":false}}}"#,
        br#"{"update_id":1,"callback_query":{"id":"x","data":"d"}}"#,
    ] {
        let headers = [];
        assert!(
            matches!(
                channel().parse(&request(&headers, body)),
                Err(ChannelError::Malformed(_))
            ),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn reactions_are_addressed_by_chat_and_telegram_message_id() {
    assert_eq!(
        reaction_target(&fixture("text_message")).as_deref(),
        Some("111222333:4021")
    );
    assert_eq!(
        reaction_target(&fixture("group_command")).as_deref(),
        Some("-1001987654321:9001")
    );
    assert_eq!(reaction_target(&fixture("callback_query")), None);
}

// ---- fuzzing ----

const FIXTURES: &[&str] = &[
    "text_message",
    "group_command",
    "command_other_bot",
    "callback_query",
    "photo",
    "document",
    "edited_message",
    "channel_post",
    "bot_message",
    "new_chat_members",
    "my_chat_member",
    "message_reaction",
    "poll",
    "sticker",
    "automatic_forward",
    "callback_game",
    "callback_inline",
];

fn check_no_panic(headers: &[(String, String)], body: &[u8]) {
    let ch = channel();
    let req = request(headers, body);
    let _ = ch.verify(&req, NOW);
    let _ = ch.parse(&req);
    let _ = reaction_target(body);
}

/// Replace the value at a path chosen by `pick` with `value`, anywhere in the tree.
fn mutate(
    v: &mut serde_json::Value,
    pick: &mut impl Iterator<Item = usize>,
    value: serde_json::Value,
) {
    let n = pick.next().unwrap_or(0);
    let child = match v {
        serde_json::Value::Object(m) if !m.is_empty() && !n.is_multiple_of(4) => {
            let key = m.keys().nth(n % m.len()).unwrap().clone();
            m.get_mut(&key)
        }
        serde_json::Value::Array(a) if !a.is_empty() && !n.is_multiple_of(4) => {
            let len = a.len();
            a.get_mut(n % len)
        }
        _ => None,
    };
    match child {
        Some(c) => mutate(c, pick, value),
        None => *v = value,
    }
}

fn any_json() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<u64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map_or(serde_json::Value::Null, serde_json::Value::Number)),
        "\\PC{0,20}".prop_map(serde_json::Value::from),
        Just(serde_json::json!([])),
        Just(serde_json::json!({})),
        Just(serde_json::json!([[{"text": 1, "callback_data": null}]])),
    ]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512), secret in "\\PC{0,40}") {
        check_no_panic(&with_secret("X-Telegram-Bot-Api-Secret-Token", &secret), &body);
        check_no_panic(&[], &body);
    }

    #[test]
    fn mutated_fixture_bytes_never_panic(
        which in 0..FIXTURES.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..8),
    ) {
        let mut body = fixture(FIXTURES[which]);
        for (at, byte, op) in edits {
            let at = at % (body.len() + 1);
            match op {
                0 if at < body.len() => body[at] = byte,
                1 => body.insert(at, byte),
                _ if at < body.len() => { body.remove(at); }
                _ => {}
            }
        }
        check_no_panic(&with_secret("X-Telegram-Bot-Api-Secret-Token", SECRET), &body);
    }

    #[test]
    fn fixtures_with_a_value_swapped_never_panic(
        which in 0..FIXTURES.len(),
        path in proptest::collection::vec(any::<usize>(), 1..8),
        value in any_json(),
    ) {
        let mut v: serde_json::Value = serde_json::from_slice(&fixture(FIXTURES[which])).unwrap();
        mutate(&mut v, &mut path.into_iter(), value);
        let body = serde_json::to_vec(&v).unwrap();
        check_no_panic(&with_secret("X-Telegram-Bot-Api-Secret-Token", SECRET), &body);
    }
}
