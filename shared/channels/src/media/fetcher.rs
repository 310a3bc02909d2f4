//! [`MediaFetcher`]: one attachment from a platform, in one or two hops, with the cap checked on
//! every size the platform declares and on the bytes counted while they stream.
//!
//! - WhatsApp: `GET {api}/{version}/{media id}` (Bearer token) → `url`, `mime_type`,
//!   `file_size` → refuse over the cap → `GET url` with the token.
//! - Telegram: `getFile?file_id=…` → `file_path` (+ `file_size`) → refuse over the cap →
//!   `GET {api}/file/bot<token>/<file_path>`.
//! - Slack: `url_private` with the bot token; the size comes from the event's file object.
//! - Twilio: `MediaUrl{N}` with Basic auth (account SID + auth token).
//!
//! Every hop — the lookup, the download and each redirect — is checked against the platform's
//! documented hosts (or the configured API base's) before it is sent ([`Hosts`]); anything
//! else is [`MediaError::UntrustedUrl`] and is never contacted. Credentials go only to the
//! platform's own hosts, no request carries a `Referer`, and redirects are followed by
//! [`follow::get`], not by reqwest. Every fetch has a deadline; no error carries a token.

use super::download::{Downloaded, check_declared, download};
use super::follow::{self, Auth};
use super::hosts::Hosts;
use super::{MediaError, MediaStore, platforms};
use crate::InboundMedia;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use transcript::MediaRef;

/// The default cap on one attachment: 10 MB (`BRIDLE_MEDIA_MAX_BYTES`).
pub const DEFAULT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// The default deadline of each request (one hop, body included).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// The bytes of one attachment and their type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub mime_type: String,
    pub bytes: Vec<u8>,
}

/// Credentials and addresses of each platform whose media can be read.
#[derive(Debug, Clone, Default)]
pub struct PlatformMedia {
    pub whatsapp: Option<platforms::WhatsApp>,
    pub telegram: Option<platforms::Telegram>,
    pub slack: Option<platforms::Slack>,
    pub twilio: Option<platforms::Twilio>,
}

/// The knobs of fetching.
#[derive(Debug, Clone, Copy)]
pub struct FetchLimits {
    /// Largest attachment, in bytes.
    pub max_bytes: u64,
    /// Deadline of each request.
    pub timeout: Duration,
}

impl Default for FetchLimits {
    fn default() -> Self {
        Self {
            max_bytes: DEFAULT_MAX_BYTES,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Fetches attachments from the platforms.
///
/// It has its own HTTP client (no redirects followed by reqwest, no `Referer`), built at the
/// first fetch, so a process that never receives an attachment never builds it.
#[derive(Debug, Clone)]
pub struct MediaFetcher {
    http: Arc<OnceLock<Option<reqwest::Client>>>,
    platforms: PlatformMedia,
    limits: FetchLimits,
}

/// One request's shared settings, handed to the platform modules.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hop<'a> {
    pub http: &'a reqwest::Client,
    pub limits: FetchLimits,
}

impl Hop<'_> {
    pub(crate) fn check_declared(&self, declared: Option<u64>) -> Result<(), MediaError> {
        check_declared(declared, self.limits.max_bytes)
    }

    /// GET `url` and the redirects it leads to, each checked against `hosts`.
    pub(crate) async fn get(
        &self,
        url: &str,
        hosts: &Hosts,
        auth: Auth<'_>,
    ) -> Result<reqwest::Response, MediaError> {
        follow::get(self.http, url, hosts, auth, self.limits.timeout).await
    }

    /// [`Hop::get`], then the body, at most the cap.
    pub(crate) async fn download(
        &self,
        url: &str,
        hosts: &Hosts,
        auth: Auth<'_>,
    ) -> Result<Downloaded, MediaError> {
        let response = self.get(url, hosts, auth).await?;
        download(response, self.limits.max_bytes).await
    }
}

impl MediaFetcher {
    pub fn new(platforms: PlatformMedia, limits: FetchLimits) -> Self {
        Self {
            http: Arc::default(),
            platforms,
            limits,
        }
    }

    fn http(&self) -> Result<&reqwest::Client, MediaError> {
        self.http
            .get_or_init(|| {
                follow::client()
                    .inspect_err(
                        |e| tracing::error!(error = %e, "cannot build the media HTTP client"),
                    )
                    .ok()
            })
            .as_ref()
            .ok_or_else(|| MediaError::Transport("no HTTP client for media".into()))
    }

    pub fn limits(&self) -> FetchLimits {
        self.limits
    }

    /// Fetch one attachment of a message that arrived on `channel`.
    pub async fn fetch(&self, channel: &str, media: &InboundMedia) -> Result<Fetched, MediaError> {
        // The webhook's own view of the size is the first "before" check.
        check_declared(media.size_bytes, self.limits.max_bytes)?;
        let hop = Hop {
            http: self.http()?,
            limits: self.limits,
        };
        let not_configured = || MediaError::NotConfigured {
            channel: channel.to_owned(),
        };
        let p = &self.platforms;
        let (downloaded, declared_type) = match channel {
            "whatsapp" => {
                p.whatsapp
                    .as_ref()
                    .ok_or_else(not_configured)?
                    .fetch(hop, media)
                    .await?
            }
            "telegram" => {
                p.telegram
                    .as_ref()
                    .ok_or_else(not_configured)?
                    .fetch(hop, media)
                    .await?
            }
            "slack" => {
                p.slack
                    .as_ref()
                    .ok_or_else(not_configured)?
                    .fetch(hop, media)
                    .await?
            }
            "twilio" => {
                p.twilio
                    .as_ref()
                    .ok_or_else(not_configured)?
                    .fetch(hop, media)
                    .await?
            }
            _ => return Err(not_configured()),
        };
        Ok(Fetched {
            mime_type: mime_type(declared_type, &media.mime_type, downloaded.content_type),
            bytes: downloaded.bytes,
        })
    }
}

impl MediaFetcher {
    /// Fetch one attachment and keep it in `store` under `key` (see
    /// [`media_key`](super::media_key)); the reference is what the transcript holds.
    pub async fn fetch_and_store(
        &self,
        store: &dyn MediaStore,
        channel: &str,
        key: &str,
        media: &InboundMedia,
    ) -> Result<MediaRef, MediaError> {
        let fetched = self.fetch(channel, media).await?;
        store.put(key, &fetched.mime_type, fetched.bytes).await
    }
}

/// The most specific type known: the platform's metadata, then the webhook's, then the
/// download's `Content-Type`.
fn mime_type(metadata: Option<String>, webhook: &str, downloaded: Option<String>) -> String {
    let useful = |t: &str| !t.trim().is_empty() && t != "application/octet-stream";
    metadata
        .filter(|t| useful(t))
        .or_else(|| useful(webhook).then(|| webhook.to_owned()))
        .or(downloaded.filter(|t| useful(t)))
        .unwrap_or_else(|| "application/octet-stream".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_type_wins() {
        let s = |v: &str| Some(v.to_owned());
        assert_eq!(mime_type(s("image/png"), "image/jpeg", None), "image/png");
        assert_eq!(mime_type(None, "image/jpeg", s("text/plain")), "image/jpeg");
        assert_eq!(
            mime_type(s(""), "application/octet-stream", s("application/pdf")),
            "application/pdf"
        );
        assert_eq!(mime_type(None, "", None), "application/octet-stream");
    }
}
