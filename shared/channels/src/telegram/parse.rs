//! An `Update` (one per webhook delivery) → neutral messages, or the reason it is ignored.

use super::NAME;
use crate::{ChannelError, Inbound, InboundMedia, InboundMessage};
use serde::Deserialize;
use serde_json::{Map, Value};

/// A photo is re-encoded by Telegram as JPEG in every size.
const PHOTO_MIME: &str = "image/jpeg";
/// A document without `mime_type`.
const UNKNOWN_MIME: &str = "application/octet-stream";

/// Message fields that mark a service message (a member joined, a pin, a title change...).
/// Such messages carry no text, caption or media, so they are ignored in any case; the list
/// only makes the reason precise.
const SERVICE_FIELDS: &[&str] = &[
    "new_chat_members",
    "left_chat_member",
    "new_chat_title",
    "new_chat_photo",
    "delete_chat_photo",
    "group_chat_created",
    "supergroup_chat_created",
    "channel_chat_created",
    "message_auto_delete_timer_changed",
    "migrate_to_chat_id",
    "migrate_from_chat_id",
    "pinned_message",
    "successful_payment",
    "users_shared",
    "chat_shared",
    "write_access_allowed",
    "proximity_alert_triggered",
    "boost_added",
    "chat_background_set",
    "forum_topic_created",
    "forum_topic_edited",
    "forum_topic_closed",
    "forum_topic_reopened",
    "general_forum_topic_hidden",
    "general_forum_topic_unhidden",
    "video_chat_scheduled",
    "video_chat_started",
    "video_chat_ended",
    "video_chat_participants_invited",
    "web_app_data",
    "giveaway_created",
    "giveaway_completed",
];

/// Update kinds that are not a person writing to the bot, with the reason given for each.
const IGNORED_UPDATES: &[(&str, &str)] = &[
    ("edited_message", "edited message"),
    ("edited_business_message", "edited message"),
    ("channel_post", "channel post"),
    ("edited_channel_post", "channel post"),
    ("business_message", "business account message"),
    ("business_connection", "business connection change"),
    ("deleted_business_messages", "deleted messages"),
    ("my_chat_member", "membership change"),
    ("chat_member", "membership change"),
    ("chat_join_request", "membership change"),
    ("message_reaction", "reaction"),
    ("message_reaction_count", "reaction"),
    ("poll", "poll"),
    ("poll_answer", "poll"),
    ("inline_query", "inline query"),
    ("chosen_inline_result", "inline query"),
    ("shipping_query", "payment"),
    ("pre_checkout_query", "payment"),
    ("purchased_paid_media", "payment"),
    ("chat_boost", "chat boost"),
    ("removed_chat_boost", "chat boost"),
];

#[derive(Deserialize)]
struct User {
    id: i64,
    #[serde(default)]
    is_bot: bool,
}

#[derive(Deserialize)]
struct Chat {
    id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type", default)]
    kind: Option<String>,
}

/// The message a message replies to: only who sent it is read (a reply to the bot is
/// addressed to it).
#[derive(Deserialize)]
struct Replied {
    from: Option<Author>,
}

#[derive(Deserialize)]
struct Author {
    #[serde(default)]
    is_bot: bool,
    username: Option<String>,
}

#[derive(Deserialize)]
struct PhotoSize {
    file_id: String,
    #[serde(default)]
    width: u64,
    #[serde(default)]
    height: u64,
    file_size: Option<u64>,
}

#[derive(Deserialize)]
struct Document {
    file_id: String,
    mime_type: Option<String>,
    file_size: Option<u64>,
}

#[derive(Deserialize)]
struct Message {
    message_id: i64,
    from: Option<User>,
    sender_chat: Option<serde::de::IgnoredAny>,
    chat: Chat,
    text: Option<String>,
    caption: Option<String>,
    #[serde(default)]
    photo: Vec<PhotoSize>,
    document: Option<Document>,
    #[serde(default)]
    is_automatic_forward: bool,
    reply_to_message: Option<Box<Replied>>,
    message_thread_id: Option<i64>,
    #[serde(default)]
    is_topic_message: bool,
}

#[derive(Deserialize)]
struct CallbackMessage {
    message_id: i64,
    chat: Chat,
    message_thread_id: Option<i64>,
    #[serde(default)]
    is_topic_message: bool,
    /// Kept loose: only used to find the pressed button's label.
    reply_markup: Option<Value>,
}

#[derive(Deserialize)]
struct CallbackQuery {
    id: String,
    from: User,
    message: Option<CallbackMessage>,
    data: Option<String>,
}

fn malformed(what: &str, e: serde_json::Error) -> ChannelError {
    ChannelError::Malformed(format!("{what}: {e}"))
}

/// Parse one Update. `bot_username` (without `@`) decides which `/command@bot` are ours.
pub(crate) fn parse_update(
    body: &[u8],
    bot_username: Option<&str>,
) -> Result<Inbound, ChannelError> {
    let update: Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| malformed("not a Telegram update", e))?;
    let update_id = update
        .get("update_id")
        .and_then(Value::as_i64)
        .ok_or_else(|| ChannelError::Malformed("an update needs a numeric `update_id`".into()))?
        .to_string();
    if let Some(message) = update.get("message") {
        return parse_message(message, bot_username);
    }
    if let Some(query) = update.get("callback_query") {
        return parse_callback(query);
    }
    let _ = update_id;
    let reason = IGNORED_UPDATES
        .iter()
        .find(|(key, _)| update.contains_key(*key))
        .map_or("unsupported update kind", |(_, reason)| reason);
    Ok(Inbound::Ignored { reason })
}

/// A message's id: `"{chat_id}:{message_id}"` — unique per message (Telegram numbers messages
/// per chat), the same on every redelivery of its update, and what a reaction needs.
fn parse_message(raw: &Value, bot_username: Option<&str>) -> Result<Inbound, ChannelError> {
    let m = Message::deserialize(raw).map_err(|e| malformed("bad `message`", e))?;
    let message_id = format!("{}:{}", m.chat.id, m.message_id);
    let Some(from) = m.from else {
        return Ok(Inbound::Ignored {
            reason: "message without a sender",
        });
    };
    if from.is_bot {
        return Ok(Inbound::Ignored {
            reason: "message from a bot",
        });
    }
    // Sent on behalf of a chat (an anonymous admin, a linked channel's automatic forward): there
    // is no person to answer.
    if m.sender_chat.is_some() || m.is_automatic_forward {
        return Ok(Inbound::Ignored {
            reason: "message on behalf of a chat",
        });
    }
    let mut media = Vec::new();
    let largest = m
        .photo
        .iter()
        .max_by_key(|p| (p.width.saturating_mul(p.height), p.file_size.unwrap_or(0)));
    if let Some(photo) = largest {
        media.push(InboundMedia {
            reference: photo.file_id.clone(),
            mime_type: PHOTO_MIME.into(),
            size_bytes: photo.file_size,
        });
    }
    if let Some(doc) = m.document {
        media.push(InboundMedia {
            reference: doc.file_id,
            mime_type: doc
                .mime_type
                .filter(|t| !t.trim().is_empty())
                .unwrap_or_else(|| UNKNOWN_MIME.into()),
            size_bytes: doc.file_size,
        });
    }
    let text = m.text.or(m.caption).unwrap_or_default();
    if text.trim().is_empty() && media.is_empty() {
        let service = raw
            .as_object()
            .is_some_and(|o| SERVICE_FIELDS.iter().any(|k| o.contains_key(*k)));
        return Ok(Inbound::Ignored {
            reason: if service {
                "service message"
            } else {
                "no text or supported media"
            },
        });
    }
    let in_group = matches!(m.chat.kind.as_deref(), Some("group" | "supergroup"));
    if let (true, Some(me)) = (in_group, bot_username)
        && !for_the_bot_in_a_group(&text, m.reply_to_message.as_deref(), me)
    {
        return Ok(Inbound::Ignored {
            reason: "a group message not addressed to the bot",
        });
    }
    let Some(text) = addressed_to_us(text, bot_username) else {
        return Ok(Inbound::Ignored {
            reason: "command for another bot",
        });
    };
    Ok(Inbound::Messages(vec![InboundMessage {
        addressed_to: None,
        channel: NAME.into(),
        external_user_id: from.id.to_string(),
        conversation_key: super::conversation_key(
            m.chat.id,
            m.message_thread_id.filter(|_| m.is_topic_message),
        ),
        message_id,
        text,
        button_id: None,
        media,
    }]))
}

/// A message's `date` (Unix seconds). A button press (`callback_query`) has no time of its
/// own, only its message's, which may rightly be old; other updates are ignored anyway.
pub(super) fn sent_at(body: &[u8]) -> Option<i64> {
    let update: Value = serde_json::from_slice(body).ok()?;
    update.pointer("/message/date")?.as_i64()
}

/// Whether a group member's message is for the bot `me`: a command (`/…`; one for another
/// bot is dropped after), a mention (`@me`), a reply to one of its messages, or what its
/// replies ask for (`UNLINK`, `MOVE <code>`, a link code alone). Everything else
/// is the members talking among themselves: Telegram delivers it to a bot that is an admin or
/// has privacy mode off, and answering it would post someone's assistant into their chat (and
/// run a model call per remark).
fn for_the_bot_in_a_group(text: &str, replied: Option<&Replied>, me: &str) -> bool {
    let mentioned = text.match_indices('@').any(|(at, _)| {
        let name: String = text[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        name.eq_ignore_ascii_case(me)
    });
    let replied_to_me = replied.and_then(|r| r.from.as_ref()).is_some_and(|a| {
        a.is_bot
            && a.username
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(me))
    });
    // What the bot's own replies ask a member to send there: `UNLINK`, `MOVE <code>`, or a link
    // code alone (a member's remark is never just one of these).
    let asked_for = text.trim().eq_ignore_ascii_case("unlink")
        || crate::link_code::is_move(text)
        || crate::link_code::is_link(text)
        || crate::link_code::is_only_a_code(text);
    text.starts_with('/') || mentioned || replied_to_me || asked_for
}

/// In groups a command may name its bot: `/start@SomeBot args`. Ours loses the suffix; another
/// bot's is not for us (`None`). Without a configured username the text is left as it is.
fn addressed_to_us(text: String, bot_username: Option<&str>) -> Option<String> {
    let Some(me) = bot_username else {
        return Some(text);
    };
    if !text.starts_with('/') {
        return Some(text);
    }
    let command_end = text.find(char::is_whitespace).unwrap_or(text.len());
    let Some(at) = text[..command_end].find('@') else {
        return Some(text);
    };
    if !text[at + 1..command_end].eq_ignore_ascii_case(me) {
        return None;
    }
    Some(format!("{}{}", &text[..at], &text[command_end..]))
}

/// A button press's id: `"{chat_id}:{message_id}:{callback_query_id}"` (the bot's message that
/// carried the button, then the press): unique per press, and the sender answers the callback
/// query from it (`answerCallbackQuery`) so the user's spinner stops.
fn parse_callback(raw: &Value) -> Result<Inbound, ChannelError> {
    let q = CallbackQuery::deserialize(raw).map_err(|e| malformed("bad `callback_query`", e))?;
    let Some(data) = q.data.filter(|d| !d.is_empty()) else {
        return Ok(Inbound::Ignored {
            reason: "callback without data",
        });
    };
    let Some(message) = q.message else {
        return Ok(Inbound::Ignored {
            reason: "callback on an inline message",
        });
    };
    if q.from.is_bot {
        return Ok(Inbound::Ignored {
            reason: "callback from a bot",
        });
    }
    let message_id = format!("{}:{}:{}", message.chat.id, message.message_id, q.id);
    let text = message
        .reply_markup
        .as_ref()
        .and_then(|markup| button_label(markup, &data))
        .unwrap_or_else(|| data.clone());
    Ok(Inbound::Messages(vec![InboundMessage {
        addressed_to: None,
        channel: NAME.into(),
        external_user_id: q.from.id.to_string(),
        conversation_key: super::conversation_key(
            message.chat.id,
            message
                .message_thread_id
                .filter(|_| message.is_topic_message),
        ),
        message_id,
        text,
        button_id: Some(data),
        media: Vec::new(),
    }]))
}

/// The label of the inline button whose `callback_data` is `data`.
fn button_label(markup: &Value, data: &str) -> Option<String> {
    markup
        .get("inline_keyboard")?
        .as_array()?
        .iter()
        .filter_map(Value::as_array)
        .flatten()
        .find(|b| b.get("callback_data").and_then(Value::as_str) == Some(data))?
        .get("text")?
        .as_str()
        .map(str::to_owned)
}

/// Where a reaction to this update's message should go, as `"{chat_id}:{message_id}"`: the
/// form [`TelegramSender`](super::TelegramSender) expects in `Outgoing::in_reply_to`. `None`
/// for anything that is not a user's message (a button press, an ignored update, bad JSON).
pub fn reaction_target(body: &[u8]) -> Option<String> {
    let update: Value = serde_json::from_slice(body).ok()?;
    let message = update.get("message")?;
    let chat_id = message.get("chat")?.get("id")?.as_i64()?;
    let message_id = message.get("message_id")?.as_i64()?;
    Some(format!("{chat_id}:{message_id}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_for_us_lose_the_suffix_and_others_are_dropped() {
        let me = Some("BridleBot");
        let run = |t: &str| addressed_to_us(t.to_owned(), me);
        assert_eq!(run("/start@bridlebot now").as_deref(), Some("/start now"));
        assert_eq!(run("/help@BridleBot").as_deref(), Some("/help"));
        assert_eq!(run("/help@OtherBot"), None);
        assert_eq!(run("/help").as_deref(), Some("/help"));
        assert_eq!(run("mail me@x.io").as_deref(), Some("mail me@x.io"));
        assert_eq!(
            addressed_to_us("/help@OtherBot".into(), None).as_deref(),
            Some("/help@OtherBot")
        );
    }

    #[test]
    fn the_pressed_buttons_label_is_found() {
        let markup = serde_json::json!({"inline_keyboard": [
            [{"text": "Yes", "callback_data": "yes"}],
            [{"text": "Open", "url": "https://x.io"}, {"text": "No", "callback_data": "no"}]
        ]});
        assert_eq!(button_label(&markup, "no").as_deref(), Some("No"));
        assert_eq!(button_label(&markup, "maybe"), None);
        assert_eq!(
            button_label(&serde_json::json!({"inline_keyboard": 3}), "no"),
            None
        );
    }

    #[test]
    fn the_reaction_target_names_chat_and_message() {
        let body = br#"{"update_id":1,"message":{"message_id":77,"chat":{"id":-100123}}}"#;
        assert_eq!(reaction_target(body).as_deref(), Some("-100123:77"));
        assert_eq!(
            reaction_target(br#"{"update_id":1,"callback_query":{}}"#),
            None
        );
        assert_eq!(reaction_target(b"nope"), None);
    }
}
