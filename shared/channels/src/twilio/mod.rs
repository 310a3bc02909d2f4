//! Twilio Programmable Messaging: SMS and MMS in, SMS out.
//!
//! **Signing.** Twilio POSTs each event form-encoded (`application/x-www-form-urlencoded`) with
//! `X-Twilio-Signature: base64(HMAC-SHA1(auth token, URL + params))`, where URL is the public URL
//! Twilio requested (`PUBLIC_BASE_URL` + path + `?` + raw query, when there is one) and params are
//! all POST parameters, known or not, sorted by name (repeated names: distinct values sorted), each
//! as name + form-*decoded* value, no separators (see [`verify`](mod@verify)). The comparison is
//! constant-time, over both the URL with and without the default port, as Twilio's own helper
//! libraries do. The form is decoded strictly before anything else is looked at; a body that is not
//! a form (or declares another `Content-Type`) fails verification. There is no timestamp in the
//! scheme, and the form names no time the message was sent either (so the webhook's age check,
//! [`Channel::sent_at_s`], has nothing to go on): replays are stopped
//! by the dedupe key (`MessageSid`, whose finished job's claim is kept 7 days) alone. Configure
//! the number's (or Messaging Service's) incoming-message webhook as `HTTP POST` to exactly
//! `PUBLIC_BASE_URL/webhooks/twilio`; `PUBLIC_BASE_URL` has no credentials and must be spelled as
//! in the Twilio console (scheme, host, port, path prefix). Where no `PUBLIC_BASE_URL` is set
//! (the webhook Lambda: the API's address exists only once the stack does), the URL is the one
//! the request was made to as API Gateway reports it ([`TwilioChannel::at_called_url`]).
//!
//! **Inbound.** One webhook is one message: message id and dedupe key `MessageSid` (older
//! `SmsMessageSid`/`SmsSid`), user `From`, conversation `From:To` (the phone-number pair), text
//! `Body`, and for MMS `NumMedia` items `MediaUrl{N}` (the reference: a Twilio URL, which needs the
//! account's Basic auth when media authentication is on) with `MediaContentType{N}` (the MIME
//! type), at most 10. SMS has no buttons: a sender offers options as numbered lines (or the
//! reply's `typed_answer` line saying how to answer) and a reply comes back as its text (with no
//! `button_id`); mapping it to an option is the conversation's job. Opt-out keywords (`STOP`,
//! `UNSUBSCRIBE`, `CANCEL`, `END`, `QUIT`, … alone, or `OptOutType=STOP`) are handled by Twilio
//! itself (it answers them and blocks sending to an opted-out number, which then fails with
//! error 21610): they are ignored, as no reply to them could be sent. `START` and `HELP` are
//! passed on (Twilio answers them too; the assistant's answer can go out).
//!
//! **Ignored** (acknowledged with 200, no turn): outbound status callbacks (`MessageStatus` or
//! `SmsStatus` in [`STATUS_CALLBACK_STATUSES`]: queued, sending, sent, delivered, undelivered,
//! failed, read, …), anything with neither `Body` nor media (e.g. a voice webhook pointed here),
//! and a message whose body is blank and which has no media. An inbound message carries
//! `SmsStatus=received` and is never mistaken for a callback.
//!
//! **Outbound.** `POST {TWILIO_API_BASE}/2010-04-01/Accounts/{AccountSid}/Messages.json`, HTTP
//! Basic auth (account SID, auth token), form body `To` (the user), `From` (the business number,
//! both taken from the conversation key `user:business`), `Body`. Pieces are at most 1,600
//! characters (Twilio's `Body` limit; its cutting into carrier segments is its business), split
//! on paragraph boundaries and sent in order. Text is made plain ([`format()`]): markdown markers
//! are removed and a link's URL goes on its own line. Buttons (at most 3, titles cut to 20
//! characters) become numbered lines (`1. Yes`) on the last piece, or the reply's typed answer
//! line when it has one. There are no reactions.
//! Answers: 429 → rate limited (with `Retry-After`), 408/5xx → retry, other 4xx (e.g. 21211
//! invalid `To`, 21610 unsubscribed recipient, 20003 bad credentials) → rejected.
//!
//! The caller reads `TWILIO_ACCOUNT_SID`, `TWILIO_AUTH_TOKEN`, `PUBLIC_BASE_URL` and
//! `TWILIO_API_BASE` (default [`DEFAULT_API_BASE`]); nothing here reads the environment.

mod form;
pub mod format;
mod parse;
mod segments;
mod send;
pub mod verify;

pub use format::format;
pub use parse::{MAX_MEDIA, STATUS_CALLBACK_STATUSES};
pub use segments::segments;
pub use send::{
    CUT_SHORT, DEFAULT_API_BASE, MAX_BUTTON_TITLE, MAX_BUTTONS, MAX_CHARS, MAX_PIECES,
    REQUEST_TIMEOUT, TwilioCredentials, TwilioSender, pieces,
};
pub use verify::{FORM_CONTENT_TYPE, SIGNATURE_HEADER, request_url, sign, signed_string};

use crate::{Channel, ChannelError, Inbound, RawRequest};

/// The channel's name and route segment.
pub const NAME: &str = "twilio";

/// The conversation key of a message from `user` to the business number `business`.
pub fn conversation_key(user: &str, business: &str) -> String {
    format!("{user}:{business}")
}

/// The inbound side: verifies and parses Twilio's Messaging webhooks.
pub struct TwilioChannel {
    auth_token: Vec<u8>,
    /// `None`: the URL called is the request's own origin ([`RawRequest::origin`]).
    public_base_url: Option<String>,
}

impl std::fmt::Debug for TwilioChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TwilioChannel")
            .field("auth_token", &"[redacted]")
            .field("public_base_url", &self.public_base_url)
            .finish()
    }
}

impl TwilioChannel {
    /// `auth_token` is `TWILIO_AUTH_TOKEN` (the account's primary token, the signing key);
    /// `public_base_url` is `PUBLIC_BASE_URL`, e.g. `https://bridle.example.com` (the signed URL
    /// is this + the request's path and query).
    pub fn new(auth_token: impl Into<Vec<u8>>, public_base_url: impl Into<String>) -> Self {
        Self {
            auth_token: auth_token.into(),
            public_base_url: Some(public_base_url.into()),
        }
    }

    /// Checked against the URL each request was made to, as the server in front of Bridle
    /// says (API Gateway's domain name): the webhook Lambda, where the address Twilio calls is
    /// the API's own, known only once the stack is made. A request that does not say where it
    /// was made fails verification.
    pub fn at_called_url(auth_token: impl Into<Vec<u8>>) -> Self {
        Self {
            auth_token: auth_token.into(),
            public_base_url: None,
        }
    }
}

impl Channel for TwilioChannel {
    fn acknowledgement(&self) -> Option<(&'static str, &'static str)> {
        // An empty TwiML response: acknowledged, nothing sent back through Twilio's reply.
        Some((
            "text/xml",
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response/>",
        ))
    }

    fn name(&self) -> &'static str {
        NAME
    }

    /// Twilio's scheme has no timestamp, so `now_s` is unused.
    fn verify(&self, request: &RawRequest<'_>, _now_s: i64) -> Result<(), ChannelError> {
        let base = self.public_base_url.as_deref().or(request.origin).ok_or(
            ChannelError::BadSignature("the URL Twilio called is not known"),
        )?;
        verify::verify(&self.auth_token, base, request)
    }

    fn parse(&self, request: &RawRequest<'_>) -> Result<Inbound, ChannelError> {
        parse::parse(request.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_the_auth_token() {
        let shown = format!("{:?}", TwilioChannel::new("s3cret", "https://h.example"));
        assert!(
            !shown.contains("s3cret") && shown.contains("h.example"),
            "{shown}"
        );
    }
}
