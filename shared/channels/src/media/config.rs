//! The media fetcher from configuration: the same credentials and API bases as the senders
//! (`WHATSAPP_ACCESS_TOKEN`, `TELEGRAM_BOT_TOKEN`, `SLACK_BOT_TOKEN`, `TWILIO_ACCOUNT_SID` +
//! `TWILIO_AUTH_TOKEN`, the `*_API_BASE` overrides), plus `BRIDLE_MEDIA_MAX_BYTES` (the cap on
//! one attachment; 10 MB when unset). A platform without credentials cannot be read from; its
//! attachments become a note to the model.

use super::fetcher::{FetchLimits, MediaFetcher, PlatformMedia};
use super::platforms::{Slack, Telegram, Twilio, WhatsApp};

type Vars<'a> = &'a dyn Fn(&str) -> Option<String>;

impl MediaFetcher {
    /// From the environment; every problem at once.
    pub fn from_vars(var: Vars<'_>) -> Result<Self, Vec<String>> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let base = |name: &str, default: &str| get(name).unwrap_or_else(|| default.to_owned());
        let mut limits = FetchLimits::default();
        let mut problems = Vec::new();
        if let Some(v) = get("BRIDLE_MEDIA_MAX_BYTES") {
            match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => limits.max_bytes = n,
                _ => problems.push(format!(
                    "BRIDLE_MEDIA_MAX_BYTES={v:?} is not a positive number of bytes"
                )),
            }
        }
        let platforms = PlatformMedia {
            whatsapp: get("WHATSAPP_ACCESS_TOKEN").map(|access_token| WhatsApp {
                api_base: base("WHATSAPP_API_BASE", crate::whatsapp::DEFAULT_API_BASE),
                api_version: crate::whatsapp::DEFAULT_API_VERSION.to_owned(),
                access_token,
            }),
            telegram: get("TELEGRAM_BOT_TOKEN").map(|bot_token| Telegram {
                api_base: base("TELEGRAM_API_BASE", crate::telegram::DEFAULT_API_BASE),
                bot_token,
            }),
            slack: get("SLACK_BOT_TOKEN").map(|bot_token| Slack {
                api_base: base("SLACK_API_BASE", crate::slack::DEFAULT_API_BASE),
                bot_token,
            }),
            twilio: get("TWILIO_ACCOUNT_SID").zip(get("TWILIO_AUTH_TOKEN")).map(
                |(account_sid, auth_token)| Twilio {
                    api_base: base("TWILIO_API_BASE", crate::twilio::DEFAULT_API_BASE),
                    account_sid,
                    auth_token,
                },
            ),
        };
        if problems.is_empty() {
            Ok(MediaFetcher::new(platforms, limits))
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_cap_defaults_to_10_mb_and_can_be_set() {
        let f = MediaFetcher::from_vars(&vars(&[])).unwrap();
        assert_eq!(f.limits().max_bytes, 10 * 1024 * 1024);
        let f = MediaFetcher::from_vars(&vars(&[("BRIDLE_MEDIA_MAX_BYTES", "2048")])).unwrap();
        assert_eq!(f.limits().max_bytes, 2048);
        for bad in ["0", "-1", "10MB"] {
            let problems =
                MediaFetcher::from_vars(&vars(&[("BRIDLE_MEDIA_MAX_BYTES", bad)])).unwrap_err();
            assert!(
                problems[0].contains("BRIDLE_MEDIA_MAX_BYTES"),
                "{problems:?}"
            );
        }
    }
}
