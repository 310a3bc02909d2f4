//! A verified delivery → neutral messages, or why it is ignored.

use super::NAME;
use crate::{ChannelError, Inbound, InboundMedia, InboundMessage};
use serde::Deserialize;

#[derive(Deserialize)]
struct Delivery {
    object: String,
    #[serde(default)]
    entry: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    changes: Vec<Change>,
}

#[derive(Deserialize)]
struct Change {
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Deserialize)]
struct Value {
    #[serde(default)]
    metadata: Option<Metadata>,
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    statuses: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    display_phone_number: Option<String>,
    #[serde(default)]
    phone_number_id: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    from: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    text: Option<Text>,
    interactive: Option<Interactive>,
    button: Option<LegacyButton>,
    image: Option<Media>,
    document: Option<Media>,
    audio: Option<Media>,
    video: Option<Media>,
}

#[derive(Deserialize)]
struct Text {
    body: Option<String>,
}

#[derive(Deserialize)]
struct Interactive {
    button_reply: Option<Reply>,
    list_reply: Option<Reply>,
}

#[derive(Deserialize)]
struct Reply {
    id: Option<String>,
    title: Option<String>,
}

#[derive(Deserialize)]
struct LegacyButton {
    payload: Option<String>,
    text: Option<String>,
}

#[derive(Deserialize)]
struct Media {
    id: Option<String>,
    mime_type: Option<String>,
    caption: Option<String>,
}

/// What one message amounts to.
enum Kept {
    Message(InboundMessage),
    Ignored(&'static str),
}

/// Parse a delivery body (already verified).
pub(super) fn parse(body: &[u8]) -> Result<Inbound, ChannelError> {
    let delivery: Delivery =
        serde_json::from_slice(body).map_err(|e| ChannelError::Malformed(e.to_string()))?;
    if delivery.object != "whatsapp_business_account" {
        return Ok(Inbound::Ignored {
            reason: "not a WhatsApp Business Account delivery",
        });
    }
    let mut messages = Vec::new();
    let mut ignored = None;
    for value in delivery
        .entry
        .into_iter()
        .flat_map(|e| e.changes)
        .filter_map(|c| c.value)
    {
        if !value.statuses.is_empty() {
            ignored.get_or_insert("delivery status update");
        }
        let (business, to) = match value.metadata {
            Some(m) => (
                m.display_phone_number
                    .map(|n| digits(&n))
                    .filter(|n| !n.is_empty()),
                m.phone_number_id.filter(|id| !id.trim().is_empty()),
            ),
            None => (None, None),
        };
        for message in value.messages {
            match message_of(message, business.as_deref()) {
                Ok(Kept::Message(mut m)) => {
                    m.addressed_to.clone_from(&to);
                    messages.push(m)
                }
                Ok(Kept::Ignored(reason)) => {
                    ignored.get_or_insert(reason);
                }
                // One message that cannot be read does not cost the others: refused, the
                // whole batch would come again for days, its good messages never queued.
                Err(e) => {
                    tracing::warn!(error = %e, "a WhatsApp message could not be read; the rest of its delivery is taken");
                    ignored.get_or_insert("a message that could not be read");
                }
            }
        }
    }
    if messages.is_empty() {
        Ok(Inbound::Ignored {
            reason: ignored.unwrap_or("no messages"),
        })
    } else {
        Ok(Inbound::Messages(messages))
    }
}

/// A phone number with only its digits (`"+1 555-0100"` → `"15550100"`).
fn digits(number: &str) -> String {
    number.chars().filter(char::is_ascii_digit).collect()
}

fn required(value: Option<String>, name: &str) -> Result<String, ChannelError> {
    value
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ChannelError::Malformed(format!("a message needs `{name}`")))
}

fn message_of(m: Message, business: Option<&str>) -> Result<Kept, ChannelError> {
    let kind = m.kind.as_deref().unwrap_or_default();
    match kind {
        "reaction" => return Ok(Kept::Ignored("reaction")),
        "unsupported" => return Ok(Kept::Ignored("unsupported message type")),
        "system" => return Ok(Kept::Ignored("system notice")),
        _ => {}
    }
    let id = required(m.id, "id")?;
    let from = required(m.from, "from")?;
    if business.is_some_and(|b| digits(&from) == b) {
        return Ok(Kept::Ignored("echo of the business number's own message"));
    }
    let missing =
        |what: &str| ChannelError::Malformed(format!("a `{kind}` message needs `{what}`"));
    let (text, button_id, media) = match kind {
        "text" => {
            let body = m.text.and_then(|t| t.body);
            (body.ok_or_else(|| missing("text.body"))?, None, Vec::new())
        }
        "interactive" => {
            let Some(reply) = m.interactive.and_then(|i| i.button_reply.or(i.list_reply)) else {
                return Ok(Kept::Ignored("message type not handled"));
            };
            let id = required(reply.id, "interactive reply id")?;
            (reply.title.unwrap_or_default(), Some(id), Vec::new())
        }
        "button" => {
            let b = m.button.ok_or_else(|| missing("button"))?;
            let id = b
                .payload
                .filter(|p| !p.is_empty())
                .or_else(|| b.text.clone())
                .ok_or_else(|| missing("button.payload"))?;
            (b.text.unwrap_or_default(), Some(id), Vec::new())
        }
        "image" | "document" | "audio" | "video" => {
            let item = match kind {
                "image" => m.image,
                "document" => m.document,
                "audio" => m.audio,
                _ => m.video,
            }
            .ok_or_else(|| missing(kind))?;
            let media = InboundMedia {
                reference: required(item.id, "media id")?,
                mime_type: item
                    .mime_type
                    .unwrap_or_else(|| "application/octet-stream".into()),
                size_bytes: None,
            };
            (item.caption.unwrap_or_default(), None, vec![media])
        }
        _ => return Ok(Kept::Ignored("message type not handled")),
    };
    Ok(Kept::Message(InboundMessage {
        addressed_to: None,
        channel: NAME.into(),
        external_user_id: from.clone(),
        conversation_key: from,
        message_id: id,
        text,
        button_id,
        media,
    }))
}

/// The newest `entry[].changes[].value.messages[].timestamp` (Unix seconds; Meta sends a
/// string) of a delivery, if any message has one.
pub(super) fn sent_at(body: &[u8]) -> Option<i64> {
    messages_of(body)?.iter().filter_map(timestamp_of).max()
}

/// The `timestamp` of each of the delivery's messages, by its `id`.
pub(super) fn sent_at_by_id(body: &[u8]) -> std::collections::HashMap<String, i64> {
    messages_of(body)
        .unwrap_or_default()
        .iter()
        .filter_map(|m| Some((m.get("id")?.as_str()?.to_owned(), timestamp_of(m)?)))
        .collect()
}

/// Every `entry[].changes[].value.messages[]` of a delivery.
fn messages_of(body: &[u8]) -> Option<Vec<serde_json::Value>> {
    let mut delivery: serde_json::Value = serde_json::from_slice(body).ok()?;
    let entries = delivery.get_mut("entry")?.as_array_mut()?;
    let mut messages = Vec::new();
    for entry in entries {
        let Some(changes) = entry.get_mut("changes").and_then(|c| c.as_array_mut()) else {
            continue;
        };
        for change in changes {
            if let Some(serde_json::Value::Array(list)) = change.pointer_mut("/value/messages") {
                messages.append(list);
            }
        }
    }
    Some(messages)
}

/// A message's `timestamp` (Unix seconds; Meta sends a string).
fn timestamp_of(message: &serde_json::Value) -> Option<i64> {
    match message.get("timestamp")? {
        serde_json::Value::String(s) => s.trim().parse().ok(),
        n => n.as_i64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrap(messages: &str) -> String {
        format!(
            r#"{{"object":"whatsapp_business_account","entry":[{{"id":"1","changes":[{{"field":"messages","value":{{"messaging_product":"whatsapp","metadata":{{"display_phone_number":"15550783881","phone_number_id":"106540352242922"}},"messages":[{messages}]}}}}]}}]}}"#
        )
    }

    #[test]
    fn a_delivery_is_as_old_as_its_newest_message() {
        let body = wrap(
            r#"{"from":"1","id":"a","timestamp":"1700000000","type":"text","text":{"body":"a"}},
               {"from":"1","id":"b","timestamp":"1700000090","type":"text","text":{"body":"b"}}"#,
        );
        assert_eq!(sent_at(body.as_bytes()), Some(1_700_000_090));
        let statuses = r#"{"object":"whatsapp_business_account","entry":[{"changes":[{"value":{"statuses":[{"timestamp":"1"}]}}]}]}"#;
        assert_eq!(sent_at(statuses.as_bytes()), None, "only messages count");
        assert_eq!(sent_at(b"not json"), None);
    }

    #[test]
    fn the_first_ignored_reason_is_reported_when_nothing_is_kept() {
        let body = wrap(
            r#"{"from":"1","id":"a","type":"reaction","reaction":{"message_id":"x","emoji":"👍"}},
               {"from":"1","id":"b","type":"system","system":{"body":"changed"}}"#,
        );
        assert_eq!(
            parse(body.as_bytes()).unwrap(),
            Inbound::Ignored { reason: "reaction" }
        );
    }

    #[test]
    fn an_echo_is_recognised_whatever_the_number_punctuation() {
        let body =
            wrap(r#"{"from":"+1 555 078 3881","id":"a","type":"text","text":{"body":"hi"}}"#);
        assert!(matches!(
            parse(body.as_bytes()).unwrap(),
            Inbound::Ignored { reason } if reason.starts_with("echo")
        ));
    }

    /// A message without an id, a sender or its content cannot be answered; it is dropped
    /// (its delivery acknowledged: Meta would send it again for days), and a body that is not
    /// a delivery at all is malformed.
    #[test]
    fn messages_without_id_or_sender_are_dropped_and_non_deliveries_malformed() {
        for m in [
            r#"{"from":"1","type":"text","text":{"body":"hi"}}"#,
            r#"{"id":"a","type":"text","text":{"body":"hi"}}"#,
            r#"{"id":"a","from":"1","type":"text"}"#,
            r#"{"id":"a","from":"1","type":"image","image":{"mime_type":"image/png"}}"#,
        ] {
            assert_eq!(
                parse(wrap(m).as_bytes()).unwrap(),
                Inbound::Ignored {
                    reason: "a message that could not be read"
                },
                "{m}"
            );
        }
        for body in [&b"[]"[..], b"{}", br#"{"object":1}"#] {
            assert!(matches!(parse(body), Err(ChannelError::Malformed(_))));
        }
        assert_eq!(
            parse(br#"{"object":"page","entry":[]}"#).unwrap(),
            Inbound::Ignored {
                reason: "not a WhatsApp Business Account delivery"
            }
        );
    }

    #[test]
    fn a_legacy_button_without_payload_uses_its_text() {
        let body = wrap(r#"{"from":"1","id":"a","type":"button","button":{"text":"Yes"}}"#);
        let Inbound::Messages(m) = parse(body.as_bytes()).unwrap() else {
            panic!("expected a message")
        };
        assert_eq!(m[0].button_id.as_deref(), Some("Yes"));
        assert_eq!(m[0].text, "Yes");
    }

    #[test]
    fn location_and_contacts_are_not_handled_yet() {
        let body = wrap(
            r#"{"from":"1","id":"a","type":"location","location":{"latitude":1.0,"longitude":2.0}}"#,
        );
        assert_eq!(
            parse(body.as_bytes()).unwrap(),
            Inbound::Ignored {
                reason: "message type not handled"
            }
        );
    }

    #[test]
    fn each_message_carries_the_number_it_was_sent_to() {
        // One app, two numbers: Meta puts each number's messages in its own `value`.
        let value = |number_id: &str, id: &str| {
            format!(
                r#"{{"field":"messages","value":{{"metadata":{{"display_phone_number":"15550000000","phone_number_id":"{number_id}"}},"messages":[{{"from":"1","id":"{id}","type":"text","text":{{"body":"hi"}}}}]}}}}"#
            )
        };
        let body = format!(
            r#"{{"object":"whatsapp_business_account","entry":[{{"changes":[{},{}]}},{{"changes":[{{"value":{{"messages":[{{"from":"1","id":"c","type":"text","text":{{"body":"hi"}}}}]}}}}]}}]}}"#,
            value("111", "a"),
            value("222", "b"),
        );
        let Inbound::Messages(m) = parse(body.as_bytes()).unwrap() else {
            panic!("expected messages")
        };
        let to: Vec<_> = m.iter().map(|m| m.addressed_to.as_deref()).collect();
        assert_eq!(
            to,
            [Some("111"), Some("222"), None],
            "no metadata, no address"
        );
    }
}
