//! The per-platform hops of [`MediaFetcher`](super::MediaFetcher). Each keeps its credentials
//! out of `Debug` and out of every error, and names the hosts its media may come from: the ones
//! the platform documents, plus its configured API base.

use super::MediaError;
use super::download::{Downloaded, status_error};
use super::fetcher::Hop;
use super::follow::Auth;
use super::hosts::Hosts;
use crate::InboundMedia;
use serde::Deserialize;
use serde_json::Value;

/// What a fetch hands back: the download, and the type the platform's metadata declared.
type Hopped = (Downloaded, Option<String>);

fn redacted(f: &mut std::fmt::Formatter<'_>, name: &str, api_base: &str) -> std::fmt::Result {
    f.debug_struct(name)
        .field("api_base", &api_base)
        .field("credentials", &"[redacted]")
        .finish()
}

/// A size given as a number or a string of digits (the Graph API has used both).
fn size_of(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A platform id safe to put in a URL path or query as it is.
fn plain_id(id: &str) -> Result<&str, MediaError> {
    let ok = !id.is_empty()
        && id.len() <= 512
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b));
    if ok {
        Ok(id)
    } else {
        Err(MediaError::NotFound)
    }
}

/// WhatsApp Cloud API media: the media id → a short-lived URL → the bytes, both with the token.
#[derive(Clone)]
pub struct WhatsApp {
    pub api_base: String,
    pub api_version: String,
    pub access_token: String,
}

impl std::fmt::Debug for WhatsApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        redacted(f, "WhatsApp", &self.api_base)
    }
}

/// Meta's hosts for WhatsApp media: the Graph API (the lookup) and the host of the short-lived
/// download URL it returns (`https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=…`),
/// which wants the same token.
pub const WHATSAPP_HOSTS: &[&str] = &["https://graph.facebook.com", "https://lookaside.fbsbx.com"];

impl WhatsApp {
    fn hosts(&self) -> Hosts {
        Hosts::new(WHATSAPP_HOSTS, &[], &self.api_base)
    }

    pub(crate) async fn fetch(
        &self,
        hop: Hop<'_>,
        media: &InboundMedia,
    ) -> Result<Hopped, MediaError> {
        let id = plain_id(&media.reference)?;
        let url = format!(
            "{}/{}/{id}",
            self.api_base.trim_end_matches('/'),
            self.api_version
        );
        let hosts = self.hosts();
        let auth = Auth::Bearer(&self.access_token);
        let response = hop.get(&url, &hosts, auth).await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            // Graph answers an unknown or expired media id with 400, error code 100.
            if status.as_u16() == 400 && body["error"]["code"] == 100 {
                return Err(MediaError::NotFound);
            }
            return Err(status_error(status, "WhatsApp media lookup"));
        }
        let Some(url) = body["url"].as_str().filter(|u| !u.is_empty()) else {
            return Err(MediaError::Upstream {
                status: status.as_u16(),
                what: "WhatsApp media lookup without a url",
            });
        };
        hop.check_declared(size_of(body.get("file_size")))?;
        let declared_type = body["mime_type"].as_str().map(str::to_owned);
        let downloaded = hop.download(url, &hosts, auth).await?;
        Ok((downloaded, declared_type))
    }
}

/// Telegram Bot API files: `getFile` → `file_path` → the file URL (the token is in the path).
#[derive(Clone)]
pub struct Telegram {
    pub api_base: String,
    pub bot_token: String,
}

impl std::fmt::Debug for Telegram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        redacted(f, "Telegram", &self.api_base)
    }
}

#[derive(Deserialize)]
struct TelegramAnswer {
    ok: bool,
    result: Option<TelegramFile>,
    description: Option<String>,
}

#[derive(Deserialize)]
struct TelegramFile {
    file_path: Option<String>,
    file_size: Option<u64>,
}

/// Telegram's Bot API host: `getFile` and the file download both live there.
pub const TELEGRAM_HOSTS: &[&str] = &["https://api.telegram.org"];

impl Telegram {
    pub(crate) async fn fetch(
        &self,
        hop: Hop<'_>,
        media: &InboundMedia,
    ) -> Result<Hopped, MediaError> {
        let id = plain_id(&media.reference)?;
        let base = self.api_base.trim_end_matches('/');
        let hosts = Hosts::new(TELEGRAM_HOSTS, &[], &self.api_base);
        // `id` is plain (letters, digits, `._-:`): nothing to escape. The token is in the path,
        // so no `Auth`: the host check is what keeps it at Telegram.
        let get_file = format!("{base}/bot{}/getFile?file_id={id}", self.bot_token);
        let response = hop.get(&get_file, &hosts, Auth::None).await?;
        let status = response.status();
        let answer: Option<TelegramAnswer> = response.json().await.ok();
        let file = match answer {
            Some(TelegramAnswer {
                ok: true,
                result: Some(file),
                ..
            }) => file,
            // Bots may not download files over 20 MB; Telegram says so on getFile.
            Some(TelegramAnswer {
                description: Some(d),
                ..
            }) if d.contains("too big") => {
                return Err(MediaError::TooLarge {
                    limit: hop.limits.max_bytes,
                    seen: "Telegram: file is too big".into(),
                });
            }
            _ if status.as_u16() == 400 => return Err(MediaError::NotFound),
            _ => return Err(status_error(status, "Telegram getFile")),
        };
        hop.check_declared(file.file_size)?;
        let path = file
            .file_path
            .filter(|p| !p.is_empty() && !p.split('/').any(|s| s == ".."))
            .ok_or(MediaError::Upstream {
                status: status.as_u16(),
                what: "Telegram getFile without a file_path",
            })?;
        let url = format!("{base}/file/bot{}/{path}", self.bot_token);
        let downloaded = hop.download(&url, &hosts, Auth::None).await?;
        Ok((downloaded, None))
    }
}

/// Slack files: `url_private` with the bot token.
#[derive(Clone)]
pub struct Slack {
    pub api_base: String,
    pub bot_token: String,
}

impl std::fmt::Debug for Slack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        redacted(f, "Slack", &self.api_base)
    }
}

/// Where Slack serves `url_private`.
pub const SLACK_HOSTS: &[&str] = &["https://files.slack.com"];

impl Slack {
    pub(crate) async fn fetch(
        &self,
        hop: Hop<'_>,
        media: &InboundMedia,
    ) -> Result<Hopped, MediaError> {
        let hosts = Hosts::new(SLACK_HOSTS, &[], &self.api_base);
        let auth = Auth::Bearer(&self.bot_token);
        let downloaded = hop.download(&media.reference, &hosts, auth).await?;
        // Without the `files:read` scope Slack answers 200 with its sign-in page.
        if downloaded.content_type.as_deref() == Some("text/html")
            && !media.mime_type.starts_with("text/html")
        {
            return Err(MediaError::Upstream {
                status: 200,
                what: "Slack sent a sign-in page (is the files:read scope granted?)",
            });
        }
        Ok((downloaded, None))
    }
}

/// Twilio MMS media: `MediaUrl{N}` with Basic auth.
#[derive(Clone)]
pub struct Twilio {
    pub api_base: String,
    pub account_sid: String,
    pub auth_token: String,
}

impl std::fmt::Debug for Twilio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        redacted(f, "Twilio", &self.api_base)
    }
}

/// Where Twilio serves `MediaUrl{N}` (with Basic auth).
pub const TWILIO_HOSTS: &[&str] = &["https://api.twilio.com"];
/// Where `MediaUrl{N}` redirects to, given no credentials: Twilio's short-lived media URLs on
/// `mms.twiliocdn.com` (media behind HTTP auth, now the rule) and, for media stored before an
/// account turned that on, `s3-external-1.amazonaws.com` (Twilio's support article "Protect Media
/// Access with HTTP Basic Authentication").
pub const TWILIO_CONTENT_HOSTS: &[&str] = &[
    "https://*.twiliocdn.com",
    "https://s3-external-1.amazonaws.com",
];

impl Twilio {
    pub(crate) async fn fetch(
        &self,
        hop: Hop<'_>,
        media: &InboundMedia,
    ) -> Result<Hopped, MediaError> {
        let hosts = Hosts::new(TWILIO_HOSTS, TWILIO_CONTENT_HOSTS, &self.api_base);
        let auth = Auth::Basic {
            user: &self.account_sid,
            password: &self.auth_token,
        };
        Ok((hop.download(&media.reference, &hosts, auth).await?, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::hosts::Access;

    #[test]
    fn the_documented_hosts_and_the_api_base_are_the_platforms() {
        let check = |hosts: &Hosts, u: &str| hosts.check(&reqwest::Url::parse(u).unwrap()).is_ok();
        let slack = Hosts::new(SLACK_HOSTS, &[], "http://127.0.0.1:9000/api");
        assert!(check(
            &slack,
            "https://files.slack.com/files-pri/T1-F1/cat.png"
        ));
        assert!(check(&slack, "http://127.0.0.1:9000/files/cat.png"));
        assert!(!check(&slack, "https://files.slack.com.evil.example/x"));
        assert!(!check(&slack, "http://files.slack.com/x"), "scheme counts");
        assert!(!check(&slack, "http://127.0.0.1:9001/x"), "port counts");
        let wa = Hosts::new(WHATSAPP_HOSTS, &[], crate::whatsapp::DEFAULT_API_BASE);
        assert!(check(
            &wa,
            "https://lookaside.fbsbx.com/whatsapp_business/attachments/?mid=1"
        ));
        assert!(check(&wa, "https://graph.facebook.com/v21.0/1"));
        assert!(!check(
            &wa,
            "https://evil.example/whatsapp_business/attachments/?mid=1"
        ));
        let twilio = Hosts::new(TWILIO_HOSTS, TWILIO_CONTENT_HOSTS, "https://api.twilio.com");
        let access = |u: &str| twilio.check(&reqwest::Url::parse(u).unwrap()).ok();
        assert_eq!(
            access("https://mms.twiliocdn.com/AC1/abc"),
            Some(Access::Plain)
        );
        assert_eq!(
            access("https://s3-external-1.amazonaws.com/media.twiliocdn.com/AC1/abc"),
            Some(Access::Plain)
        );
        assert_eq!(
            access("https://api.twilio.com/2010-04-01/x"),
            Some(Access::WithCredentials)
        );
        assert_eq!(access("https://s3.amazonaws.com/x"), None);
    }

    #[test]
    fn sizes_come_as_numbers_or_strings() {
        assert_eq!(size_of(Some(&serde_json::json!(12))), Some(12));
        assert_eq!(size_of(Some(&serde_json::json!("303833"))), Some(303_833));
        assert_eq!(size_of(Some(&serde_json::json!("x"))), None);
        assert_eq!(size_of(None), None);
    }

    #[test]
    fn ids_with_path_characters_are_refused() {
        assert!(plain_id("1234567890").is_ok());
        assert!(plain_id("AgACAgIAAxkBAAIBZ2V-x_y").is_ok());
        for bad in ["", "../x", "a/b", "a?b", "a b"] {
            assert!(matches!(plain_id(bad), Err(MediaError::NotFound)), "{bad}");
        }
    }

    #[test]
    fn debug_never_shows_a_credential() {
        let t = Telegram {
            api_base: "https://api.telegram.org".into(),
            bot_token: "123:SECRET".into(),
        };
        let w = Twilio {
            api_base: "x".into(),
            account_sid: "AC1".into(),
            auth_token: "SECRET".into(),
        };
        assert!(!format!("{t:?}{w:?}").contains("SECRET"));
    }
}
