//! The messaging channels of `bridle serve`: the same configuration as the Lambdas
//! ([`channels::config`]: a channel without its secret is off and its route answers 404),
//! plus what the web app needs to hand out link codes.

use channels::open_chat::OpenChat;
use channels::{Channel, Sender};
use std::collections::HashMap;
use std::sync::Arc;

/// Link codes live this long (DESIGN's default); the redemption tells a code's making from it.
pub use channels::link_code::LIFETIME_MS as LINK_CODE_LIFETIME_MS;

/// Which channels are on, and how people reach them.
#[derive(Clone)]
pub struct ChannelSetup {
    /// Verified inbound webhooks (`/webhooks/{name}`).
    pub inbound: Vec<Arc<dyn Channel>>,
    /// Reply senders by channel name.
    pub senders: HashMap<String, Arc<dyn Sender>>,
    /// Where people reach the web app (`PUBLIC_BASE_URL`); the onboarding reply links to it.
    pub public_base_url: Option<String>,
    /// Pre-filled "open the chat" links.
    pub open_chat: OpenChat,
    /// Largest webhook body (`MAX_BODY_BYTES`, as in the webhook Lambda).
    pub max_webhook_body_bytes: usize,
    /// Fetches attachments with the channels' credentials (`BRIDLE_MEDIA_MAX_BYTES` caps each).
    pub media: channels::media::MediaFetcher,
    /// Where attachments are kept; `None`: a folder beside the database file (in memory for an
    /// in-memory database).
    pub media_store: Option<Arc<dyn channels::media::MediaStore>>,
    /// Channels people can link although this process neither receives nor sends on them: the
    /// web Lambda hands out link codes for the channels the webhook and worker Lambdas serve
    /// (`BRIDLE_LINKABLE_CHANNELS`, read by [`linkable_channels`]).
    pub linkable_elsewhere: Vec<&'static str>,
    /// How long an unknown sender's lobby is kept after its last message
    /// (`BRIDLE_LOBBY_RETENTION_DAYS`, 30 days when unset); `bridle serve` sweeps what expired.
    pub lobby_retention: std::time::Duration,
    /// The key of the codes SMS questions carry ([`channel_jobs::confirm_code_key`]).
    pub confirm_code_key: Option<engine::CodeKey>,
}

impl std::fmt::Debug for ChannelSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut senders: Vec<&String> = self.senders.keys().collect();
        senders.sort();
        f.debug_struct("ChannelSetup")
            .field(
                "inbound",
                &self.inbound.iter().map(|c| c.name()).collect::<Vec<_>>(),
            )
            .field("senders", &senders)
            .field("public_base_url", &self.public_base_url)
            .field("open_chat", &self.open_chat)
            .field("media", &self.media)
            .field("linkable_elsewhere", &self.linkable_elsewhere)
            .field("lobby_retention", &self.lobby_retention)
            .field("confirm_code_key", &self.confirm_code_key)
            .finish()
    }
}

impl Default for ChannelSetup {
    /// No channel: every `/webhooks/*` route answers 404.
    fn default() -> Self {
        Self {
            inbound: Vec::new(),
            senders: HashMap::new(),
            public_base_url: None,
            open_chat: OpenChat::default(),
            max_webhook_body_bytes: webhook::DEFAULT_MAX_BODY_BYTES,
            media: no_media(),
            media_store: None,
            linkable_elsewhere: Vec::new(),
            lobby_retention: channel_jobs::DEFAULT_LOBBY_RETENTION,
            confirm_code_key: None,
        }
    }
}

/// A fetcher with no platform credentials: every attachment becomes a note to the model.
fn no_media() -> channels::media::MediaFetcher {
    channels::media::MediaFetcher::new(
        channels::media::PlatformMedia::default(),
        channels::media::FetchLimits::default(),
    )
}

impl ChannelSetup {
    /// From the environment; every problem at once. No channel configured is fine locally.
    pub fn from_vars(
        var: &dyn Fn(&str) -> Option<String>,
        http: &reqwest::Client,
    ) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        // Here nothing in front says where Twilio called (API Gateway does, on AWS): its URL
        // is `PUBLIC_BASE_URL`'s, and without one no SMS would ever verify.
        if var("TWILIO_AUTH_TOKEN").is_some_and(|t| !t.trim().is_empty())
            && var("PUBLIC_BASE_URL").is_none_or(|u| u.trim().is_empty())
        {
            problems.push(
                "TWILIO_AUTH_TOKEN is set but PUBLIC_BASE_URL is not (Twilio signs the public URL \
                 it calls: your tunnel's https address)"
                    .into(),
            );
        }
        let inbound = channels::config::inbound(var).unwrap_or_else(|p| {
            problems.extend(p);
            Vec::new()
        });
        let senders = channels::config::senders(var, http).unwrap_or_else(|p| {
            problems.extend(p);
            HashMap::new()
        });
        let open_chat = OpenChat::from_vars(var).unwrap_or_else(|p| {
            problems.extend(p);
            OpenChat::default()
        });
        let media = channels::media::MediaFetcher::from_vars(var).unwrap_or_else(|p| {
            problems.extend(p);
            no_media()
        });
        let max_webhook_body_bytes = match var("MAX_BODY_BYTES").filter(|v| !v.trim().is_empty()) {
            None => webhook::DEFAULT_MAX_BODY_BYTES,
            Some(v) => v.trim().parse().unwrap_or_else(|_| {
                problems.push(format!("MAX_BODY_BYTES={v:?} is not a number of bytes"));
                webhook::DEFAULT_MAX_BODY_BYTES
            }),
        };
        let lobby_retention = channel_jobs::lobby_retention_from_setting(
            var("BRIDLE_LOBBY_RETENTION_DAYS").as_deref(),
        )
        .unwrap_or_else(|problem| {
            problems.push(problem);
            channel_jobs::DEFAULT_LOBBY_RETENTION
        });
        for c in &inbound {
            if !senders.contains_key(c.name()) {
                problems.push(format!(
                    "the {} webhook is on but its replies have nowhere to go: set its sender credentials too",
                    c.name()
                ));
            }
        }
        if problems.is_empty() {
            Ok(Self {
                inbound,
                senders,
                public_base_url: var("PUBLIC_BASE_URL").filter(|v| !v.trim().is_empty()),
                open_chat,
                max_webhook_body_bytes,
                media,
                media_store: None,
                linkable_elsewhere: Vec::new(),
                lobby_retention,
                confirm_code_key: channel_jobs::confirm_code_key(var),
            })
        } else {
            Err(problems)
        }
    }

    /// The names of the channels people can link: inbound and outbound both on here, and those
    /// served by other functions ([`Self::linkable_elsewhere`]); each once.
    pub fn linkable(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self
            .inbound
            .iter()
            .map(|c| c.name())
            .filter(|n| self.senders.contains_key(*n))
            .collect();
        for name in &self.linkable_elsewhere {
            if !names.contains(name) {
                names.push(name);
            }
        }
        names
    }
}

/// The channels a link code can be redeemed on.
pub const CHANNEL_NAMES: [&str; 5] = ["whatsapp", "telegram", "slack", "twilio", "generic"];

/// `BRIDLE_LINKABLE_CHANNELS`: comma-separated channel names (`whatsapp,telegram`), for a
/// process that hands out link codes for channels it does not serve itself. Blank is none; an
/// unknown name is a problem naming the known ones.
pub fn linkable_channels(value: Option<&str>) -> Result<Vec<&'static str>, String> {
    let mut names = Vec::new();
    for part in value.unwrap_or_default().split(',') {
        let part = part.trim().to_ascii_lowercase();
        if part.is_empty() {
            continue;
        }
        match CHANNEL_NAMES.iter().find(|n| **n == part) {
            Some(name) if !names.contains(name) => names.push(*name),
            Some(_) => {}
            None => {
                return Err(format!(
                    "BRIDLE_LINKABLE_CHANNELS names {part:?}, which is not a channel (known: {})",
                    CHANNEL_NAMES.join(", ")
                ));
            }
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deploy parameter's pattern is held to the same samples (infra/test_compare.py).
    #[test]
    fn linkable_channels_accept_and_refuse_the_deploy_templates_samples() {
        let samples: serde_json::Value =
            serde_json::from_str(include_str!("../../../infra/parameter_samples.json")).unwrap();
        for (verdict, accepted) in [("accepted", true), ("refused", false)] {
            for value in samples["channels"][verdict].as_array().unwrap() {
                let value = value.as_str().unwrap();
                assert_eq!(
                    linkable_channels(Some(value)).is_ok(),
                    accepted,
                    "BRIDLE_LINKABLE_CHANNELS={value:?} should be {verdict}"
                );
            }
        }
    }

    #[test]
    fn linkable_channels_are_read_from_a_list() {
        assert_eq!(linkable_channels(None), Ok(vec![]));
        assert_eq!(linkable_channels(Some(" ")), Ok(vec![]));
        assert_eq!(
            linkable_channels(Some("WhatsApp, telegram,,whatsapp")),
            Ok(vec!["whatsapp", "telegram"])
        );
        let err = linkable_channels(Some("whatsapp,fax")).unwrap_err();
        assert!(err.contains("\"fax\"") && err.contains("telegram"), "{err}");
    }

    #[test]
    fn lobby_retention_is_read_in_days() {
        let http = reqwest::Client::new();
        let days = |v: &'static str| {
            move |k: &str| (k == "BRIDLE_LOBBY_RETENTION_DAYS").then(|| v.to_owned())
        };
        let setup = ChannelSetup::from_vars(&days("7"), &http).unwrap();
        assert_eq!(
            setup.lobby_retention,
            std::time::Duration::from_secs(7 * 86_400)
        );
        let unset = ChannelSetup::from_vars(&|_: &str| None, &http).unwrap();
        assert_eq!(unset.lobby_retention, channel_jobs::DEFAULT_LOBBY_RETENTION);
        let problems = ChannelSetup::from_vars(&days("forever"), &http).unwrap_err();
        assert!(
            problems[0].contains("BRIDLE_LOBBY_RETENTION_DAYS"),
            "{problems:?}"
        );
    }

    /// `bridle serve` has nothing in front of it to say where Twilio called: without
    /// `PUBLIC_BASE_URL` every SMS would fail its signature, so the start says so instead.
    #[test]
    fn twilio_here_needs_the_public_url() {
        let http = reqwest::Client::new();
        let vars = |base: Option<&'static str>| {
            move |k: &str| match k {
                "TWILIO_AUTH_TOKEN" => Some("tok".to_owned()),
                "TWILIO_ACCOUNT_SID" => Some("AC0123".to_owned()),
                "PUBLIC_BASE_URL" => base.map(str::to_owned),
                _ => None,
            }
        };
        let problems = ChannelSetup::from_vars(&vars(None), &http).unwrap_err();
        assert!(
            problems.iter().any(|p| p.contains("PUBLIC_BASE_URL")),
            "{problems:?}"
        );
        let setup = ChannelSetup::from_vars(&vars(Some("https://tunnel.example")), &http).unwrap();
        assert_eq!(setup.inbound.len(), 1);
    }

    #[test]
    fn channels_served_elsewhere_are_linkable_without_senders() {
        let setup = ChannelSetup {
            linkable_elsewhere: vec!["telegram", "whatsapp"],
            ..ChannelSetup::default()
        };
        assert!(setup.senders.is_empty() && setup.inbound.is_empty());
        assert_eq!(setup.linkable(), ["telegram", "whatsapp"]);
        assert!(ChannelSetup::default().linkable().is_empty());
    }
}
