//! WhatsApp, through Meta's WhatsApp Cloud API (the Graph API).
//!
//! **Inbound.** Meta first checks the webhook with a `GET ?hub.mode=subscribe&hub.challenge=…
//! &hub.verify_token=…`: when the token equals the configured verify token (compared in constant
//! time) the answer is the challenge, echoed ([`Inbound::Challenge`](crate::Inbound)); any other
//! token is a [`BadSignature`](crate::ChannelError). Every `POST` carries
//! `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>`, computed over the
//! bytes exactly as Meta sent them — Meta escapes non-ASCII text (`\u00e9`), so the body must
//! never be re-serialised before the check. The signature has no timestamp; each message's own
//! `timestamp` is how old a delivery is, and the webhook drops one older than duplicates are
//! remembered ([`Channel::sent_at_s`]).
//!
//! A delivery is `{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{…}}]}]}`;
//! every `entry[].changes[].value.messages[]` becomes one [`InboundMessage`](crate::InboundMessage)
//! (several per delivery are possible). The sender's `wa_id` (`messages[].from`) is both the
//! external user id and the conversation key; `messages[].id` (a `wamid.…`) is the dedupe key.
//! Every number of a Meta app posts to the app's one webhook: each message carries its
//! `value.metadata.phone_number_id` as [`addressed_to`](crate::InboundMessage), and only the
//! [`WhatsAppSender`] of that number answers it ([`Sender::answers_to`](crate::Sender)).
//! Text, reply-button and list presses (`interactive.button_reply` / `list_reply`, and the
//! legacy template `button`) and media (`image`, `document`, `audio`, `video`, by media id, the
//! caption as text) are kept. Ignored, with a 200: delivery statuses (`value.statuses`: sent,
//! delivered, read, failed — they are not the user talking), reactions (an emoji on an earlier
//! message is not a turn), `unsupported` and `system` messages (no content to answer), echoes of
//! the business number's own messages (answering them would loop), message kinds not handled yet
//! (location, contacts, sticker, order, flow replies), and deliveries carrying no messages at all
//! (template, account and other field updates).
//!
//! **Outbound.** `POST {base}/{version}/{phone_number_id}/messages` with
//! `Authorization: Bearer {access token}`: text pieces of at most [`MAX_CHARS`] characters; up to
//! [`MAX_BUTTONS`] reply buttons (titles at most [`MAX_BUTTON_TITLE_CHARS`]) as an `interactive`
//! `button` message whose body holds at most [`MAX_INTERACTIVE_BODY_CHARS`], on the last piece
//! only; a reaction (`type: "reaction"`) before the text. Text is rewritten to WhatsApp markup by
//! [`format()`]. A free-form reply may only go out within 24 h of the user's last message (the
//! customer-service window, [`WINDOW_MS`]): outside it [`WhatsAppSender`] refuses before sending
//! anything, and only [`WhatsAppSender::send_template`] may be used.
//!
//! The caller reads `WHATSAPP_APP_SECRET`, `WHATSAPP_VERIFY_TOKEN` (inbound),
//! `WHATSAPP_ACCESS_TOKEN`, `WHATSAPP_PHONE_NUMBER_ID` and `WHATSAPP_API_BASE` (outbound;
//! [`DEFAULT_API_BASE`] when unset).

mod format;
mod graph_error;
mod parse;
mod send;
mod verify;

pub use format::format;
pub use send::WhatsAppSender;
pub use verify::{SIGNATURE_HEADER, sign};

use crate::{Channel, ChannelError, Inbound, RawRequest};
use sha2::Digest;
use subtle::ConstantTimeEq;

/// The channel's name: the route segment and [`InboundMessage::channel`](crate::InboundMessage).
pub const NAME: &str = "whatsapp";
/// The longest text message WhatsApp takes, in characters.
pub const MAX_CHARS: usize = 4_096;
/// The longest body of an interactive (button) message, in characters.
pub const MAX_INTERACTIVE_BODY_CHARS: usize = 1_024;
/// Reply buttons per interactive message.
pub const MAX_BUTTONS: usize = 3;
/// The longest reply-button title, in characters.
pub const MAX_BUTTON_TITLE_CHARS: usize = 20;
/// The longest reply-button id, in characters.
pub const MAX_BUTTON_ID_CHARS: usize = 256;
/// The customer-service window: free-form replies only this long after the user's last message.
pub const WINDOW_MS: i64 = 24 * 60 * 60 * 1_000;
/// The Graph API's address, when `WHATSAPP_API_BASE` is not set.
pub const DEFAULT_API_BASE: &str = "https://graph.facebook.com";
/// The Graph API version used unless [`WhatsAppSender::with_api_version`] says otherwise.
pub const DEFAULT_API_VERSION: &str = "v21.0";

/// The inbound side: the GET verification handshake and signed POST deliveries.
pub struct WhatsAppChannel {
    app_secret: Vec<u8>,
    verify_token: Vec<u8>,
}

impl std::fmt::Debug for WhatsAppChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WhatsAppChannel { app_secret: [redacted], verify_token: [redacted] }")
    }
}

impl WhatsAppChannel {
    /// `app_secret` signs deliveries (the Meta app's secret, `WHATSAPP_APP_SECRET`);
    /// `verify_token` is the token chosen when the webhook was configured
    /// (`WHATSAPP_VERIFY_TOKEN`). An empty value refuses everything it would check.
    pub fn new(app_secret: impl Into<Vec<u8>>, verify_token: impl Into<Vec<u8>>) -> Self {
        Self {
            app_secret: app_secret.into(),
            verify_token: verify_token.into(),
        }
    }

    fn verify_handshake(&self, request: &RawRequest<'_>) -> Result<(), ChannelError> {
        let query = Handshake::from_query(request.query);
        if query.mode.as_deref() != Some("subscribe") {
            return Err(ChannelError::BadSignature("not a subscribe handshake"));
        }
        let given = query
            .verify_token
            .ok_or(ChannelError::BadSignature("missing verify token"))?;
        if self.verify_token.is_empty() {
            return Err(ChannelError::BadSignature("no verify token configured"));
        }
        // Compared as digests, of one length, so the time taken tells nothing of its length.
        let digest = |b: &[u8]| sha2::Sha256::digest(b);
        if digest(&self.verify_token)
            .ct_eq(&digest(given.as_bytes()))
            .into()
        {
            Ok(())
        } else {
            Err(ChannelError::BadSignature("verify token mismatch"))
        }
    }
}

/// The query of Meta's GET handshake.
#[derive(Default)]
struct Handshake {
    mode: Option<String>,
    verify_token: Option<String>,
    challenge: Option<String>,
}

impl Handshake {
    fn from_query(query: Option<&str>) -> Self {
        let mut h = Handshake::default();
        for (k, v) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let slot = match k.as_ref() {
                "hub.mode" => &mut h.mode,
                "hub.verify_token" => &mut h.verify_token,
                "hub.challenge" => &mut h.challenge,
                _ => continue,
            };
            slot.get_or_insert_with(|| v.into_owned());
        }
        h
    }
}

fn is_handshake(request: &RawRequest<'_>) -> bool {
    request.method.eq_ignore_ascii_case("GET")
}

impl Channel for WhatsAppChannel {
    fn name(&self) -> &'static str {
        NAME
    }

    /// GET: the verify token from the query string; anything else: `X-Hub-Signature-256` over
    /// the raw body. `now_s` is unused: Meta's deliveries carry no timestamp to check.
    fn accepts_get(&self) -> bool {
        true
    }

    fn verify(&self, request: &RawRequest<'_>, _now_s: i64) -> Result<(), ChannelError> {
        if is_handshake(request) {
            self.verify_handshake(request)
        } else {
            verify::check_signature(&self.app_secret, request)
        }
    }

    fn parse(&self, request: &RawRequest<'_>) -> Result<Inbound, ChannelError> {
        if is_handshake(request) {
            return Handshake::from_query(request.query)
                .challenge
                .map(Inbound::Challenge)
                .ok_or_else(|| ChannelError::Malformed("handshake without hub.challenge".into()));
        }
        parse::parse(request.body)
    }

    /// The signature carries no time, but each message does: the newest `timestamp`.
    fn sent_at_s(&self, request: &RawRequest<'_>) -> Option<i64> {
        if is_handshake(request) {
            return None;
        }
        parse::sent_at(request.body)
    }

    /// Each message's own `timestamp`, not the newest of its delivery's (the body read once).
    fn sent_at_each(
        &self,
        request: &RawRequest<'_>,
        messages: &[crate::InboundMessage],
    ) -> Vec<Option<i64>> {
        let sent = parse::sent_at_by_id(request.body);
        let newest = sent.values().copied().max();
        messages
            .iter()
            .map(|m| sent.get(&m.message_id).copied().or(newest))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_handshake_echoes_the_challenge_for_the_right_token() {
        let ch = WhatsAppChannel::new("secret", "meatyhamhock");
        let ok = get("hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=meatyhamhock");
        ch.verify(&ok, 0).unwrap();
        assert_eq!(
            ch.parse(&ok).unwrap(),
            Inbound::Challenge("1158201444".into())
        );
        for (query, why) in [
            (
                "hub.mode=subscribe&hub.challenge=1&hub.verify_token=wrong",
                "verify token mismatch",
            ),
            ("hub.mode=subscribe&hub.challenge=1", "missing verify token"),
            (
                "hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=meatyhamhock",
                "not a subscribe handshake",
            ),
        ] {
            assert!(
                matches!(ch.verify(&get(query), 0), Err(ChannelError::BadSignature(w)) if w == why),
                "{query}"
            );
        }
        let no_query = RawRequest {
            query: None,
            ..get("")
        };
        assert!(ch.verify(&no_query, 0).is_err());
    }

    #[test]
    fn an_unset_verify_token_refuses_every_handshake() {
        let ch = WhatsAppChannel::new("secret", "");
        assert!(matches!(
            ch.verify(
                &get("hub.mode=subscribe&hub.challenge=1&hub.verify_token="),
                0
            ),
            Err(ChannelError::BadSignature("no verify token configured"))
        ));
    }

    #[test]
    fn the_token_is_url_decoded() {
        let ch = WhatsAppChannel::new("secret", "a b&c");
        let req = get("hub.mode=subscribe&hub.challenge=x%2By&hub.verify_token=a+b%26c");
        ch.verify(&req, 0).unwrap();
        assert_eq!(ch.parse(&req).unwrap(), Inbound::Challenge("x+y".into()));
    }

    #[test]
    fn debug_output_hides_the_secrets() {
        let shown = format!("{:?}", WhatsAppChannel::new("s3cret", "t0ken"));
        assert!(!shown.contains("s3cret") && !shown.contains("t0ken"));
    }
}
