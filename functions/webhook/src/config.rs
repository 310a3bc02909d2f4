//! The webhook's configuration, read once per cold start; every problem reported at once.

/// What the webhook needs from its environment.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// The SQS FIFO queue jobs go to (`QUEUE_URL`).
    pub queue_url: String,
    /// The generic channel's signing secret (`GENERIC_WEBHOOK_SECRET`); the channel is off
    /// without it.
    pub generic_secret: Option<String>,
    /// `MAX_BODY_BYTES`, default 256 KiB.
    pub max_body_bytes: usize,
}

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("queue_url", &self.queue_url)
            .field(
                "generic_secret",
                &self.generic_secret.as_ref().map(|_| "[set]"),
            )
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
    }
}

impl WebhookConfig {
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, Vec<String>> {
        let var = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let mut problems = Vec::new();
        let queue_url = var("QUEUE_URL").unwrap_or_else(|| {
            problems.push("QUEUE_URL is not set (the SQS FIFO queue URL)".to_owned());
            String::new()
        });
        let max_body_bytes = match var("MAX_BODY_BYTES") {
            None => crate::DEFAULT_MAX_BODY_BYTES,
            Some(v) => v.parse().unwrap_or_else(|_| {
                problems.push(format!("MAX_BODY_BYTES={v:?} is not a number of bytes"));
                crate::DEFAULT_MAX_BODY_BYTES
            }),
        };
        let generic_secret = var("GENERIC_WEBHOOK_SECRET");
        if generic_secret.is_none() {
            problems.push("no channel is configured: set GENERIC_WEBHOOK_SECRET".to_owned());
        }
        if problems.is_empty() {
            Ok(Self {
                queue_url,
                generic_secret,
                max_body_bytes,
            })
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_problems_at_once_and_no_secret_in_debug() {
        let err = WebhookConfig::from_vars(|k| (k == "MAX_BODY_BYTES").then(|| "lots".into()))
            .unwrap_err();
        assert_eq!(err.len(), 3, "{err:?}");
        let ok = WebhookConfig::from_vars(|k| match k {
            "QUEUE_URL" => Some("http://q".into()),
            "GENERIC_WEBHOOK_SECRET" => Some("hush".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(ok.max_body_bytes, crate::DEFAULT_MAX_BODY_BYTES);
        assert!(!format!("{ok:?}").contains("hush"));
    }
}
