//! "Open the chat" links: where a person sends their link code from, per platform, pre-filled
//! where the platform allows it.
//!
//! - WhatsApp: `https://wa.me/<number>?text=<code>` (`WHATSAPP_DISPLAY_NUMBER`, digits with
//!   country code, e.g. `15551234567`);
//! - Telegram: `https://t.me/<bot>?start=<code>` (`TELEGRAM_BOT_USERNAME`), which arrives as
//!   `/start <code>`;
//! - Slack and Twilio (SMS) have no pre-filled link: the code with a plain instruction.

use serde::Serialize;

/// What is needed to make the links; both optional (no link, just the instruction).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenChat {
    pub whatsapp_number: Option<String>,
    pub telegram_bot: Option<String>,
}

/// One platform's way to send the code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OpenChatLink {
    pub channel: String,
    /// A human name for the platform.
    pub label: String,
    /// The pre-filled link, where the platform has one.
    pub url: Option<String>,
    /// What to do, in one sentence.
    pub instruction: String,
}

impl OpenChat {
    /// Read `WHATSAPP_DISPLAY_NUMBER` and `TELEGRAM_BOT_USERNAME`; a malformed number or name is a
    /// problem worth reporting.
    pub fn from_vars(var: &dyn Fn(&str) -> Option<String>) -> Result<Self, Vec<String>> {
        let get = |k: &str| {
            var(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let mut problems = Vec::new();
        let whatsapp_number = get("WHATSAPP_DISPLAY_NUMBER").and_then(|n| {
            // As people write numbers: "+1 (555) 123-4567", "+44 20 7946.0958".
            let digits: String = n
                .chars()
                .filter(|c| !matches!(c, '+' | ' ' | '-' | '(' | ')' | '.'))
                .collect();
            if !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) {
                Some(digits)
            } else {
                problems.push(format!(
                    "WHATSAPP_DISPLAY_NUMBER={n:?} must be a phone number with country code, e.g. +15551234567"
                ));
                None
            }
        });
        let telegram_bot = crate::telegram::bot_username(get("TELEGRAM_BOT_USERNAME").as_deref())
            .unwrap_or_else(|e| {
                problems.push(format!("TELEGRAM_BOT_USERNAME: {e}"));
                None
            });
        if problems.is_empty() {
            Ok(Self {
                whatsapp_number,
                telegram_bot,
            })
        } else {
            Err(problems)
        }
    }

    /// The links for `code` (canonical) on the given channels, in a stable order.
    pub fn links(&self, code: &str, channels: &[&str]) -> Vec<OpenChatLink> {
        let shown = crate::link_code::display(code);
        let mut out = Vec::new();
        for &channel in ["whatsapp", "telegram", "slack", "twilio"]
            .iter()
            .filter(|c| channels.contains(c))
        {
            let (label, url, instruction) = match channel {
                "whatsapp" => (
                    "WhatsApp",
                    self.whatsapp_number
                        .as_ref()
                        .map(|n| format!("https://wa.me/{n}?text={shown}")),
                    format!("Open the chat and send {shown}."),
                ),
                "telegram" => (
                    "Telegram",
                    self.telegram_bot
                        .as_ref()
                        .map(|b| format!("https://t.me/{b}?start={code}")),
                    format!("Open the bot and press Start, or send {shown}."),
                ),
                "slack" => (
                    "Slack",
                    None,
                    format!("Send {shown} to the Bridle app in a direct message."),
                ),
                _ => ("SMS", None, format!("Text {shown} to the Bridle number.")),
            };
            out.push(OpenChatLink {
                channel: channel.to_owned(),
                label: label.to_owned(),
                url,
                instruction,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_prefilled_where_the_platform_allows() {
        let open = OpenChat::from_vars(&|k| match k {
            "WHATSAPP_DISPLAY_NUMBER" => Some("+1 555-123-4567".into()),
            "TELEGRAM_BOT_USERNAME" => Some("@bridlebot".into()),
            _ => None,
        })
        .unwrap();
        let links = open.links("ABCD2345", &["twilio", "telegram", "whatsapp", "slack"]);
        let urls: Vec<Option<&str>> = links.iter().map(|l| l.url.as_deref()).collect();
        assert_eq!(
            urls,
            [
                Some("https://wa.me/15551234567?text=ABCD-2345"),
                Some("https://t.me/bridlebot?start=ABCD2345"),
                None,
                None
            ]
        );
        assert!(links[2].instruction.contains("ABCD-2345"));
        assert!(open.links("ABCD2345", &["generic"]).is_empty());
    }

    #[test]
    fn a_number_is_read_as_people_write_it() {
        for written in ["+1 (555) 123-4567", "1.555.123.4567", "+15551234567"] {
            let open = OpenChat::from_vars(&|k| {
                (k == "WHATSAPP_DISPLAY_NUMBER").then(|| written.to_owned())
            })
            .unwrap();
            assert_eq!(
                open.whatsapp_number.as_deref(),
                Some("15551234567"),
                "{written}"
            );
        }
    }

    /// The deploy parameters' patterns are held to the same samples (infra/test_compare.py):
    /// what is accepted here deploys, what is refused here is refused at deploy.
    #[test]
    fn the_number_and_the_bot_accept_and_refuse_the_deploy_templates_samples() {
        let samples: serde_json::Value =
            serde_json::from_str(include_str!("../../../infra/parameter_samples.json")).unwrap();
        for (kind, var) in [
            ("phone", "WHATSAPP_DISPLAY_NUMBER"),
            ("telegram_bot", "TELEGRAM_BOT_USERNAME"),
        ] {
            for (verdict, accepted) in [("accepted", true), ("refused", false)] {
                for value in samples[kind][verdict].as_array().unwrap() {
                    let value = value.as_str().unwrap();
                    let read = OpenChat::from_vars(&|k| (k == var).then(|| value.to_owned()));
                    assert_eq!(
                        read.is_ok(),
                        accepted,
                        "{var}={value:?} should be {verdict}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_malformed_number_is_reported() {
        let err =
            OpenChat::from_vars(&|k| (k == "WHATSAPP_DISPLAY_NUMBER").then(|| "call me".into()))
                .unwrap_err();
        assert_eq!(err.len(), 1);
    }
}
