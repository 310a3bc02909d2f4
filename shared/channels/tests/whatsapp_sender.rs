//! The WhatsApp sender against a local fake Graph API that records every request.

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use channels::whatsapp::{MAX_CHARS, MAX_INTERACTIVE_BODY_CHARS, WhatsAppSender};
use channels::{Button, Delivered, Outgoing, SendError, Sender};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TOKEN: &str = "EAAGm0PX4ZCpsBAKfaketoken";
const PHONE_NUMBER_ID: &str = "106540352242922";
const USER: &str = "16315551181";
/// "Now" for the window checks: 2026-01-01T00:00:00Z.
const NOW_MS: i64 = 1_767_225_600_000;
const HOUR_MS: i64 = 3_600_000;

/// One recorded call.
#[derive(Debug, Clone)]
struct Call {
    path: String,
    authorization: Option<String>,
    body: Value,
}

/// A canned answer: status, extra headers, body.
type Answer = (u16, Vec<(&'static str, String)>, Value);

#[derive(Clone, Default)]
struct Graph {
    calls: Arc<Mutex<Vec<Call>>>,
    /// Answers to give in order; when empty, 200 with a message id.
    answers: Arc<Mutex<VecDeque<Answer>>>,
}

impl Graph {
    fn calls(&self) -> Vec<Call> {
        self.calls.lock().unwrap().clone()
    }

    fn bodies(&self) -> Vec<Value> {
        self.calls().into_iter().map(|c| c.body).collect()
    }

    fn answer(&self, status: u16, headers: Vec<(&'static str, String)>, body: Value) {
        self.answers
            .lock()
            .unwrap()
            .push_back((status, headers, body));
    }

    fn graph_error(&self, status: u16, code: i64, message: &str) {
        self.answer(
            status,
            Vec::new(),
            json!({"error": {"message": message, "type": "OAuthException", "code": code,
                "error_subcode": 2_494_010, "fbtrace_id": "AbCdEf012345"}}),
        );
    }
}

async fn messages(
    State(g): State<Graph>,
    Path((version, phone)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    g.calls.lock().unwrap().push(Call {
        path: format!("/{version}/{phone}/messages"),
        authorization: headers
            .get("authorization")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: serde_json::from_slice(&body).unwrap(),
    });
    let answer = g.answers.lock().unwrap().pop_front();
    let (status, extra, body) = answer.unwrap_or_else(|| {
        (
            200,
            Vec::new(),
            json!({"messaging_product": "whatsapp",
                   "contacts": [{"input": USER, "wa_id": USER}],
                   "messages": [{"id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI5QTNDQTVCM0Q0Q0Q2RTY3RTcA"}]}),
        )
    });
    let mut response = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    for (k, v) in extra {
        response.headers_mut().insert(k, v.parse().unwrap());
    }
    response
}

async fn graph() -> (Graph, String) {
    let g = Graph::default();
    let app = Router::new()
        .route("/{version}/{phone}/messages", post(messages))
        .with_state(g.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (g, base)
}

fn sender(base: &str) -> WhatsAppSender {
    WhatsAppSender::new(reqwest::Client::new(), base, TOKEN, PHONE_NUMBER_ID).with_clock(|| NOW_MS)
}

fn reply(text: &str) -> Outgoing {
    Outgoing {
        conversation_key: USER.into(),
        external_user_id: USER.into(),
        in_reply_to: "wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQTRBNjU5OUFFRTAzODEwMTQ0RgA=".into(),
        text: text.into(),
        user_last_message_ms: Some(NOW_MS - 5 * 60_000),
        ..Outgoing::default()
    }
}

fn buttons(n: usize) -> Vec<Button> {
    (1..=n)
        .map(|i| Button {
            id: format!("choice-{i}"),
            title: format!("Option {i}"),
        })
        .collect()
}

#[tokio::test]
async fn a_text_reply_is_one_bearer_authorised_post_to_the_phone_number() {
    let (g, base) = graph().await;
    let delivered = sender(&base).send(&reply("Hello!")).await.unwrap();
    assert_eq!(delivered.pieces, ["Hello!"]);
    assert!(!delivered.reacted);
    let calls = g.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].path, format!("/v21.0/{PHONE_NUMBER_ID}/messages"));
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "to": USER, "type": "text",
               "text": {"body": "Hello!", "preview_url": false}})
    );
}

#[tokio::test]
async fn the_api_version_and_a_trailing_slash_in_the_base_are_handled() {
    let (g, base) = graph().await;
    let s = WhatsAppSender::new(
        reqwest::Client::new(),
        format!("{base}/"),
        TOKEN,
        PHONE_NUMBER_ID,
    )
    .with_api_version("v22.0");
    s.send(&Outgoing {
        user_last_message_ms: None,
        ..reply("Hi")
    })
    .await
    .unwrap();
    assert_eq!(
        g.calls()[0].path,
        format!("/v22.0/{PHONE_NUMBER_ID}/messages")
    );
}

#[tokio::test]
async fn markdown_is_sent_as_whatsapp_markup_with_links_on_their_own_line() {
    let (g, base) = graph().await;
    let delivered = sender(&base)
        .send(&reply(
            "## Booked\n\n**Done.** See [your booking](https://example.com/b/42) for details.",
        ))
        .await
        .unwrap();
    let expected = "*Booked*\n\n*Done.* See your booking for details.\nhttps://example.com/b/42";
    assert_eq!(delivered.pieces, [expected]);
    assert_eq!(g.bodies()[0]["text"]["body"], expected);
}

#[tokio::test]
async fn long_replies_go_out_in_order_with_buttons_on_the_last_piece_only() {
    let (g, base) = graph().await;
    let paragraph = |c: &str| format!("{c} ").repeat(1_500).trim_end().to_owned(); // 2,999 chars
    let text = format!(
        "{}\n\n{}\n\nShall I book it?",
        paragraph("a"),
        paragraph("b")
    );
    let out = Outgoing {
        buttons: buttons(2),
        ..reply(&text)
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    assert_eq!(
        delivered.pieces,
        [
            paragraph("a"),
            paragraph("b"),
            "Shall I book it?".to_owned()
        ]
    );
    let bodies = g.bodies();
    assert_eq!(bodies.len(), 3);
    assert_eq!(bodies[0]["type"], "text");
    assert_eq!(bodies[0]["text"]["body"], paragraph("a"));
    assert_eq!(bodies[1]["type"], "text");
    assert_eq!(bodies[1]["text"]["body"], paragraph("b"));
    assert_eq!(
        bodies[2],
        json!({"messaging_product": "whatsapp", "to": USER, "type": "interactive",
               "interactive": {"type": "button", "body": {"text": "Shall I book it?"},
                   "action": {"buttons": [
                       {"type": "reply", "reply": {"id": "choice-1", "title": "Option 1"}},
                       {"type": "reply", "reply": {"id": "choice-2", "title": "Option 2"}}]}}})
    );
}

#[tokio::test]
async fn a_last_piece_too_long_for_a_button_body_is_split_again() {
    let (g, base) = graph().await;
    // One piece of about 3,000 chars: fine as text, too long as an interactive body. The
    // longest tail that fits goes with the buttons, cut at a sentence boundary.
    let text = format!(
        "{}\n\n{}",
        "x".repeat(1_800),
        "Pick one. ".repeat(120).trim_end()
    );
    assert!(text.chars().count() <= MAX_CHARS);
    let out = Outgoing {
        buttons: buttons(3),
        ..reply(&text)
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    let bodies = g.bodies();
    assert_eq!(bodies.len(), 2, "{:?}", delivered.pieces);
    assert_eq!(bodies.len(), delivered.pieces.len());
    assert_eq!(bodies[0]["type"], "text");
    assert!(delivered.pieces[0].starts_with(&"x".repeat(1_800)));
    assert!(delivered.pieces[0].ends_with("Pick one."));
    let last = bodies[1]["interactive"]["body"]["text"].as_str().unwrap();
    assert_eq!(last, delivered.pieces[1]);
    assert!(last.starts_with("Pick one.") && last.chars().count() <= MAX_INTERACTIVE_BODY_CHARS);
    assert!(last.chars().count() > MAX_INTERACTIVE_BODY_CHARS - 10);
    assert_eq!(
        bodies[1]["interactive"]["action"]["buttons"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    // Nothing lost: the pieces hold every word, in order.
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(words(&delivered.pieces.join(" ")), words(&text));
}

#[tokio::test]
async fn never_more_than_three_buttons() {
    let (g, base) = graph().await;
    let out = Outgoing {
        buttons: buttons(5),
        ..reply("Choose")
    };
    sender(&base).send(&out).await.unwrap();
    let b = &g.bodies()[0]["interactive"]["action"]["buttons"];
    assert_eq!(b.as_array().unwrap().len(), 3);
    assert_eq!(b[2]["reply"]["id"], "choice-3");
}

#[tokio::test]
async fn the_reaction_goes_first() {
    let (g, base) = graph().await;
    let out = Outgoing {
        reaction: Some("👍".into()),
        ..reply("On it.")
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    assert!(delivered.reacted);
    let bodies = g.bodies();
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[0],
        json!({"messaging_product": "whatsapp", "to": USER, "type": "reaction",
               "reaction": {"message_id": out.in_reply_to, "emoji": "👍"}})
    );
    assert_eq!(bodies[1]["text"]["body"], "On it.");
}

#[tokio::test]
async fn a_reaction_alone_is_one_call_and_no_reaction_is_no_call() {
    let (g, base) = graph().await;
    let out = Outgoing {
        reaction: Some("❤️".into()),
        ..reply("")
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    assert!(delivered.reacted && delivered.pieces.is_empty());
    assert_eq!(g.bodies().len(), 1);
    assert_eq!(g.bodies()[0]["type"], "reaction");

    let (g, base) = graph().await;
    sender(&base).send(&reply("Plain")).await.unwrap();
    assert!(g.bodies().iter().all(|b| b["type"] != "reaction"));
}

#[tokio::test]
async fn a_refused_reaction_does_not_cost_the_reply() {
    let (g, base) = graph().await;
    g.graph_error(400, 131_009, "Parameter value is not valid");
    let out = Outgoing {
        reaction: Some("🙂".into()),
        ..reply("Here you go.")
    };
    let delivered = sender(&base).send(&out).await.unwrap();
    assert!(!delivered.reacted);
    assert_eq!(delivered.pieces, ["Here you go."]);
    assert_eq!(g.bodies().len(), 2);
}

#[tokio::test]
async fn a_failing_reaction_stops_before_any_text() {
    let (g, base) = graph().await;
    g.answer(503, Vec::new(), json!({}));
    let out = Outgoing {
        reaction: Some("🙂".into()),
        ..reply("Here you go.")
    };
    let err = sender(&base).send(&out).await.unwrap_err();
    assert!(matches!(err, SendError::Retryable { status: 503 }));
    assert_eq!(g.bodies().len(), 1);
}

#[tokio::test]
async fn outside_the_24_hour_window_nothing_is_sent() {
    let (g, base) = graph().await;
    let stale = Outgoing {
        reaction: Some("👍".into()),
        user_last_message_ms: Some(NOW_MS - 24 * HOUR_MS - 1),
        ..reply("Still there?")
    };
    let err = sender(&base).send(&stale).await.unwrap_err();
    assert!(matches!(err, SendError::OutsideWindow) && !err.is_retryable());
    assert!(g.calls().is_empty());

    for last in [Some(NOW_MS - 24 * HOUR_MS), Some(NOW_MS), None] {
        let ok = Outgoing {
            user_last_message_ms: last,
            ..reply("Yes")
        };
        sender(&base).send(&ok).await.unwrap();
    }
    assert_eq!(g.calls().len(), 3);
}

#[tokio::test]
async fn a_template_may_be_sent_outside_the_window() {
    let (g, base) = graph().await;
    sender(&base)
        .send_template(USER, "booking_reminder", "en_US")
        .await
        .unwrap();
    let calls = g.calls();
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(
        calls[0].body,
        json!({"messaging_product": "whatsapp", "to": USER, "type": "template",
               "template": {"name": "booking_reminder", "language": {"code": "en_US"}}})
    );
}

#[tokio::test]
async fn graph_errors_say_whether_to_retry() {
    let (g, base) = graph().await;
    let s = sender(&base);
    let hi = reply("Hi");
    let send = || s.send(&hi);

    g.answer(429, vec![("retry-after", "30".into())], json!({}));
    let err = send().await.unwrap_err();
    assert!(
        matches!(err, SendError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(30))
    );
    assert!(err.is_retryable());

    for code in [4, 80_007, 130_429, 131_056] {
        g.graph_error(400, code, "Rate limit hit");
        assert!(
            matches!(
                send().await.unwrap_err(),
                SendError::RateLimited { retry_after: None }
            ),
            "code {code}"
        );
    }

    g.graph_error(400, 131_047, "Re-engagement message");
    assert!(matches!(
        send().await.unwrap_err(),
        SendError::OutsideWindow
    ));

    g.graph_error(500, 131_000, "Something went wrong");
    let err = send().await.unwrap_err();
    assert!(matches!(err, SendError::Retryable { status: 500 }) && err.is_retryable());

    g.graph_error(
        401,
        190,
        &format!("Error validating access token {TOKEN}: Session has expired"),
    );
    let err = send().await.unwrap_err();
    let SendError::Unauthorized { reason } = &err else {
        panic!("expected the token refused, got {err:?}")
    };
    assert!(
        reason.contains("code 190") && !reason.contains(TOKEN),
        "{reason}"
    );
    assert!(
        err.is_retryable(),
        "the operator fixes the token; the reply waits"
    );

    g.graph_error(400, 100, "Invalid parameter");
    assert!(matches!(
        send().await.unwrap_err(),
        SendError::Rejected { status: 400, reason } if reason.contains("Invalid parameter")
    ));

    g.answer(403, Vec::new(), json!("Forbidden"));
    assert!(matches!(
        send().await.unwrap_err(),
        SendError::Rejected { status: 403, .. }
    ));
}

#[tokio::test]
async fn an_unreachable_api_is_a_transport_error() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = sender(&base).send(&reply("Hi")).await.unwrap_err();
    assert!(matches!(err, SendError::Transport(_)) && err.is_retryable());
}

#[test]
fn the_sender_states_its_limits() {
    let s = sender("http://127.0.0.1:9");
    assert_eq!(s.max_chars(), 4_096);
    assert!(s.has_reactions());
    assert!(!format!("{s:?}").contains(TOKEN));
}

/// A reply cut off part way (the reaction and the first piece out, a 503 on the second) is sent
/// on from the piece that failed when `send_from` is given what went out: no second reaction,
/// no second first piece, the buttons still on the last.
#[tokio::test]
async fn a_reply_cut_off_part_way_is_sent_on_from_the_piece_that_failed() {
    let (g, base) = graph().await;
    let paragraph = |c: &str| format!("{c} ").repeat(1_500).trim_end().to_owned();
    let text = format!(
        "{}\n\n{}\n\nShall I book it?",
        paragraph("a"),
        paragraph("b")
    );
    let out = Outgoing {
        buttons: buttons(1),
        reaction: Some("👍".into()),
        ..reply(&text)
    };
    let ok = json!({"messages": [{"id": "wamid.x"}]});
    g.answer(200, Vec::new(), ok.clone());
    g.answer(200, Vec::new(), ok);
    g.graph_error(503, 2, "Service temporarily unavailable");
    let mut sent = Delivered::default();
    let err = sender(&base).send_from(&out, &mut sent).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(sent.reacted);
    assert_eq!(sent.pieces, [paragraph("a")]);

    sender(&base).send_from(&out, &mut sent).await.unwrap();
    assert_eq!(
        sent.pieces,
        [paragraph("a"), paragraph("b"), "Shall I book it?".into()]
    );
    let kinds: Vec<Value> = g.bodies().iter().map(|b| b["type"].clone()).collect();
    assert_eq!(
        kinds,
        ["reaction", "text", "text", "text", "interactive"],
        "the failed piece again, nothing before it"
    );
    let bodies = g.bodies();
    assert_eq!(bodies[3]["text"]["body"], paragraph("b"));
    assert_eq!(bodies[4]["interactive"]["body"]["text"], "Shall I book it?");
}
