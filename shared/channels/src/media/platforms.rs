//! The per-platform hops of [`MediaFetcher`](super::MediaFetcher). Each keeps its credentials
//! out of `Debug` and out of every error.

use super::MediaError;
use super::download::{Downloaded, status_error};
use super::fetcher::Hop;
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

/// The scheme, host and port of a URL, if it parses.
fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    Some(u.origin().ascii_serialization())
}

/// Whether `url` is on one of `trusted` (origins of URLs).
fn trusted(url: &str, trusted: &[&str]) -> Result<(), MediaError> {
    let o = origin(url).ok_or(MediaError::UntrustedUrl)?;
    if trusted.iter().filter_map(|t| origin(t)).any(|t| t == o) {
        Ok(())
    } else {
        Err(MediaError::UntrustedUrl)
    }
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

impl WhatsApp {
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
        let response = hop
            .http
            .get(url)
            .timeout(hop.limits.timeout)
            .bearer_auth(&self.access_token)
            .send()
            .await
            .map_err(MediaError::from_http)?;
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
        let downloaded = hop
            .download(hop.http.get(url).bearer_auth(&self.access_token))
            .await?;
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

impl Telegram {
    pub(crate) async fn fetch(
        &self,
        hop: Hop<'_>,
        media: &InboundMedia,
    ) -> Result<Hopped, MediaError> {
        let id = plain_id(&media.reference)?;
        let base = self.api_base.trim_end_matches('/');
        let response = hop
            .http
            // `id` is plain (letters, digits, `._-:`): nothing to escape.
            .get(format!("{base}/bot{}/getFile?file_id={id}", self.bot_token))
            .timeout(hop.limits.timeout)
            .send()
            .await
            .map_err(MediaError::from_http)?;
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
        let downloaded = hop.download(hop.http.get(url)).await?;
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
pub const SLACK_FILES: &str = "https://files.slack.com/";

impl Slack {
    pub(crate) async fn fetch(
        &self,
        hop: Hop<'_>,
        media: &InboundMedia,
    ) -> Result<Hopped, MediaError> {
        trusted(&media.reference, &[SLACK_FILES, &self.api_base])?;
        let downloaded = hop
            .download(hop.http.get(&media.reference).bearer_auth(&self.bot_token))
            .await?;
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

/// Where Twilio serves `MediaUrl{N}` (it may redirect to a CDN; reqwest drops the credentials on
/// a redirect to another host).
pub const TWILIO_MEDIA: &str = "https://api.twilio.com/";

impl Twilio {
    pub(crate) async fn fetch(
        &self,
        hop: Hop<'_>,
        media: &InboundMedia,
    ) -> Result<Hopped, MediaError> {
        trusted(&media.reference, &[TWILIO_MEDIA, &self.api_base])?;
        let request = hop
            .http
            .get(&media.reference)
            .basic_auth(&self.account_sid, Some(&self.auth_token));
        Ok((hop.download(request).await?, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_only_go_to_the_platforms_hosts() {
        let ok = |u: &str| trusted(u, &[SLACK_FILES, "http://127.0.0.1:9000/api"]).is_ok();
        assert!(ok("https://files.slack.com/files-pri/T1-F1/cat.png"));
        assert!(ok("http://127.0.0.1:9000/files/cat.png"));
        assert!(!ok("https://files.slack.com.evil.example/x"));
        assert!(!ok("http://files.slack.com/x"), "scheme counts");
        assert!(!ok("http://127.0.0.1:9001/x"), "port counts");
        assert!(!ok("not a url"));
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
