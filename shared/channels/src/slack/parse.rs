//! Slack deliveries → neutral messages: Events API envelopes (JSON) and interactivity payloads
//! (`payload={json}`, form-encoded). Pure: bytes in, [`Inbound`] out.

use super::NAME;
use crate::{ChannelError, Inbound, InboundMedia, InboundMessage};
use serde::Deserialize;
use serde_json::Value;

/// Parse a (verified) Slack delivery.
pub(super) fn parse(body: &[u8]) -> Result<Inbound, ChannelError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        events_api(body)
    } else {
        interactivity(body)
    }
}

fn malformed(why: impl Into<String>) -> ChannelError {
    ChannelError::Malformed(why.into())
}

fn ignored(reason: &'static str) -> Result<Inbound, ChannelError> {
    Ok(Inbound::Ignored { reason })
}

/// The outer Events API envelope. `event` stays untyped until its `type` says it is a message:
/// other events use the same field names with other shapes (`user` is an object in
/// `user_change`, `channel` in `channel_created`).
#[derive(Deserialize)]
struct Envelope {
    #[serde(rename = "type")]
    kind: String,
    challenge: Option<String>,
    event: Option<Value>,
    authorizations: Option<Vec<Authorization>>,
}

/// Who the event was delivered for: the bot user of the installation.
#[derive(Deserialize)]
struct Authorization {
    user_id: Option<String>,
    #[serde(default)]
    is_bot: bool,
}

/// A `message` or `app_mention` event.
#[derive(Deserialize)]
struct MessageEvent {
    user: Option<String>,
    text: Option<String>,
    ts: Option<String>,
    channel: Option<String>,
    thread_ts: Option<String>,
    #[serde(default)]
    files: Vec<File>,
}

/// A file shared with a message (`event.files[]`).
#[derive(Deserialize)]
struct File {
    url_private: Option<String>,
    mimetype: Option<String>,
    size: Option<u64>,
}

fn events_api(body: &[u8]) -> Result<Inbound, ChannelError> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|e| malformed(e.to_string()))?;
    match envelope.kind.as_str() {
        "url_verification" => envelope
            .challenge
            .map(Inbound::Challenge)
            .ok_or_else(|| malformed("url_verification without a challenge")),
        "event_callback" => {
            let event = envelope
                .event
                .ok_or_else(|| malformed("event_callback without an event"))?;
            let bots: Vec<String> = envelope
                .authorizations
                .unwrap_or_default()
                .into_iter()
                .filter(|a| a.is_bot)
                .filter_map(|a| a.user_id)
                .collect();
            event_callback(event, &bots)
        }
        "app_rate_limited" => ignored("Slack is rate limiting event delivery"),
        _ => ignored("not an event callback"),
    }
}

fn event_callback(event: Value, bots: &[String]) -> Result<Inbound, ChannelError> {
    let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
    let is_mention = match kind {
        "message" => false,
        "app_mention" => true,
        "reaction_added" | "reaction_removed" => return ignored("a reaction"),
        "member_joined_channel" | "member_left_channel" => return ignored("a membership change"),
        "app_home_opened" => return ignored("the app home was opened"),
        _ => return ignored("not a message event"),
    };
    if let Some(subtype) = event.get("subtype").filter(|s| !s.is_null()) {
        match subtype.as_str().unwrap_or("") {
            // A user's message with files, and a thread reply also sent to the channel.
            "file_share" | "thread_broadcast" => {}
            "bot_message" => return ignored("a bot's message"),
            "message_changed" => return ignored("an edit"),
            "message_deleted" => return ignored("a deletion"),
            "channel_join" | "channel_leave" | "group_join" | "group_leave" => {
                return ignored("a membership notice");
            }
            _ => return ignored("not a user's message (subtype)"),
        }
    }
    if event.get("hidden").and_then(Value::as_bool) == Some(true) {
        return ignored("a hidden message");
    }
    if event.get("bot_id").is_some_and(|b| !b.is_null()) {
        return ignored("a bot's message");
    }
    let event: MessageEvent =
        serde_json::from_value(event).map_err(|e| malformed(e.to_string()))?;
    let field = |v: Option<String>, name: &str| {
        v.filter(|s| !s.trim().is_empty())
            .ok_or_else(|| malformed(format!("a message needs `{name}`")))
    };
    let user = field(event.user, "user")?;
    if bots.contains(&user) {
        return ignored("the bot's own message");
    }
    let channel = field(event.channel, "channel")?;
    let ts = field(event.ts, "ts")?;
    let text = event.text.unwrap_or_default();
    let text = unescape(strip_mention(&text, bots, is_mention));
    let media: Vec<InboundMedia> = event
        .files
        .into_iter()
        .filter_map(|f| {
            Some(InboundMedia {
                reference: f.url_private.filter(|u| !u.is_empty())?,
                mime_type: f
                    .mimetype
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| "application/octet-stream".into()),
                size_bytes: f.size,
            })
        })
        .collect();
    if text.trim().is_empty() && media.is_empty() {
        return ignored("an empty message");
    }
    let thread = event.thread_ts.filter(|t| !t.is_empty());
    Ok(Inbound::Messages(vec![InboundMessage {
        addressed_to: None,
        channel: NAME.into(),
        external_user_id: user,
        conversation_key: super::conversation_key(&channel, thread.as_deref()),
        message_id: format!("{channel}:{ts}"),
        text,
        button_id: None,
        media,
    }]))
}

/// Drop a leading `<@U…>` / `<@U…|name>` when it names the bot. When the payload does not say
/// who the bot is, an `app_mention`'s leading mention is taken to be the bot's.
fn strip_mention<'a>(text: &'a str, bots: &[String], is_mention: bool) -> &'a str {
    let trimmed = text.trim_start();
    let Some(rest) = trimmed.strip_prefix("<@") else {
        return text;
    };
    let Some(end) = rest.find('>') else {
        return text;
    };
    let id = rest[..end].split('|').next().unwrap_or("");
    let is_bot = if bots.is_empty() {
        is_mention
    } else {
        bots.iter().any(|b| b == id)
    };
    if is_bot {
        rest[end + 1..].trim_start()
    } else {
        text
    }
}

/// Slack escapes `&`, `<` and `>` in message text; give the model the characters back.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A `block_actions` interactivity payload (only the fields used).
#[derive(Deserialize)]
struct BlockActions {
    user: Option<IdOnly>,
    channel: Option<IdOnly>,
    container: Option<Container>,
    message: Option<ActedOnMessage>,
    trigger_id: Option<String>,
    #[serde(default)]
    actions: Vec<Action>,
}

#[derive(Deserialize)]
struct IdOnly {
    id: Option<String>,
}

#[derive(Deserialize)]
struct Container {
    channel_id: Option<String>,
    message_ts: Option<String>,
    thread_ts: Option<String>,
}

#[derive(Deserialize)]
struct ActedOnMessage {
    ts: Option<String>,
    thread_ts: Option<String>,
}

#[derive(Deserialize)]
struct Action {
    #[serde(rename = "type")]
    kind: Option<String>,
    action_id: Option<String>,
    value: Option<String>,
    text: Option<PlainText>,
    action_ts: Option<String>,
}

#[derive(Deserialize)]
struct PlainText {
    text: Option<String>,
}

fn interactivity(body: &[u8]) -> Result<Inbound, ChannelError> {
    let mut payload = None;
    let mut is_command = false;
    for (k, v) in form_urlencoded::parse(body) {
        match k.as_ref() {
            "payload" if payload.is_none() => payload = Some(v.into_owned()),
            "command" => is_command = true,
            _ => {}
        }
    }
    let Some(payload) = payload else {
        if is_command {
            return ignored("a slash command");
        }
        return Err(malformed("neither JSON nor an interactivity payload"));
    };
    let payload: Value = serde_json::from_str(&payload).map_err(|e| malformed(e.to_string()))?;
    if payload.get("type").and_then(Value::as_str) != Some("block_actions") {
        return ignored("an interaction that is not a button press");
    }
    let p: BlockActions = serde_json::from_value(payload).map_err(|e| malformed(e.to_string()))?;
    let Some(action) = p.actions.into_iter().next() else {
        return Err(malformed("block_actions without actions"));
    };
    if action.kind.as_deref() != Some("button") {
        return ignored("an interaction that is not a button press");
    }
    let container = p.container.unwrap_or(Container {
        channel_id: None,
        message_ts: None,
        thread_ts: None,
    });
    let message = p.message.unwrap_or(ActedOnMessage {
        ts: None,
        thread_ts: None,
    });
    let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    let Some(channel) = nonempty(p.channel.and_then(|c| c.id)).or(nonempty(container.channel_id))
    else {
        return ignored("a button press outside a conversation");
    };
    let user = nonempty(p.user.and_then(|u| u.id))
        .ok_or_else(|| malformed("a button press needs `user.id`"))?;
    let button = nonempty(action.value)
        .or(nonempty(action.action_id))
        .ok_or_else(|| malformed("a button press needs `value` or `action_id`"))?;
    let press = nonempty(action.action_ts)
        .or(nonempty(p.trigger_id))
        .ok_or_else(|| malformed("a button press needs `action_ts` or `trigger_id`"))?;
    let message_ts = nonempty(container.message_ts)
        .or(nonempty(message.ts))
        .unwrap_or_default();
    let thread = nonempty(container.thread_ts).or(nonempty(message.thread_ts));
    Ok(Inbound::Messages(vec![InboundMessage {
        addressed_to: None,
        channel: NAME.into(),
        external_user_id: user,
        conversation_key: super::conversation_key(&channel, thread.as_deref()),
        message_id: format!("{channel}:{message_ts}:{press}"),
        text: action.text.and_then(|t| t.text).unwrap_or_default(),
        button_id: Some(button),
        media: Vec::new(),
    }]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_bot_mention_is_stripped_and_others_are_kept() {
        let bots = ["U0BOT".to_string()];
        assert_eq!(strip_mention("<@U0BOT> hi", &bots, false), "hi");
        assert_eq!(strip_mention("  <@U0BOT|bridle>  hi", &bots, true), "hi");
        assert_eq!(strip_mention("<@U0ALICE> hi", &bots, true), "<@U0ALICE> hi");
        assert_eq!(strip_mention("hi <@U0BOT>", &bots, true), "hi <@U0BOT>");
        assert_eq!(strip_mention("<@U0ANY> hi", &[], true), "hi");
        assert_eq!(strip_mention("<@U0ANY> hi", &[], false), "<@U0ANY> hi");
        assert_eq!(strip_mention("<@U0BOT", &bots, true), "<@U0BOT");
    }

    #[test]
    fn slack_escapes_are_undone_once() {
        assert_eq!(unescape("a &lt;b&gt; &amp;lt; c"), "a <b> &lt; c");
    }

    #[test]
    fn unknown_bodies_are_malformed_and_commands_ignored() {
        assert!(matches!(parse(b"hello=1"), Err(ChannelError::Malformed(_))));
        assert!(matches!(
            parse(b"{not json"),
            Err(ChannelError::Malformed(_))
        ));
        assert_eq!(
            parse(b"command=%2Fbridle&text=hi").unwrap(),
            Inbound::Ignored {
                reason: "a slash command"
            }
        );
    }
}
