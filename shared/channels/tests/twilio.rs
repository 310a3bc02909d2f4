//! The Twilio channel: signature checks (Twilio's documented examples first), fixture parsing,
//! the sender against a local fake Messages API, and a fuzz of verify + parse.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use channels::twilio::{self, TwilioChannel, TwilioCredentials, TwilioSender};
use channels::{
    Button, Channel, ChannelError, Delivered, Inbound, InboundMedia, InboundMessage, Outgoing,
    RawRequest, SendError, Sender,
};
use proptest::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Inbound helpers

const TOKEN: &str = "f2a9c1d0e8b7a6f5e4d3c2b1a0f9e8d7";
const BASE: &str = "https://bridle.example.com";
const PATH: &str = "/webhooks/twilio";
const FORM: &str = "application/x-www-form-urlencoded";

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/twilio/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    bytes.trim_ascii_end().to_vec()
}

/// The decoded parameters of a well-formed body (an independent decoder: `form_urlencoded`).
fn decoded(body: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(body).into_owned().collect()
}

fn headers(signature: &str) -> Vec<(String, String)> {
    vec![
        ("Content-Type".into(), format!("{FORM}; charset=UTF-8")),
        ("X-Twilio-Signature".into(), signature.into()),
        (
            "I-Twilio-Idempotency-Token".into(),
            "0c0ffee0-d1ce-4bad-b00c".into(),
        ),
    ]
}

/// What Twilio would send for `body` at `BASE + PATH + ?query`, signed with `TOKEN`.
fn signed(body: &[u8], query: Option<&str>) -> Vec<(String, String)> {
    let url = twilio::request_url(BASE, PATH, query);
    headers(&twilio::sign(TOKEN.as_bytes(), &url, &decoded(body)))
}

fn verify_with(
    channel: &TwilioChannel,
    path: &str,
    query: Option<&str>,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), ChannelError> {
    let req = RawRequest {
        method: "POST",
        path,
        query,
        headers,
        body,
        origin: None,
    };
    channel.verify(&req, 1_800_000_000)
}

fn channel() -> TwilioChannel {
    TwilioChannel::new(TOKEN, BASE)
}

fn verify(
    query: Option<&str>,
    headers: &[(String, String)],
    body: &[u8],
) -> Result<(), ChannelError> {
    verify_with(&channel(), PATH, query, headers, body)
}

fn mismatch(r: Result<(), ChannelError>) -> bool {
    matches!(r, Err(ChannelError::BadSignature("signature mismatch")))
}

// ---------------------------------------------------------------------------------------------
// Verification

/// Twilio's worked example, from its webhook-security page ("Validating signatures from
/// Twilio"): auth token `12345`, URL `https://mycompany.com/myapp.php?foo=1&bar=2`, and these
/// POST parameters. Checked with Python's `hmac`/`base64`: with `Caller`/`From` = `+12349013030`
/// (the current page) the signature is `0/KCTR6DLpKmkAf8muzZqo1nDgQ=`; with `+14158675309`
/// (older pages and the helper libraries' test suites) it is `RSOYDt4T1cUTdK1PDd93/VVr8B8=`.
/// (`RSOY…` paired with `+12349013030`, as some copies show, is not a valid pair.)
#[test]
fn twilios_documented_examples_verify() {
    let documented = TwilioChannel::new("12345", "https://mycompany.com");
    for (number, signature) in [
        ("%2B12349013030", "0/KCTR6DLpKmkAf8muzZqo1nDgQ="),
        ("%2B14158675309", "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
    ] {
        let body = format!(
            "CallSid=CA1234567890ABCDE&Caller={number}&Digits=1234&From={number}&To=%2B18005551212"
        );
        let h = vec![("X-Twilio-Signature".to_owned(), signature.to_owned())];
        let ok =
            |query, body: &str| verify_with(&documented, "/myapp.php", query, &h, body.as_bytes());
        assert!(ok(Some("foo=1&bar=2"), &body).is_ok(), "{signature}");
        // The same parameters in another order in the body: the signature sorts them.
        let shuffled = body.split('&').rev().collect::<Vec<_>>().join("&");
        assert!(ok(Some("foo=1&bar=2"), &shuffled).is_ok());
        // The query string is part of the signed URL.
        assert!(mismatch(ok(None, &body)));
        assert!(mismatch(ok(Some("foo=1&bar=3"), &body)));
        assert!(mismatch(ok(Some("bar=2&foo=1"), &body)));
        // And so is every parameter value.
        assert!(mismatch(ok(
            Some("foo=1&bar=2"),
            &body.replace("1234&", "1235&")
        )));
        // The pure signer agrees.
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        assert_eq!(
            twilio::sign(b"12345", url, &decoded(body.as_bytes())),
            signature
        );
    }
}

#[test]
fn a_signed_fixture_verifies_with_and_without_a_query() {
    let body = fixture("sms_text.txt");
    assert!(verify(None, &signed(&body, None), &body).is_ok());
    let q = Some("tenant=acme&x=a%20b");
    assert!(verify(q, &signed(&body, q), &body).is_ok());
    assert!(mismatch(verify(None, &signed(&body, q), &body)));
    assert!(mismatch(verify(
        Some("tenant=acme&x=a+b"),
        &signed(&body, q),
        &body
    )));
}

#[test]
fn decoded_values_are_signed_so_plus_and_percent_twenty_are_both_spaces() {
    let body = b"MessageSid=SM1&From=%2B15551230000&To=%2B15559870000&Body=big+red%20dog%2Bcat";
    // Computed by hand from the decoded values, not by decoding the body here.
    let url = format!("{BASE}{PATH}");
    let by_hand = [
        ("Body", "big red dog+cat"),
        ("From", "+15551230000"),
        ("MessageSid", "SM1"),
        ("To", "+15559870000"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let sig = twilio::sign(TOKEN.as_bytes(), &url, &by_hand);
    assert!(verify(None, &headers(&sig), body).is_ok());
    // Signing the raw (still-encoded) values instead does not verify.
    let raw: Vec<(String, String)> = body
        .split(|&b| b == b'&')
        .map(|kv| {
            let s = String::from_utf8(kv.to_vec()).unwrap();
            let (k, v) = s.split_once('=').unwrap();
            (k.to_owned(), v.to_owned())
        })
        .collect();
    let wrong = twilio::sign(TOKEN.as_bytes(), &url, &raw);
    assert!(mismatch(verify(None, &headers(&wrong), body)));
}

#[test]
fn the_same_parameters_encoded_differently_verify_by_design() {
    // Twilio signs decoded values, not bytes: a re-encoding with the same values carries the
    // same signature (unlike JSON schemes, where re-serialised bytes must fail).
    let body = b"Body=a+b&From=%2B1555&To=%2B1999&MessageSid=SM1";
    let reencoded = b"MessageSid=SM1&To=+1999&From=%2b1555&Body=a%20b";
    // `+1999` decodes to " 1999": a different value, so that re-encoding must fail...
    assert!(mismatch(verify(None, &signed(body, None), reencoded)));
    // ...while one with identical decoded values verifies.
    let same = b"MessageSid=SM1&To=%2b1999&From=%2B1555&Body=a%20b";
    assert!(verify(None, &signed(body, None), same).is_ok());
}

#[test]
fn unknown_parameters_are_signed_like_any_other() {
    let body = fixture("sms_text.txt");
    let mut extended = body.clone();
    extended.extend_from_slice(b"&AddOns=%7B%22status%22%3A%22successful%22%7D&ZzNew=1");
    assert!(verify(None, &signed(&extended, None), &extended).is_ok());
    // A signature over the body without them does not cover them.
    assert!(mismatch(verify(None, &signed(&body, None), &extended)));
}

#[test]
fn tampering_a_wrong_token_or_no_header_fail() {
    let body = fixture("sms_text.txt");
    let h = signed(&body, None);
    let tampered = String::from_utf8(body.clone())
        .unwrap()
        .replace("Body=Hi%21", "Body=Ho%21");
    assert!(mismatch(verify(None, &h, tampered.as_bytes())));
    let other = TwilioChannel::new("not-the-token", BASE);
    assert!(mismatch(verify_with(&other, PATH, None, &h, &body)));
    let elsewhere = TwilioChannel::new(TOKEN, "https://attacker.example");
    assert!(mismatch(verify_with(&elsewhere, PATH, None, &h, &body)));
    assert!(mismatch(verify_with(
        &channel(),
        "/webhooks/other",
        None,
        &h,
        &body
    )));
    let no_sig: Vec<_> = h
        .iter()
        .filter(|(k, _)| k != "X-Twilio-Signature")
        .cloned()
        .collect();
    assert!(matches!(
        verify(None, &no_sig, &body),
        Err(ChannelError::BadSignature("missing signature"))
    ));
    for bad in ["", "not base64!", "AAAA", "0/KCTR6DLpKmkAf8muzZqo1nDgQ"] {
        assert!(matches!(
            verify(None, &headers(bad), &body),
            Err(ChannelError::BadSignature("malformed signature"))
        ));
    }
}

#[test]
fn a_body_that_is_not_a_form_fails_verification() {
    // A genuinely signed form declared as something else is refused too.
    let body = fixture("sms_text.txt");
    let mut h = signed(&body, None);
    assert!(verify(None, &h, &body).is_ok());
    h[0].1 = "application/json".into();
    assert!(matches!(
        verify(None, &h, &body),
        Err(ChannelError::BadSignature("body is not form-encoded"))
    ));
    let json = br#"{"MessageSid":"SM1","From":"+1555","Body":"hi"}"#;
    // Whatever signature comes with it.
    let sig = twilio::sign(TOKEN.as_bytes(), &format!("{BASE}{PATH}"), &[]);
    let mut as_json = headers(&sig);
    as_json[0].1 = "application/json".into();
    for (h, body) in [
        (as_json, &json[..]),
        (headers(&sig), &json[..]),
        (headers(&sig), &b"Body=%E2%82&From=x"[..]),
        (headers(&sig), &b"Body=100%&From=x"[..]),
    ] {
        assert!(
            matches!(
                verify(None, &h, body),
                Err(ChannelError::BadSignature("body is not form-encoded"))
            ),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn the_default_port_may_or_may_not_be_in_the_signed_url() {
    let body = fixture("sms_text.txt");
    let url = format!("https://bridle.example.com:443{PATH}");
    let sig = twilio::sign(TOKEN.as_bytes(), &url, &decoded(&body));
    assert!(verify(None, &headers(&sig), &body).is_ok());
    let url = format!("https://bridle.example.com:8443{PATH}");
    let sig = twilio::sign(TOKEN.as_bytes(), &url, &decoded(&body));
    assert!(mismatch(verify(None, &headers(&sig), &body)));
}

#[test]
fn there_is_no_timestamp_so_the_clock_does_not_matter() {
    let body = fixture("sms_text.txt");
    let h = signed(&body, None);
    let req = RawRequest {
        method: "POST",
        path: PATH,
        query: None,
        headers: &h,
        body: &body,
        origin: None,
    };
    for now in [0, 1_800_000_000, i64::MAX] {
        assert!(channel().verify(&req, now).is_ok());
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing

fn parse(name: &str) -> Inbound {
    let body = fixture(name);
    let h = signed(&body, None);
    let req = RawRequest {
        method: "POST",
        path: PATH,
        query: None,
        headers: &h,
        body: &body,
        origin: None,
    };
    channel().verify(&req, 0).expect("fixtures verify");
    channel().parse(&req).expect("fixtures parse")
}

const USER: &str = "+15558675310";
const BUSINESS: &str = "+15557654321";

fn sms(id: &str, text: &str, media: Vec<InboundMedia>) -> Inbound {
    Inbound::Messages(vec![InboundMessage {
        addressed_to: None,
        channel: "twilio".into(),
        external_user_id: USER.into(),
        conversation_key: format!("{USER}:{BUSINESS}"),
        message_id: id.into(),
        text: text.into(),
        button_id: None,
        media,
    }])
}

#[test]
fn an_sms_is_a_message_from_the_sender_in_the_number_pair_conversation() {
    assert_eq!(channel().name(), "twilio");
    assert_eq!(
        parse("sms_text.txt"),
        sms(
            "SM01010101010101010101010101010101",
            "Hi! Can you move my 3pm meeting to tomorrow? Thanks :)",
            vec![]
        )
    );
}

/// Twilio's signature sorts the values and runs names and values together, so a captured
/// request whose `Body` ends in `From+1…` can be re-cut into a shorter `Body` and a second
/// `From`, and it still verifies. A repeated name (Twilio never sends one) is refused, so the
/// re-cut cannot choose who sent it.
#[test]
fn a_request_re_cut_with_a_second_from_verifies_but_is_refused() {
    let sid = "SM03030303030303030303030303030303";
    let original = format!(
        "AccountSid=AC1&Body=call+me+From%2B10000000000&From=%2B15558675310&MessageSid={sid}&NumMedia=0&To=%2B15557654321"
    );
    let recut = format!(
        "AccountSid=AC1&Body=call+me+&From=%2B10000000000&From=%2B15558675310&MessageSid={sid}&NumMedia=0&To=%2B15557654321"
    );
    let h = signed(original.as_bytes(), None);
    fn req<'a>(headers: &'a [(String, String)], body: &'a [u8]) -> RawRequest<'a> {
        RawRequest {
            method: "POST",
            path: PATH,
            query: None,
            headers,
            body,
            origin: None,
        }
    }
    assert_eq!(
        channel().parse(&req(&h, original.as_bytes())).unwrap(),
        sms(sid, "call me From+10000000000", vec![])
    );
    let recut_req = req(&h, recut.as_bytes());
    assert!(
        channel().verify(&recut_req, 0).is_ok(),
        "the re-cut verifies: the signature cannot tell"
    );
    assert!(matches!(
        channel().parse(&recut_req),
        Err(ChannelError::Malformed(m)) if m.contains("repeated")
    ));
}

#[test]
fn a_numbered_option_reply_is_plain_text_without_a_button_id() {
    assert_eq!(
        parse("sms_button_reply.txt"),
        sms("SM02020202020202020202020202020202", "1", vec![])
    );
}

#[test]
fn an_mms_carries_its_media_urls_and_types() {
    let media_url = |me: &str| {
        format!(
            "https://api.twilio.com/2010-04-01/Accounts/AC3f1e2d4c5b6a79880a1b2c3d4e5f6a7b\
             /Messages/MM07070707070707070707070707070707/Media/{me}"
        )
    };
    assert_eq!(
        parse("mms_image.txt"),
        sms(
            "MM07070707070707070707070707070707",
            "Here's the receipt",
            vec![
                InboundMedia {
                    reference: media_url("ME08080808080808080808080808080808"),
                    mime_type: "image/jpeg".into(),
                    size_bytes: None,
                },
                InboundMedia {
                    reference: media_url("ME09090909090909090909090909090909"),
                    mime_type: "image/png".into(),
                    size_bytes: None,
                },
            ]
        )
    );
}

/// Twilio answers an opt-out itself and refuses every reply to the number after it: no turn.
#[test]
fn an_opt_out_keyword_runs_no_turn() {
    assert!(matches!(
        parse("sms_opt_out_stop.txt"),
        Inbound::Ignored { .. }
    ));
}

#[test]
fn status_callbacks_are_ignored() {
    for name in [
        "status_queued.txt",
        "status_sent.txt",
        "status_delivered.txt",
        "status_failed.txt",
        "status_read.txt",
    ] {
        assert_eq!(
            parse(name),
            Inbound::Ignored {
                reason: "delivery status callback"
            },
            "{name}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The fake Messages API

#[derive(Debug, Clone)]
struct Call {
    method: Method,
    path: String,
    authorization: Option<String>,
    content_type: Option<String>,
    form: Vec<(String, String)>,
}

impl Call {
    fn field(&self, name: &str) -> &str {
        self.form
            .iter()
            .find(|(k, _)| k == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

#[derive(Clone)]
struct Answer {
    status: u16,
    retry_after: Option<&'static str>,
    body: serde_json::Value,
}

fn created() -> Answer {
    Answer {
        status: 201,
        retry_after: None,
        body: serde_json::json!({"sid": "SMfeedfeedfeedfeedfeedfeedfeedfeed", "status": "queued"}),
    }
}

fn twilio_error(status: u16, code: u32, message: &str) -> Answer {
    Answer {
        status,
        retry_after: None,
        body: serde_json::json!({
            "code": code,
            "message": message,
            "more_info": format!("https://www.twilio.com/docs/errors/{code}"),
            "status": status,
        }),
    }
}

#[derive(Clone, Default)]
struct Api {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Answers in order; when empty, 201 Created.
    answers: Arc<Mutex<Vec<Answer>>>,
}

async fn messages_api(
    State(api): State<Api>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |n: &str| headers.get(n).map(|v| v.to_str().unwrap().to_owned());
    api.calls.lock().unwrap().push(Call {
        method,
        path: uri.path().to_owned(),
        authorization: header("authorization"),
        content_type: header("content-type"),
        form: decoded(&body),
    });
    let answer = {
        let mut answers = api.answers.lock().unwrap();
        if answers.is_empty() {
            created()
        } else {
            answers.remove(0)
        }
    };
    let mut res = (
        StatusCode::from_u16(answer.status).unwrap(),
        axum::Json(answer.body),
    )
        .into_response();
    if let Some(ra) = answer.retry_after {
        res.headers_mut().insert("retry-after", ra.parse().unwrap());
    }
    res
}

async fn fake_api() -> (Api, String) {
    let api = Api::default();
    let app = Router::new().fallback(messages_api).with_state(api.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (api, base)
}

const ACCOUNT: &str = "AC3f1e2d4c5b6a79880a1b2c3d4e5f6a7b";
const API_TOKEN: &str = "tok-9d8c7b6a";

fn sender(base: &str) -> TwilioSender {
    TwilioSender::new(
        reqwest::Client::new(),
        base,
        TwilioCredentials::new(ACCOUNT, API_TOKEN),
    )
}

fn reply(text: &str) -> Outgoing {
    Outgoing {
        conversation_key: format!("{USER}:{BUSINESS}"),
        external_user_id: USER.into(),
        in_reply_to: "SM01010101010101010101010101010101".into(),
        text: text.into(),
        ..Outgoing::default()
    }
}

fn calls(api: &Api) -> Vec<Call> {
    api.calls.lock().unwrap().clone()
}

// ---------------------------------------------------------------------------------------------
// Sending

#[tokio::test]
async fn a_reply_is_posted_to_the_messages_resource_with_basic_auth() {
    let (api, base) = fake_api().await;
    let s = sender(&base);
    assert_eq!(s.max_chars(), 1_600);
    let delivered = s
        .send(&reply("Done: moved to **tomorrow 3pm**."))
        .await
        .unwrap();
    assert_eq!(delivered.pieces, ["Done: moved to tomorrow 3pm."]);
    assert!(!delivered.reacted);
    let got = calls(&api);
    assert_eq!(got.len(), 1);
    let call = &got[0];
    assert_eq!(call.method, Method::POST);
    assert_eq!(
        call.path,
        format!("/2010-04-01/Accounts/{ACCOUNT}/Messages.json")
    );
    // `Basic base64("AC…:tok-9d8c7b6a")`, computed independently.
    assert_eq!(
        call.authorization.as_deref(),
        Some("Basic QUMzZjFlMmQ0YzViNmE3OTg4MGExYjJjM2Q0ZTVmNmE3Yjp0b2stOWQ4YzdiNmE=")
    );
    assert_eq!(call.content_type.as_deref(), Some(FORM));
    assert_eq!(call.field("To"), USER);
    assert_eq!(call.field("From"), BUSINESS);
    assert_eq!(call.field("Body"), "Done: moved to tomorrow 3pm.");
}

#[tokio::test]
async fn long_text_goes_out_in_order_with_options_on_the_last_piece_only() {
    let (api, base) = fake_api().await;
    let first = "First part. ".repeat(120);
    let second = "Second part. ".repeat(60);
    let text = format!(
        "{}\n\n{}\n\nSee [the plan](https://plan.example/p?id=1) and pick one:",
        first.trim(),
        second.trim()
    );
    let out = Outgoing {
        buttons: vec![
            Button {
                id: "a".into(),
                title: "Approve".into(),
            },
            Button {
                id: "b".into(),
                title: "Change dates".into(),
            },
            Button {
                id: "c".into(),
                title: "Cancel".into(),
            },
        ],
        ..reply(&text)
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    let got = calls(&api);
    let bodies: Vec<&str> = got.iter().map(|c| c.field("Body")).collect();
    assert_eq!(bodies, delivered.pieces);
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0], first.trim());
    assert_eq!(
        bodies[1],
        format!(
            "{}\n\nSee the plan and pick one:\nhttps://plan.example/p?id=1\n\n\
             1. Approve\n2. Change dates\n3. Cancel",
            second.trim()
        )
    );
    assert!(bodies.iter().all(|b| b.chars().count() <= 1_600));
    assert!(!bodies[0].contains("1. Approve"));
}

#[tokio::test]
async fn there_are_no_reactions_so_none_is_sent() {
    let (api, base) = fake_api().await;
    let s = sender(&base);
    assert!(!s.has_reactions());
    let only_reaction = Outgoing {
        reaction: Some("👍".into()),
        ..reply("")
    };
    let delivered = s.send(&only_reaction).await.unwrap();
    assert!(delivered.pieces.is_empty() && !delivered.reacted);
    assert!(calls(&api).is_empty());
    let with_text = Outgoing {
        reaction: Some("👍".into()),
        ..reply("On it.")
    };
    let delivered = s.send(&with_text).await.unwrap();
    assert!(!delivered.reacted);
    assert_eq!(calls(&api).len(), 1);
    assert_eq!(calls(&api)[0].field("Body"), "On it.");
}

#[tokio::test]
async fn refusals_say_whether_to_retry() {
    let (api, base) = fake_api().await;
    let s = sender(&base);
    let answer = |a: Answer| api.answers.lock().unwrap().push(a);

    answer(Answer {
        retry_after: Some("30"),
        ..twilio_error(429, 20429, "Too Many Requests")
    });
    let err = s.send(&reply("hi")).await.unwrap_err();
    let thirty = Some(Duration::from_secs(30));
    assert!(
        matches!(err, SendError::RateLimited { retry_after } if retry_after == thirty),
        "{err:?}"
    );
    assert!(err.is_retryable());

    answer(twilio_error(429, 20429, "Too Many Requests"));
    assert!(matches!(
        s.send(&reply("hi")).await,
        Err(SendError::RateLimited { retry_after: None })
    ));

    answer(twilio_error(500, 20500, "Internal Server Error"));
    let err = s.send(&reply("hi")).await.unwrap_err();
    assert!(matches!(err, SendError::Retryable { status: 500 }) && err.is_retryable());

    answer(twilio_error(503, 20503, "Service Unavailable"));
    assert!(matches!(
        s.send(&reply("hi")).await,
        Err(SendError::Retryable { status: 503 })
    ));

    for (status, code, message) in [
        (
            400,
            21211,
            "The 'To' number +15558675310 is not a valid phone number.",
        ),
        (400, 21610, "Attempt to send to unsubscribed recipient"),
        (403, 20403, "Permission Denied"),
    ] {
        answer(twilio_error(status, code, message));
        let err = s.send(&reply("hi")).await.unwrap_err();
        let SendError::Rejected {
            status: got,
            reason,
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(*got, status);
        assert!(reason.contains(&code.to_string()), "{reason}");
        assert!(
            !reason.contains(API_TOKEN) && !reason.contains(USER),
            "{reason}"
        );
        assert!(!err.is_retryable());
    }

    // Bridle's own credentials refused: the operator's to fix, so retried, never dropped.
    answer(twilio_error(401, 20003, "Authenticate"));
    let err = s.send(&reply("hi")).await.unwrap_err();
    assert!(
        matches!(&err, SendError::Unauthorized { reason } if reason.contains("TWILIO_AUTH_TOKEN")),
        "{err:?}"
    );
    assert!(err.is_retryable());
    for e in [err.to_string(), format!("{err:?}")] {
        assert!(!e.contains(API_TOKEN) && !e.contains(USER), "{e}");
    }
}

#[tokio::test]
async fn a_failure_stops_the_remaining_pieces() {
    let (api, base) = fake_api().await;
    api.answers
        .lock()
        .unwrap()
        .extend([created(), twilio_error(500, 20500, "Internal Server Error")]);
    let text = format!("{}\n\n{}\n\nlast", "a ".repeat(700), "b ".repeat(700));
    assert!(sender(&base).send(&reply(&text)).await.is_err());
    assert_eq!(calls(&api).len(), 2);
}

/// A reply cut off part way (the first SMS out, a 500 on the second) is sent on from the piece
/// that failed when `send_from` is given what went out: the first SMS is not paid for twice.
#[tokio::test]
async fn a_reply_cut_off_part_way_is_sent_on_from_the_piece_that_failed() {
    let (api, base) = fake_api().await;
    api.answers
        .lock()
        .unwrap()
        .extend([created(), twilio_error(500, 20500, "Internal Server Error")]);
    let text = format!(
        "{}\n\n{}\n\n{}",
        "a ".repeat(700),
        "b ".repeat(700),
        "c ".repeat(700)
    );
    let mut sent = Delivered::default();
    let err = sender(&base)
        .send_from(&reply(&text), &mut sent)
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(sent.pieces, ["a ".repeat(700).trim()]);
    sender(&base)
        .send_from(&reply(&text), &mut sent)
        .await
        .unwrap();
    let bodies: Vec<String> = calls(&api)
        .iter()
        .map(|c| c.field("Body").to_owned())
        .collect();
    assert_eq!(sent.pieces.len(), 3);
    assert_eq!(bodies.len(), 4, "{bodies:?}");
    assert_eq!(bodies[0], sent.pieces[0]);
    assert_eq!(
        bodies[1..],
        [&sent.pieces[1], &sent.pieces[1], &sent.pieces[2]].map(String::clone)
    );
}

#[tokio::test]
async fn an_unreachable_api_is_a_transport_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = sender(&base).send(&reply("hi")).await.unwrap_err();
    assert!(
        matches!(err, SendError::Transport(_)) && err.is_retryable(),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_conversation_key_without_a_number_pair_is_refused_before_sending() {
    let (api, base) = fake_api().await;
    let bad = Outgoing {
        conversation_key: "just-one-part".into(),
        ..reply("hi")
    };
    assert!(matches!(
        sender(&base).send(&bad).await,
        Err(SendError::Rejected { status: 0, .. })
    ));
    assert!(calls(&api).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Fuzz

const FIXTURES: &[&str] = &[
    "sms_text.txt",
    "sms_button_reply.txt",
    "mms_image.txt",
    "sms_opt_out_stop.txt",
    "status_queued.txt",
    "status_sent.txt",
    "status_delivered.txt",
    "status_failed.txt",
    "status_read.txt",
];

fn poke(body: &[u8], sig: &str, query: Option<&str>) {
    let h = headers(sig);
    let req = RawRequest {
        method: "POST",
        path: PATH,
        query,
        headers: &h,
        body,
        origin: None,
    };
    let _ = channel().verify(&req, 0);
    let _ = channel().parse(&req);
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        0..FIXTURES.len(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
    )
        .prop_map(|(i, edits)| {
            let mut body = fixture(FIXTURES[i]);
            for (at, byte, op) in edits {
                if body.is_empty() {
                    body.push(byte);
                    continue;
                }
                let at = at.index(body.len());
                match op {
                    0 => body[at] = byte,
                    1 => body.insert(at, byte),
                    _ => body.truncate(at),
                }
            }
            body
        })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(
        body in prop::collection::vec(any::<u8>(), 0..512),
        sig in ".{0,40}",
        query in prop::option::of("[ -~]{0,30}"),
    ) {
        poke(&body, &sig, query.as_deref());
    }

    #[test]
    fn form_like_bytes_never_panic(body in "[A-Za-z0-9=&%+ ]{0,300}") {
        poke(body.as_bytes(), "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", None);
    }

    #[test]
    fn mutated_fixtures_never_panic(body in mutated()) {
        poke(&body, "0/KCTR6DLpKmkAf8muzZqo1nDgQ=", None);
        prop_assert!(verify(None, &headers("0/KCTR6DLpKmkAf8muzZqo1nDgQ="), &body).is_err());
        // Re-signed, a mutated fixture that still decodes verifies and parses without a panic.
        let h = signed(&body, None);
        let req = RawRequest { method: "POST", path: PATH, query: None, headers: &h, body: &body,
        origin: None,
    };
        let _ = channel().verify(&req, 0);
        let _ = channel().parse(&req);
    }

    #[test]
    fn any_signed_form_verifies_and_any_change_to_a_value_does_not(
        params in prop::collection::btree_map("[A-Za-z][A-Za-z0-9]{0,8}", "\\PC{0,20}", 1..8),
        extra in "[a-z]{1,3}",
    ) {
        let params: Vec<(String, String)> = params.into_iter().collect();
        let encode = |ps: &[(String, String)]| {
            let mut s = form_urlencoded::Serializer::new(String::new());
            for (k, v) in ps {
                s.append_pair(k, v);
            }
            s.finish()
        };
        let body = encode(&params);
        let url = format!("{BASE}{PATH}");
        let sig = twilio::sign(TOKEN.as_bytes(), &url, &params);
        prop_assert!(verify(None, &headers(&sig), body.as_bytes()).is_ok());
        let mut changed = params.clone();
        changed[0].1.push_str(&extra);
        let tampered = encode(&changed);
        prop_assert!(mismatch(verify(None, &headers(&sig), tampered.as_bytes())));
    }
}
