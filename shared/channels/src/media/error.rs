//! What can go wrong fetching or storing an attachment. No variant carries a token, a URL with
//! a token in it, or an SDK string that could: the job logs the error and tells the model a
//! calm [`MediaError::reason`].

/// Why an attachment could not be fetched or stored.
#[derive(Debug, thiserror::Error)]
pub enum MediaError {
    /// Larger than the cap, declared before the download or counted while it streamed: do not
    /// retry; tell the user.
    #[error("attachment is larger than the cap of {limit} bytes ({seen})")]
    TooLarge {
        limit: u64,
        /// How it was found out: "declared 12000000 bytes", "more than the cap while streaming".
        seen: String,
    },
    /// The platform no longer has it (404/410, or an unknown media id): do not retry.
    #[error("attachment not found on the platform")]
    NotFound,
    /// The platform refused or failed (a status other than 404, or an unusable answer): may
    /// succeed later.
    #[error("the platform answered {status} ({what})")]
    Upstream { status: u16, what: &'static str },
    /// A request ran past its deadline: may succeed later.
    #[error("the platform did not answer in time")]
    Timeout,
    /// The connection failed (DNS, TLS, reset): may succeed later.
    #[error("could not reach the platform: {0}")]
    Transport(String),
    /// The reference points somewhere the platform's credentials must not be sent.
    #[error("attachment URL is not on the platform's host")]
    UntrustedUrl,
    /// No credentials for this channel's media (or no media store at all): configure them.
    #[error("attachments from {channel} cannot be read: not configured")]
    NotConfigured { channel: String },
    /// The blob store failed to write or read: may succeed later.
    #[error("media store failed: {0}")]
    Storage(String),
}

impl MediaError {
    /// The part of the note the model sees after "could not be read: ".
    pub fn reason(&self) -> String {
        match self {
            MediaError::TooLarge { limit, .. } => format!("it is larger than {}", size(*limit)),
            MediaError::NotFound => "it is no longer available".into(),
            MediaError::Timeout => "it took too long to download".into(),
            MediaError::NotConfigured { .. } => "attachments cannot be read here".into(),
            MediaError::Upstream { .. }
            | MediaError::Transport(_)
            | MediaError::UntrustedUrl
            | MediaError::Storage(_) => "it could not be downloaded".into(),
        }
    }

    /// From a reqwest error, without its URL (a Telegram file URL carries the bot token).
    pub(crate) fn from_http(e: reqwest::Error) -> Self {
        if e.is_timeout() {
            return MediaError::Timeout;
        }
        MediaError::Transport(e.without_url().to_string())
    }
}

/// `10 MB`, `1.5 MB`, `900 KB` (binary units, as the cap is given in bytes).
pub fn size(bytes: u64) -> String {
    const MB: u64 = 1024 * 1024;
    if bytes >= MB {
        let tenths = bytes * 10 / MB;
        if tenths.is_multiple_of(10) {
            format!("{} MB", tenths / 10)
        } else {
            format!("{}.{} MB", tenths / 10, tenths % 10)
        }
    } else {
        format!("{} KB", bytes.div_ceil(1024))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(size(10 * 1024 * 1024), "10 MB");
        assert_eq!(size(1024 * 1024 * 3 / 2), "1.5 MB");
        assert_eq!(size(900 * 1024), "900 KB");
        assert_eq!(size(1), "1 KB");
    }

    #[test]
    fn the_reason_names_the_cap() {
        let e = MediaError::TooLarge {
            limit: 10 * 1024 * 1024,
            seen: "declared 20000000 bytes".into(),
        };
        assert_eq!(e.reason(), "it is larger than 10 MB");
    }
}
