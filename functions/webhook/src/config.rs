//! The webhook's configuration, read once per cold start; every problem reported at once.
//! Which channels are on comes from [`channels::config::inbound`].

/// What the webhook needs from its environment besides the channels' secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// The SQS FIFO queue jobs go to (`QUEUE_URL`).
    pub queue_url: String,
    /// `MAX_BODY_BYTES`, default 256 KiB.
    pub max_body_bytes: usize,
    /// Open the queue's connection during init: only when Lambda initialises the function
    /// ahead of traffic (`AWS_LAMBDA_INITIALIZATION_TYPE=provisioned-concurrency`). On an
    /// on-demand cold start the invocation that caused it waits for init and then the handler,
    /// so a connection opened in init is paid by that same request, plus one extra SQS call.
    pub warm_queue_at_init: bool,
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
        let warm_queue_at_init =
            var("AWS_LAMBDA_INITIALIZATION_TYPE").as_deref() == Some("provisioned-concurrency");
        if problems.is_empty() {
            Ok(Self {
                queue_url,
                max_body_bytes,
                warm_queue_at_init,
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
    fn all_problems_at_once() {
        let err = WebhookConfig::from_vars(|k| (k == "MAX_BODY_BYTES").then(|| "lots".into()))
            .unwrap_err();
        assert_eq!(err.len(), 2, "{err:?}");
        let ok =
            WebhookConfig::from_vars(|k| (k == "QUEUE_URL").then(|| "http://q".into())).unwrap();
        assert_eq!(ok.max_body_bytes, crate::DEFAULT_MAX_BODY_BYTES);
        assert!(!ok.warm_queue_at_init);
    }

    #[test]
    fn the_queue_is_warmed_at_init_only_ahead_of_traffic() {
        let warm = |kind: &'static str| {
            WebhookConfig::from_vars(|k| match k {
                "QUEUE_URL" => Some("http://q".into()),
                "AWS_LAMBDA_INITIALIZATION_TYPE" => Some(kind.into()),
                _ => None,
            })
            .unwrap()
            .warm_queue_at_init
        };
        assert!(warm("provisioned-concurrency"));
        assert!(!warm("on-demand"));
        assert!(!warm("snap-start"));
    }
}
