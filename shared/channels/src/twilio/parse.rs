//! A verified Twilio Messaging webhook (form-encoded) into neutral [`Inbound`].

use super::form;
use crate::{ChannelError, Inbound, InboundMedia, InboundMessage};

/// `MessageStatus` (or the older `SmsStatus`) values of an outbound message's status callback.
/// An inbound message carries `SmsStatus=received` instead.
pub const STATUS_CALLBACK_STATUSES: &[&str] = &[
    "accepted",
    "scheduled",
    "canceled",
    "queued",
    "sending",
    "sent",
    "delivered",
    "undelivered",
    "failed",
    "read",
    "partially_delivered",
];

/// Twilio attaches at most 10 media items to a message.
pub const MAX_MEDIA: usize = 10;

/// The type given to an attachment Twilio sent without `MediaContentType{N}`.
const UNKNOWN_MIME: &str = "application/octet-stream";

struct Params(Vec<(String, String)>);

impl Params {
    /// The value of `name`, if any (names are not repeated: see [`parse`]).
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn require(&self, names: &[&str]) -> Result<String, ChannelError> {
        names
            .iter()
            .find_map(|n| self.get(n).filter(|v| !v.trim().is_empty()))
            .map(str::to_owned)
            .ok_or_else(|| ChannelError::Malformed(format!("a message needs `{}`", names[0])))
    }
}

/// Parse a delivery; see the module docs for what is ignored.
pub(crate) fn parse(body: &[u8]) -> Result<Inbound, ChannelError> {
    let p = Params(
        form::decode(body)
            .map_err(|_| ChannelError::Malformed("body is not form-encoded".into()))?,
    );
    // Twilio never repeats a name. The signature sorts values and runs names and values
    // together, so a captured request re-cut with a second `From` (carved out of the `Body`
    // before it) verifies, and would be read as sent by whichever came first.
    let mut names: Vec<&str> = p.0.iter().map(|(k, _)| k.as_str()).collect();
    names.sort_unstable();
    if names.windows(2).any(|w| w[0] == w[1]) {
        return Err(ChannelError::Malformed("a parameter is repeated".into()));
    }
    let status = p.get("MessageStatus").or_else(|| p.get("SmsStatus"));
    if status.is_some_and(|s| STATUS_CALLBACK_STATUSES.contains(&s)) {
        return Ok(Inbound::Ignored {
            reason: "delivery status callback",
        });
    }
    let num_media: usize = match p.get("NumMedia").map(str::trim) {
        None | Some("") => 0,
        Some(n) => n
            .parse()
            .map_err(|_| ChannelError::Malformed("`NumMedia` is not a number".into()))?,
    };
    let Some(text) = p.get("Body") else {
        if num_media == 0 {
            return Ok(Inbound::Ignored {
                reason: "not an inbound message (no Body and no media)",
            });
        }
        return message(&p, String::new(), num_media);
    };
    message(&p, text.to_owned(), num_media)
}

fn message(p: &Params, text: String, num_media: usize) -> Result<Inbound, ChannelError> {
    let message_id = p.require(&["MessageSid", "SmsMessageSid", "SmsSid"])?;
    // Twilio's signature runs names and values together with nothing between them, so a
    // captured request re-cut at another boundary (a value that swallows the next parameter)
    // verifies too. The message id is the only guard against a replay: only Twilio's own form
    // of one is taken (`SM`/`MM` and 32 hex digits), which no re-cut value keeps.
    if !is_message_sid(&message_id) {
        return Err(ChannelError::Malformed(
            "the message id is not a Twilio message SID".into(),
        ));
    }
    let from = p.require(&["From"])?;
    let to = p.require(&["To"])?;
    let media: Vec<InboundMedia> = (0..num_media.min(MAX_MEDIA))
        .filter_map(|i| {
            let url = p.get(&format!("MediaUrl{i}")).filter(|u| !u.is_empty())?;
            Some(InboundMedia {
                reference: url.to_owned(),
                mime_type: p
                    .get(&format!("MediaContentType{i}"))
                    .filter(|m| !m.is_empty())
                    .unwrap_or(UNKNOWN_MIME)
                    .to_owned(),
                size_bytes: None,
            })
        })
        .collect();
    if text.trim().is_empty() && media.is_empty() {
        return Ok(Inbound::Ignored {
            reason: "empty message",
        });
    }
    if is_opt_out(p, &text) {
        return Ok(Inbound::Ignored {
            reason: "an opt-out keyword (Twilio answers it and blocks replies to the number)",
        });
    }
    Ok(Inbound::Messages(vec![InboundMessage {
        addressed_to: None,
        channel: super::NAME.into(),
        conversation_key: super::conversation_key(&from, &to),
        external_user_id: from,
        message_id,
        text,
        button_id: None,
        media,
    }]))
}

/// Twilio's default opt-out keywords: a message that is one of them alone is answered by
/// Twilio, which then refuses every message to the number (error 21610) until it texts START.
const OPT_OUT_KEYWORDS: [&str; 8] = [
    "STOP",
    "STOPALL",
    "UNSUBSCRIBE",
    "CANCEL",
    "END",
    "QUIT",
    "REVOKE",
    "OPTOUT",
];

/// Whether the message opts its number out (Advanced Opt-Out's `OptOutType=STOP`, or one of
/// [`OPT_OUT_KEYWORDS`] alone): no turn runs for it, since its reply could not be sent (each
/// would be a model call for nothing, and every later text until START another).
fn is_opt_out(p: &Params, text: &str) -> bool {
    if p.get("OptOutType")
        .is_some_and(|t| t.eq_ignore_ascii_case("STOP"))
    {
        return true;
    }
    let word = text.trim().trim_end_matches(['.', '!']);
    OPT_OUT_KEYWORDS
        .iter()
        .any(|k| k.eq_ignore_ascii_case(word))
}

/// `SM` or `MM` and 32 hexadecimal digits: a Twilio message SID.
fn is_message_sid(id: &str) -> bool {
    id.len() == 34
        && (id.starts_with("SM") || id.starts_with("MM"))
        && id[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(body: &str) -> InboundMessage {
        match parse(body.as_bytes()).unwrap() {
            Inbound::Messages(mut m) if m.len() == 1 => m.remove(0),
            other => panic!("expected one message, got {other:?}"),
        }
    }

    #[test]
    fn an_sms_becomes_a_message_keyed_by_the_number_pair() {
        let m = one(
            "MessageSid=SM11111111111111111111111111111111&From=%2B15551230000&To=%2B15559870000&Body=Hi+there",
        );
        assert_eq!(m.message_id, "SM11111111111111111111111111111111");
        assert_eq!(m.external_user_id, "+15551230000");
        assert_eq!(m.conversation_key, "+15551230000:+15559870000");
        assert_eq!(m.text, "Hi there");
        assert_eq!(m.button_id, None);
    }

    #[test]
    fn older_sid_names_are_accepted() {
        assert_eq!(
            one("SmsSid=SM22222222222222222222222222222222&From=a&To=b&Body=x").message_id,
            "SM22222222222222222222222222222222"
        );
        assert_eq!(
            one("SmsMessageSid=SM33333333333333333333333333333333&SmsSid=SM33333333333333333333333333333333&From=a&To=b&Body=x").message_id,
            "SM33333333333333333333333333333333"
        );
    }

    #[test]
    fn media_without_a_url_is_skipped_and_a_missing_type_is_octet_stream() {
        let m = one(
            "MessageSid=SM11111111111111111111111111111111&From=a&To=b&NumMedia=2&MediaUrl1=https%3A%2F%2Fm%2F1",
        );
        assert_eq!(
            m.media,
            [InboundMedia {
                reference: "https://m/1".into(),
                mime_type: UNKNOWN_MIME.into(),
                size_bytes: None
            }]
        );
        assert_eq!(m.text, "");
    }

    #[test]
    fn what_is_not_an_inbound_message_is_ignored() {
        for body in [
            "MessageSid=SM11111111111111111111111111111111&MessageStatus=delivered&SmsStatus=delivered&From=a&To=b",
            "SmsSid=SM11111111111111111111111111111111&SmsStatus=sent&From=a&To=b",
            "CallSid=CA1&CallStatus=ringing&From=a&To=b",
            "MessageSid=SM11111111111111111111111111111111&From=a&To=b&Body=+++&NumMedia=0",
            "",
        ] {
            assert!(
                matches!(parse(body.as_bytes()), Ok(Inbound::Ignored { .. })),
                "{body}"
            );
        }
    }

    /// An opt-out keyword alone runs no turn (Twilio answers it and refuses every reply to
    /// the number); the word in a sentence, START and HELP are messages.
    #[test]
    fn an_opt_out_keyword_alone_is_ignored() {
        let sms = |body: &str| {
            format!("MessageSid=SM11111111111111111111111111111111&From=a&To=b&Body={body}")
        };
        for body in [
            "STOP",
            "stop",
            "+Stop.+",
            "UNSUBSCRIBE",
            "cancel",
            "End",
            "quit!",
        ] {
            assert!(
                matches!(parse(sms(body).as_bytes()), Ok(Inbound::Ignored { .. })),
                "{body}"
            );
        }
        let flagged = format!("{}&OptOutType=STOP", sms("Stop+please"));
        assert!(matches!(
            parse(flagged.as_bytes()),
            Ok(Inbound::Ignored { .. })
        ));
        for body in [
            "START",
            "HELP",
            "stop+the+meeting+at+5",
            "cancel+my+booking",
        ] {
            assert!(!one(&sms(body)).text.is_empty(), "{body}");
        }
    }

    #[test]
    fn a_message_missing_its_ids_is_malformed() {
        for body in [
            "From=a&To=b&Body=hi",
            "MessageSid=SM11111111111111111111111111111111&To=b&Body=hi",
            "MessageSid=SM11111111111111111111111111111111&From=a&Body=hi",
            "MessageSid=SM11111111111111111111111111111111&From=a&To=b&Body=hi&NumMedia=two",
            "{\"Body\":\"hi\"}",
        ] {
            assert!(
                matches!(parse(body.as_bytes()), Err(ChannelError::Malformed(_))),
                "{body}"
            );
        }
    }

    #[test]
    fn only_a_twilio_message_sid_is_taken_for_the_id() {
        // A signed request re-cut so that the id swallows the next parameter still verifies
        // (names and values are signed run together): its id is no SID, and it is refused.
        let recut = format!(
            "MessageSid=SM{}MessagingServiceSidMG{}&From=a&To=b&Body=hi",
            "1".repeat(32),
            "2".repeat(32)
        );
        for body in [
            recut.as_str(),
            "MessageSid=SM1&From=a&To=b&Body=hi",
            "SmsMessageSid=SM1234&From=a&To=b&Body=hi",
            "MessageSid=XX11111111111111111111111111111111&From=a&To=b&Body=hi",
            "MessageSid=SM1111111111111111111111111111111g&From=a&To=b&Body=hi",
        ] {
            assert!(
                matches!(parse(body.as_bytes()), Err(ChannelError::Malformed(_))),
                "{body}"
            );
        }
        let mms = one("MessageSid=MMabcdef0123456789abcdef0123456789&From=a&To=b&Body=hi");
        assert_eq!(mms.message_id, "MMabcdef0123456789abcdef0123456789");
    }
}
