//! Which channels are on, from configuration. A channel whose secret is not configured is off
//! (its webhook route answers 404), never open. Every problem is reported at once.
//!
//! Inbound (the webhook): `GENERIC_WEBHOOK_SECRET`; `WHATSAPP_APP_SECRET` +
//! `WHATSAPP_VERIFY_TOKEN`; `TELEGRAM_SECRET_TOKEN` (+ `TELEGRAM_BOT_USERNAME`);
//! `SLACK_SIGNING_SECRET`; `TWILIO_AUTH_TOKEN` + `PUBLIC_BASE_URL`.
//!
//! Outbound (the worker): `GENERIC_CALLBACK_URL` + `GENERIC_CALLBACK_SECRET`;
//! `WHATSAPP_ACCESS_TOKEN` + `WHATSAPP_PHONE_NUMBER_ID`; `TELEGRAM_BOT_TOKEN`; `SLACK_BOT_TOKEN`;
//! `TWILIO_ACCOUNT_SID` + `TWILIO_AUTH_TOKEN`; each platform's API base can be overridden with
//! `WHATSAPP_API_BASE`, `TELEGRAM_API_BASE`, `SLACK_API_BASE`, `TWILIO_API_BASE` (tests point
//! them at local fakes).

use crate::generic::{GenericChannel, GenericSender};
use crate::slack::{SlackChannel, SlackSender};
use crate::telegram::{ConfigError, TelegramChannel, TelegramSender};
use crate::twilio::{TwilioChannel, TwilioCredentials, TwilioSender};
use crate::whatsapp::{WhatsAppChannel, WhatsAppSender};
use crate::{Channel, Sender};
use std::collections::HashMap;
use std::sync::Arc;

type Vars<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The shortest `GENERIC_WEBHOOK_SECRET` accepted (as Telegram's token,
/// [`crate::telegram::MIN_SECRET_LEN`]).
pub const MIN_GENERIC_SECRET_LEN: usize = 32;

/// A setting, without the spaces and line breaks around it (a secret pasted with its newline
/// would otherwise fail every signature, silently); a blank one is unset.
fn get(var: Vars<'_>, name: &str) -> Option<String> {
    var(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// Both or neither: a half-configured channel is a mistake worth stopping for.
fn pair(var: Vars<'_>, a: &str, b: &str, problems: &mut Vec<String>) -> Option<(String, String)> {
    match (get(var, a), get(var, b)) {
        (Some(x), Some(y)) => Some((x, y)),
        (None, None) => None,
        _ => {
            problems.push(format!("set both {a} and {b}, or neither"));
            None
        }
    }
}

/// Combine a function's own settings with its channels', reporting every problem at once and
/// refusing to start with no channel at all (`none` says what to set). Only what is wrong is
/// reported: configured channels beside a bad own setting add nothing.
pub fn with_channels<C, T>(
    own: Result<C, Vec<String>>,
    channels: Result<T, Vec<String>>,
    is_empty: impl Fn(&T) -> bool,
    none: &str,
) -> Result<(C, T), Vec<String>> {
    match (own, channels) {
        (Ok(c), Ok(t)) if !is_empty(&t) => Ok((c, t)),
        (own, channels) => {
            let mut problems = own.err().unwrap_or_default();
            match channels {
                Err(p) => problems.extend(p),
                Ok(t) if is_empty(&t) => problems.push(none.to_owned()),
                Ok(_) => {}
            }
            Err(problems)
        }
    }
}

/// The inbound channels that are configured.
pub fn inbound(var: Vars<'_>) -> Result<Vec<Arc<dyn Channel>>, Vec<String>> {
    let mut problems = Vec::new();
    let mut channels: Vec<Arc<dyn Channel>> = Vec::new();
    // Our own HMAC key, chosen by the operator: a short one could be guessed a signed request
    // at a time (a wrong signature is answered at once), and it signs as any user.
    if let Some(secret) = get(var, "GENERIC_WEBHOOK_SECRET") {
        match secret.len() >= MIN_GENERIC_SECRET_LEN {
            true => channels.push(Arc::new(GenericChannel::new(secret.into_bytes()))),
            false => problems.push(format!(
                "GENERIC_WEBHOOK_SECRET must be at least {MIN_GENERIC_SECRET_LEN} characters \
                 (it signs requests as any user; e.g. `openssl rand -hex 16`)"
            )),
        }
    }
    if let Some((secret, token)) = pair(
        var,
        "WHATSAPP_APP_SECRET",
        "WHATSAPP_VERIFY_TOKEN",
        &mut problems,
    ) {
        channels.push(Arc::new(WhatsAppChannel::new(
            secret.into_bytes(),
            token.into_bytes(),
        )));
    }
    if let Some(secret) = get(var, "TELEGRAM_SECRET_TOKEN") {
        match TelegramChannel::new(secret, get(var, "TELEGRAM_BOT_USERNAME")) {
            Ok(c) => channels.push(Arc::new(c)),
            Err(e @ ConfigError::InvalidBotUsername) => {
                problems.push(format!("TELEGRAM_BOT_USERNAME: {e}"))
            }
            Err(e) => problems.push(format!("TELEGRAM_SECRET_TOKEN: {e}")),
        }
    }
    if let Some(secret) = get(var, "SLACK_SIGNING_SECRET") {
        channels.push(Arc::new(SlackChannel::new(secret.into_bytes())));
    }
    // Twilio signs the URL it called: `PUBLIC_BASE_URL` when set, else the one each request
    // says it was made to (API Gateway's domain name; a server that cannot say refuses all).
    if let Some(token) = get(var, "TWILIO_AUTH_TOKEN") {
        channels.push(Arc::new(match get(var, "PUBLIC_BASE_URL") {
            Some(base) => TwilioChannel::new(token.into_bytes(), base),
            None => TwilioChannel::at_called_url(token.into_bytes()),
        }));
    }
    if problems.is_empty() {
        Ok(channels)
    } else {
        Err(problems)
    }
}

/// The reply senders that are configured, by channel name.
pub fn senders(
    var: Vars<'_>,
    client: &reqwest::Client,
) -> Result<HashMap<String, Arc<dyn Sender>>, Vec<String>> {
    let mut problems = Vec::new();
    let mut senders: HashMap<String, Arc<dyn Sender>> = HashMap::new();
    let base = |name: &str, default: &str| get(var, name).unwrap_or_else(|| default.to_owned());
    if let Some((url, secret)) = pair(
        var,
        "GENERIC_CALLBACK_URL",
        "GENERIC_CALLBACK_SECRET",
        &mut problems,
    ) {
        senders.insert(
            "generic".into(),
            Arc::new(GenericSender::new(client.clone(), url, secret.into_bytes())),
        );
    }
    if let Some((token, phone)) = pair(
        var,
        "WHATSAPP_ACCESS_TOKEN",
        "WHATSAPP_PHONE_NUMBER_ID",
        &mut problems,
    ) {
        let api = base("WHATSAPP_API_BASE", crate::whatsapp::DEFAULT_API_BASE);
        senders.insert(
            "whatsapp".into(),
            Arc::new(WhatsAppSender::new(client.clone(), api, token, phone)),
        );
    }
    if let Some(token) = get(var, "TELEGRAM_BOT_TOKEN") {
        let api = base("TELEGRAM_API_BASE", crate::telegram::DEFAULT_API_BASE);
        match TelegramSender::new(client.clone(), api, token) {
            Ok(s) => {
                senders.insert("telegram".into(), Arc::new(s));
            }
            Err(e) => problems.push(format!("TELEGRAM_BOT_TOKEN / TELEGRAM_API_BASE: {e}")),
        }
    }
    if let Some(token) = get(var, "SLACK_BOT_TOKEN") {
        let api = base("SLACK_API_BASE", crate::slack::DEFAULT_API_BASE);
        senders.insert(
            "slack".into(),
            Arc::new(SlackSender::new(client.clone(), api, token)),
        );
    }
    if let Some((sid, token)) = pair(
        var,
        "TWILIO_ACCOUNT_SID",
        "TWILIO_AUTH_TOKEN",
        &mut problems,
    ) {
        let api = base("TWILIO_API_BASE", crate::twilio::DEFAULT_API_BASE);
        let credentials = TwilioCredentials::new(sid, token);
        senders.insert(
            "twilio".into(),
            Arc::new(TwilioSender::new(client.clone(), api, credentials)),
        );
    }
    if problems.is_empty() {
        Ok(senders)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RawRequest;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn nothing_configured_means_no_channel_is_open() {
        assert!(inbound(&vars(&[])).unwrap().is_empty());
        assert!(
            senders(&vars(&[]), &reqwest::Client::new())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn each_configured_channel_is_on() {
        let v = vars(&[
            (
                "GENERIC_WEBHOOK_SECRET",
                "g-0123456789abcdef0123456789abcdef",
            ),
            ("WHATSAPP_APP_SECRET", "w"),
            ("WHATSAPP_VERIFY_TOKEN", "v"),
            (
                "TELEGRAM_SECRET_TOKEN",
                "tg_secret_0123456789abcdef0123456789",
            ),
            ("SLACK_SIGNING_SECRET", "s"),
            ("TWILIO_AUTH_TOKEN", "t"),
            ("PUBLIC_BASE_URL", "https://bridle.example"),
        ]);
        let names: Vec<&str> = inbound(&v).unwrap().iter().map(|c| c.name()).collect();
        assert_eq!(
            names,
            ["generic", "whatsapp", "telegram", "slack", "twilio"]
        );
        let v = vars(&[
            ("WHATSAPP_ACCESS_TOKEN", "a"),
            ("WHATSAPP_PHONE_NUMBER_ID", "123"),
            ("TELEGRAM_BOT_TOKEN", "123456:ABC-def"),
            ("SLACK_BOT_TOKEN", "xoxb-1"),
            ("TWILIO_ACCOUNT_SID", "AC1"),
            ("TWILIO_AUTH_TOKEN", "t"),
        ]);
        let mut names: Vec<String> = senders(&v, &reqwest::Client::new())
            .unwrap()
            .into_keys()
            .collect();
        names.sort();
        assert_eq!(names, ["slack", "telegram", "twilio", "whatsapp"]);
    }

    #[test]
    fn own_and_channel_problems_are_reported_together() {
        let none = "set at least one channel";
        let both = with_channels::<(), Vec<u8>>(
            Err(vec!["A".into()]),
            Err(vec!["B".into()]),
            Vec::is_empty,
            none,
        );
        assert_eq!(both.err().unwrap(), ["A", "B"]);
        let empty = with_channels::<(), Vec<u8>>(Ok(()), Ok(vec![]), Vec::is_empty, none);
        assert_eq!(empty.err().unwrap(), [none]);
        assert!(with_channels::<(), Vec<u8>>(Ok(()), Ok(vec![1]), Vec::is_empty, none).is_ok());
    }

    #[test]
    fn configured_channels_beside_a_bad_own_setting_are_not_called_missing() {
        let none = "set at least one channel";
        let own_only =
            with_channels::<(), Vec<u8>>(Err(vec!["A".into()]), Ok(vec![1]), Vec::is_empty, none);
        assert_eq!(own_only.err().unwrap(), ["A"]);
        let and_none =
            with_channels::<(), Vec<u8>>(Err(vec!["A".into()]), Ok(vec![]), Vec::is_empty, none);
        assert_eq!(and_none.err().unwrap(), ["A", none]);
    }

    #[test]
    fn guessable_secrets_are_refused_without_being_shown() {
        let v = vars(&[
            ("GENERIC_WEBHOOK_SECRET", "s3cret-generic"),
            ("TELEGRAM_SECRET_TOKEN", "tg-secret-token"),
        ]);
        let problems = inbound(&v).err().unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].starts_with("GENERIC_WEBHOOK_SECRET must be at least 32"));
        assert!(
            problems[1].contains("at least 32 characters"),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .all(|p| !p.contains("s3cret") && !p.contains("tg-secret")),
            "no secret in messages"
        );
    }

    /// A bot username no bot could have stops the webhook at start-up, named as its own
    /// setting (not the secret beside it).
    #[test]
    fn a_bot_username_no_bot_could_have_is_reported_as_such() {
        let secret = "a".repeat(32);
        for (name, ok) in [("@bridlebot", true), ("bridle bot", false), ("bot", false)] {
            let pairs = [
                ("TELEGRAM_SECRET_TOKEN", secret.as_str()),
                ("TELEGRAM_BOT_USERNAME", name),
            ];
            let v = vars(&pairs);
            match inbound(&v) {
                Ok(channels) => assert!(ok && channels.len() == 1, "{name:?}"),
                Err(problems) => {
                    assert!(!ok, "{name:?}: {problems:?}");
                    assert_eq!(problems.len(), 1, "{problems:?}");
                    assert!(
                        problems[0].starts_with("TELEGRAM_BOT_USERNAME: "),
                        "{problems:?}"
                    );
                }
            }
        }
    }

    /// A secret pasted with its line break (a `.env` file, a console's text box) is the secret
    /// without it: deliveries signed with it verify.
    #[test]
    fn secrets_are_read_without_the_spaces_around_them() {
        let secret = "0123456789abcdef0123456789abcdef";
        let pasted = format!("{secret}\n");
        let pairs = [("GENERIC_WEBHOOK_SECRET", pasted.as_str())];
        let v = vars(&pairs);
        let channels = inbound(&v).unwrap();
        let body = br#"{"type":"message"}"#;
        let headers = vec![
            (
                crate::generic::TIMESTAMP_HEADER.to_owned(),
                "1800000000".to_owned(),
            ),
            (
                crate::generic::SIGNATURE_HEADER.to_owned(),
                crate::generic::sign(secret.as_bytes(), 1_800_000_000, body),
            ),
        ];
        let request = RawRequest {
            method: "POST",
            path: "/webhooks/generic",
            query: None,
            headers: &headers,
            body,
            origin: None,
        };
        assert!(channels[0].verify(&request, 1_800_000_000).is_ok());
    }

    #[test]
    fn half_configured_channels_are_reported_together() {
        let v = vars(&[
            ("WHATSAPP_APP_SECRET", "w"),
            ("TWILIO_AUTH_TOKEN", "t"),
            ("TELEGRAM_SECRET_TOKEN", "has spaces"),
        ]);
        // WhatsApp without its verify token, Telegram's token; Twilio needs no public URL
        // here (it checks against the URL each request was made to, where one says so).
        let problems = inbound(&v).err().unwrap();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems.iter().all(|p| !p.contains("has spaces")),
            "no secret in messages"
        );
    }
}
