//! Replies over Twilio's Messages API: one `POST …/Messages.json` per piece.

use super::format::format;
use crate::{Button, Delivered, Outgoing, SendError, Sender};
use async_trait::async_trait;
use serde::Deserialize;
use std::time::Duration;

/// Twilio's API base when `TWILIO_API_BASE` is not set.
pub const DEFAULT_API_BASE: &str = "https://api.twilio.com";

/// Twilio's limit on one message's `Body`, in characters. Twilio cuts a long body into carrier
/// segments (160 GSM-7 or 70 UCS-2 characters) and the phone joins them; that is Twilio's
/// business, not ours.
pub const MAX_CHARS: usize = 1_600;

/// At most this many numbered options are offered.
pub const MAX_BUTTONS: usize = 3;
/// Text messages one reply sends at most (each up to [`MAX_CHARS`], which Twilio bills as up to
/// 11 segments, or 24 with characters outside GSM-7). Every segment is paid for, and a sender
/// can ask for a long answer (in emoji, even) every message: a reply longer than this is cut
/// short, with [`CUT_SHORT`] at its end.
pub const MAX_PIECES: usize = 3;
/// What a question cut short says instead of how to answer it, when what a yes would do does
/// not fit in [`MAX_PIECES`] messages: a yes to changes the person was not shown is not asked
/// for.
pub const TOO_MUCH_TO_CONFIRM: &str = "This asks about more changes than text messages can show, so it cannot be answered here and nothing will be done. Ask for fewer changes at a time.";
/// What a reply cut short at [`MAX_PIECES`] messages says where it was cut.
pub const CUT_SHORT: &str = "(This answer was too long for text messages and was cut short. Ask for the rest, or for a shorter answer.)";

/// An option's title is cut to this many characters.
pub const MAX_BUTTON_TITLE: usize = 20;

/// The deadline of each API request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The account a sender posts as: the account SID and its auth token (HTTP Basic auth).
#[derive(Clone)]
pub struct TwilioCredentials {
    account_sid: String,
    auth_token: String,
}

impl TwilioCredentials {
    /// `account_sid` (`AC…`, from `TWILIO_ACCOUNT_SID`) and `auth_token` (`TWILIO_AUTH_TOKEN`).
    pub fn new(account_sid: impl Into<String>, auth_token: impl Into<String>) -> Self {
        Self {
            account_sid: account_sid.into(),
            auth_token: auth_token.into(),
        }
    }
}

impl std::fmt::Debug for TwilioCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwilioCredentials")
            .field("account_sid", &self.account_sid)
            .field("auth_token", &"[redacted]")
            .finish()
    }
}

/// The outbound side: sends SMS replies from the business number of the conversation.
#[derive(Debug)]
pub struct TwilioSender {
    client: reqwest::Client,
    api_base: String,
    credentials: TwilioCredentials,
}

impl TwilioSender {
    /// `api_base` is `TWILIO_API_BASE` or [`DEFAULT_API_BASE`] (tests point it at a local fake).
    pub fn new(
        client: reqwest::Client,
        api_base: impl Into<String>,
        credentials: TwilioCredentials,
    ) -> Self {
        Self {
            client,
            api_base: api_base.into().trim_end_matches('/').to_owned(),
            credentials,
        }
    }
}

/// What a reply's buttons become on SMS: its typed answer's line when it has one, else the
/// buttons as numbered options (`1. Yes`, one per line).
pub fn options(reply: &Outgoing) -> Option<String> {
    match &reply.typed_answer {
        Some(line) if !reply.buttons.is_empty() => Some(format(line)),
        _ => numbered_options(&reply.buttons),
    }
}

/// The SMS bodies for a reply, in order: `text` formatted as plain text and split on paragraph
/// boundaries — at most [`MAX_PIECES`], cut short when there was more ([`cut_short`]) — then
/// the `options` ([`options`]) appended to the last piece, or sent as a last piece of their own
/// when they do not fit.
pub fn pieces(text: &str, options: Option<&str>) -> Vec<String> {
    split_reply(text, options, false)
}

/// [`pieces`] of a confirmation's question, which its typed answer's `line` ends: what a yes
/// does, its last paragraph, is kept whole when it is cut short ([`cut_short`]), or no yes is
/// asked for.
pub fn question_pieces(text: &str, line: &str) -> Vec<String> {
    split_reply(text, Some(line), true)
}

/// The SMS bodies `reply` goes out in: a question's when it carries a typed answer for its
/// buttons (a confirmation), else with its buttons as numbered options.
pub fn reply_pieces(reply: &Outgoing) -> Vec<String> {
    match options(reply) {
        Some(line) if reply.typed_answer.is_some() => question_pieces(&reply.text, &line),
        options => pieces(&reply.text, options.as_deref()),
    }
}

fn split_reply(text: &str, options: Option<&str>, question: bool) -> Vec<String> {
    let formatted = format(text);
    let mut pieces = crate::split::split(&formatted, MAX_CHARS);
    let mut options = options;
    if pieces.len() > MAX_PIECES {
        let (cut, kept_last) = cut_short(&formatted, question);
        pieces = cut;
        // A question whose list of what a yes does could not be shown whole asks for no yes.
        if question && !kept_last {
            options = Some(TOO_MUCH_TO_CONFIRM);
        }
    }
    let Some(options) = options else {
        return pieces;
    };
    match pieces.last_mut() {
        Some(last) if last.chars().count() + 2 + options.chars().count() <= MAX_CHARS => {
            last.push_str("\n\n");
            last.push_str(options);
        }
        _ => pieces.push(options.to_owned()),
    }
    pieces
}

/// `text` (longer than [`MAX_PIECES`] messages) in [`MAX_PIECES`] messages: its beginning, then
/// [`CUT_SHORT`], then its last paragraph whole when that fits in one message with the note,
/// and whether it was kept. A confirmation's last paragraph is what a yes does ("If you say
/// yes: …", written under the model's words): a reply cut short must never ask for a yes
/// without it, so a `question`'s is kept whole over as many of the messages as it needs, the
/// model's words cut to fit before it (not kept when even that is too long: the caller then
/// asks for no yes).
fn cut_short(text: &str, question: bool) -> (Vec<String>, bool) {
    let note_chars = CUT_SHORT.chars().count();
    let (body, ending, kept_last) = match text.trim_end().rsplit_once("\n\n") {
        Some((body, last)) if last.chars().count() + 2 + note_chars <= MAX_CHARS => {
            (body, format!("{CUT_SHORT}\n\n{last}"), true)
        }
        Some((body, last)) if question => {
            let ending = crate::split::split(&format!("{CUT_SHORT}\n\n{last}"), MAX_CHARS);
            if ending.len() <= MAX_PIECES {
                let room = MAX_PIECES - ending.len();
                let mut pieces: Vec<String> = crate::split::split(body, MAX_CHARS)
                    .into_iter()
                    .take(room)
                    .collect();
                pieces.extend(ending);
                return (pieces, true);
            }
            (text, CUT_SHORT.to_owned(), false)
        }
        _ => (text, CUT_SHORT.to_owned(), false),
    };
    let mut pieces: Vec<String> = crate::split::split(body, MAX_CHARS)
        .into_iter()
        .take(MAX_PIECES)
        .collect();
    let last = pieces.pop().unwrap_or_default();
    let room = MAX_CHARS - ending.chars().count();
    let kept = match room.checked_sub(2) {
        Some(room) if room > 0 => crate::split::split(&last, room)
            .into_iter()
            .next()
            .unwrap_or_default(),
        _ => String::new(),
    };
    pieces.push(if kept.is_empty() {
        ending
    } else {
        format!("{kept}\n\n{ending}")
    });
    (pieces, kept_last)
}

fn numbered_options(buttons: &[Button]) -> Option<String> {
    let lines: Vec<String> = buttons
        .iter()
        .take(MAX_BUTTONS)
        .enumerate()
        .map(|(i, b)| {
            let title = format(&b.title)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            let title: String = title.chars().take(MAX_BUTTON_TITLE).collect();
            format!("{}. {}", i + 1, title)
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// `(To, From)`: the user's number and the business number, from the conversation key
/// `user:business` (the user part is matched against `external_user_id` first, so a prefixed
/// address such as `whatsapp:+1…` splits right).
fn numbers(reply: &Outgoing) -> Result<(&str, &str), SendError> {
    let user = reply.external_user_id.as_str();
    let by_user = reply
        .conversation_key
        .strip_prefix(user)
        .and_then(|rest| rest.strip_prefix(':'))
        .filter(|_| !user.is_empty())
        .map(|business| (user, business));
    by_user
        .or_else(|| reply.conversation_key.split_once(':'))
        .filter(|(to, from)| !to.is_empty() && !from.is_empty())
        .ok_or_else(|| SendError::Rejected {
            status: 0,
            reason: "the conversation key is not `user:business` (nothing was sent)".into(),
        })
}

/// Twilio's error body: `{"code", "message", "more_info", "status"}`.
#[derive(Deserialize)]
struct ApiError {
    code: Option<u32>,
    message: Option<String>,
}

/// What a non-2xx answer means for the caller.
fn classify(status: u16, retry_after: Option<&str>, body: &[u8]) -> SendError {
    let err: Option<ApiError> = serde_json::from_slice(body).ok();
    let code = err.as_ref().and_then(|e| e.code);
    tracing::warn!(
        status,
        code,
        message = err.as_ref().and_then(|e| e.message.as_deref()),
        "Twilio did not accept a message"
    );
    match status {
        429 => SendError::RateLimited {
            retry_after: retry_after
                .and_then(|v| v.trim().parse().ok())
                .map(Duration::from_secs),
        },
        408 | 500..=599 => SendError::Retryable { status },
        _ if status == 401 || code == Some(20003) => SendError::Unauthorized {
            reason: format!("Twilio {} (TWILIO_AUTH_TOKEN)", reason(Some(20003))),
        },
        _ => SendError::Rejected {
            status,
            reason: reason(code),
        },
    }
}

/// A short, fixed reason: never Twilio's message verbatim (it may quote numbers or paths).
fn reason(code: Option<u32>) -> String {
    let Some(code) = code else {
        return "Twilio refused the message".into();
    };
    let hint = match code {
        20003 => "authentication failed (check the account SID and auth token)",
        20404 => "resource not found (check the account SID)",
        21211 => "invalid 'To' phone number",
        21408 => "sending to this region is not enabled",
        21606 => "the 'From' number cannot send to this destination",
        21610 => "the recipient has opted out (replied STOP)",
        21612 => "the 'To' number cannot be reached from the 'From' number",
        21614 => "the 'To' number is not a mobile number",
        21617 => "the message body is too long",
        _ => return format!("Twilio error {code}"),
    };
    format!("Twilio error {code}: {hint}")
}

impl TwilioSender {
    fn messages_url(&self) -> String {
        format!(
            "{}/2010-04-01/Accounts/{}/Messages.json",
            self.api_base, self.credentials.account_sid
        )
    }

    async fn post(&self, to: &str, from: &str, body: &str) -> Result<(), SendError> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("To", to)
            .append_pair("From", from)
            .append_pair("Body", body)
            .finish();
        let res = self
            .client
            .post(self.messages_url())
            .timeout(REQUEST_TIMEOUT)
            .basic_auth(
                &self.credentials.account_sid,
                Some(&self.credentials.auth_token),
            )
            .header("content-type", super::FORM_CONTENT_TYPE)
            .header("accept", "application/json")
            .body(form)
            .send()
            .await
            .map_err(SendError::Transport)?;
        let status = res.status().as_u16();
        if res.status().is_success() {
            return Ok(());
        }
        let retry_after = res
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = res.bytes().await.unwrap_or_default();
        Err(classify(status, retry_after.as_deref(), &body))
    }
}

#[async_trait]
impl Sender for TwilioSender {
    fn max_chars(&self) -> usize {
        MAX_CHARS
    }

    /// SMS has no reactions; a reply's `reaction` is dropped.
    fn has_reactions(&self) -> bool {
        false
    }

    /// Each piece is one message, billed per segment ([`super::segments`]).
    fn billed_segments(&self, piece: &str) -> u32 {
        super::segments(piece)
    }

    async fn send_from(&self, reply: &Outgoing, sent: &mut Delivered) -> Result<(), SendError> {
        let pieces = reply_pieces(reply);
        if !pieces.is_empty() {
            let (to, from) = numbers(reply)?;
            for (_, piece) in sent.rest(&pieces) {
                self.post(to, from, piece).await?;
                sent.pieces.push(piece.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_buttons(text: &str, buttons: &[Button]) -> Vec<String> {
        pieces(text, numbered_options(buttons).as_deref())
    }

    /// A typed answer's line takes the numbered lines' place (there are buttons to answer).
    #[test]
    fn a_typed_answer_replaces_the_numbered_lines() {
        let reply = Outgoing {
            text: "Cancel it?".into(),
            buttons: vec![button("y", "Yes"), button("n", "No")],
            typed_answer: Some("Reply **YES 123456** to go ahead, or NO.".into()),
            ..Outgoing::default()
        };
        assert_eq!(
            reply_pieces(&reply),
            ["Cancel it?\n\nReply YES 123456 to go ahead, or NO."]
        );
        let without = Outgoing {
            typed_answer: None,
            ..reply.clone()
        };
        assert_eq!(options(&without).as_deref(), Some("1. Yes\n2. No"));
        let no_buttons = Outgoing {
            buttons: Vec::new(),
            ..reply
        };
        assert_eq!(options(&no_buttons), None);
    }

    fn button(id: &str, title: &str) -> Button {
        Button {
            id: id.into(),
            title: title.into(),
        }
    }

    #[test]
    fn buttons_become_numbered_lines_on_the_last_piece() {
        let buttons = [button("y", "Yes"), button("n", "**No**, thanks")];
        assert_eq!(
            with_buttons("Shall I book it?", &buttons),
            ["Shall I book it?\n\n1. Yes\n2. No, thanks"]
        );
        assert_eq!(with_buttons("", &buttons), ["1. Yes\n2. No, thanks"]);
        assert!(with_buttons("  ", &[]).is_empty());
    }

    #[test]
    fn at_most_three_options_with_short_one_line_titles() {
        let buttons = [
            button("a", "A"),
            button("b", "A very long title that\ngoes on"),
            button("c", "C"),
            button("d", "D"),
        ];
        assert_eq!(
            with_buttons("Pick:", &buttons),
            ["Pick:\n\n1. A\n2. A very long title th\n3. C"]
        );
    }

    #[test]
    fn options_that_do_not_fit_go_in_a_piece_of_their_own() {
        let text = "x".repeat(MAX_CHARS - 5);
        let p = with_buttons(&text, &[button("y", "Yes")]);
        assert_eq!(p, [text, "1. Yes".to_owned()]);
        let text = "x".repeat(MAX_CHARS - 8);
        let p = with_buttons(&text, &[button("y", "Yes")]);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].chars().count(), MAX_CHARS);
    }

    /// However long the answer (100,000 characters outside GSM-7 were 63 messages, about 1,500
    /// billed segments), a reply is at most three messages, the last saying it was cut short.
    /// A confirmation's last paragraph, what a yes does, is kept whole after the cut, and its
    /// options still follow.
    #[test]
    fn a_long_answer_is_cut_short_at_three_messages() {
        let p = with_buttons(&"é ".repeat(50_000), &[]);
        assert_eq!(p.len(), MAX_PIECES);
        assert!(p.iter().all(|piece| piece.chars().count() <= MAX_CHARS));
        assert!(p[2].ends_with(CUT_SHORT), "{}", p[2]);
        assert!(!p[1].contains(CUT_SHORT));
        let held = "If you say yes:\n- Withdraw Dana Lee from Spring Open\n- Cancel Spring Open";
        let question = format!("{}\n\n{held}", "word ".repeat(20_000));
        let asked = with_buttons(&question, &[button("y", "Yes"), button("n", "No")]);
        assert!(asked.iter().all(|piece| piece.chars().count() <= MAX_CHARS));
        assert!(asked.len() <= MAX_PIECES + 1, "{}", asked.len());
        let shown = asked.join("\n\n");
        assert!(
            shown.contains(&format!("{CUT_SHORT}\n\n{held}")),
            "what a yes does is shown whole: {shown}"
        );
        assert!(shown.ends_with("1. Yes\n2. No"), "{shown}");
        // The line that says how to answer follows a question cut short just the same.
        let line = "Reply YES 123456 to go ahead, or NO.";
        let asked = question_pieces(&question, line);
        let shown = asked.join("\n\n");
        assert!(asked.iter().all(|piece| piece.chars().count() <= MAX_CHARS));
        assert!(shown.contains(&format!("{CUT_SHORT}\n\n{held}")), "{shown}");
        assert!(shown.ends_with(line), "{shown}");
        // A list of what a yes does too long for one message is kept whole over more of them,
        // the model's words cut to fit before it; the line on how to answer still follows.
        let long: Vec<String> = (0..6)
            .map(|n| format!("- Rename event {n} to \u{201c}{}\u{201d}", "x".repeat(280)))
            .collect();
        let held = format!("If you say yes:\n{}", long.join("\n"));
        let question = format!("{}\n\n{held}", "filler ".repeat(20_000));
        let asked = question_pieces(&question, line);
        let shown = asked.join("\n");
        assert!(asked.iter().all(|piece| piece.chars().count() <= MAX_CHARS));
        assert!(asked.len() <= MAX_PIECES + 1, "{}", asked.len());
        for item in &long {
            assert!(shown.contains(item.as_str()), "{item} not shown: {shown}");
        }
        assert!(shown.ends_with(line), "{shown}");
        // One too long for every message asks for no yes at all: no code to answer with.
        let endless: Vec<String> = (0..40)
            .map(|n| format!("- Withdraw attendee {n} ({})", "y".repeat(150)))
            .collect();
        let held = format!("If you say yes:\n{}", endless.join("\n"));
        let question = format!("{}\n\n{held}", "filler ".repeat(20_000));
        let asked = question_pieces(&question, line);
        let shown = asked.join("\n\n");
        assert!(asked.iter().all(|piece| piece.chars().count() <= MAX_CHARS));
        assert!(!shown.contains("YES 123456"), "{shown}");
        assert!(shown.ends_with(TOO_MUCH_TO_CONFIRM), "{shown}");
        // A model's own numbered options are no question: a long last paragraph of an ordinary
        // reply keeps them, and no sentence says nothing will be done.
        let options = with_buttons(
            &question,
            &[button("a", "Tell me more"), button("b", "Stop")],
        );
        let shown = options.join("\n\n");
        assert!(shown.ends_with("1. Tell me more\n2. Stop"), "{shown}");
        assert!(!shown.contains(TOO_MUCH_TO_CONFIRM), "{shown}");
        // Three messages' worth is sent whole.
        let three = "x".repeat(MAX_CHARS * 3);
        assert_eq!(with_buttons(&three, &[]).concat(), three);
    }

    #[test]
    fn the_number_pair_comes_from_the_conversation_key() {
        let reply = |key: &str, user: &str| Outgoing {
            conversation_key: key.into(),
            external_user_id: user.into(),
            ..Outgoing::default()
        };
        let r = reply("+1555:+1999", "+1555");
        assert_eq!(numbers(&r).unwrap(), ("+1555", "+1999"));
        let r = reply("whatsapp:+1555:whatsapp:+1999", "whatsapp:+1555");
        assert_eq!(numbers(&r).unwrap(), ("whatsapp:+1555", "whatsapp:+1999"));
        let r = reply("+1555:+1999", "");
        assert_eq!(numbers(&r).unwrap(), ("+1555", "+1999"));
        for key in ["+1555", ":+1999", "+1555:"] {
            assert!(matches!(
                numbers(&reply(key, "+1555")),
                Err(SendError::Rejected { status: 0, .. })
            ));
        }
    }

    #[test]
    fn errors_say_what_to_do_without_quoting_twilio() {
        let body = br#"{"code": 21610, "status": 400,
            "message": "Attempt to send to unsubscribed recipient +15551230000",
            "more_info": "https://www.twilio.com/docs/errors/21610"}"#;
        match classify(400, None, body) {
            SendError::Rejected { status, reason } => {
                assert_eq!(status, 400);
                assert!(
                    reason.contains("21610") && !reason.contains("+1555"),
                    "{reason}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify(429, Some("7"), b"{}"),
            SendError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(7)
        ));
        assert!(matches!(
            classify(429, Some("Wed, 21 Oct 2015 07:28:00 GMT"), b""),
            SendError::RateLimited { retry_after: None }
        ));
        assert!(matches!(
            classify(503, None, b"<html>"),
            SendError::Retryable { status: 503 }
        ));
        assert!(matches!(
            classify(408, None, b""),
            SendError::Retryable { status: 408 }
        ));
        assert!(matches!(
            classify(401, None, br#"{"code":20003,"message":"Authenticate"}"#),
            SendError::Unauthorized { .. }
        ));
    }

    #[test]
    fn debug_output_hides_the_auth_token() {
        let creds = TwilioCredentials::new("AC123", "s3cret-token");
        let sender = TwilioSender::new(reqwest::Client::new(), DEFAULT_API_BASE, creds);
        let shown = format!("{sender:?}");
        assert!(
            !shown.contains("s3cret-token") && shown.contains("AC123"),
            "{shown}"
        );
    }
}
