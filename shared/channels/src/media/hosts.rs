//! Where one platform's media may be fetched from, and where its credentials may go.
//!
//! Every hop of a fetch — the first request and each redirect — is checked here before it is
//! sent: a host that is not the platform's is never contacted. The platform's own hosts get its
//! credentials; a documented content host (Twilio's CDN) is contacted without them. The
//! configured API base (`*_API_BASE`, a local Bot API server or a test's fake) counts as the
//! platform's own.

use super::MediaError;
use reqwest::Url;

/// What a hop may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// The platform's own host: credentials go along.
    WithCredentials,
    /// A documented content host: contacted, but no credentials.
    Plain,
}

/// One allowed origin, or every subdomain of a domain on one scheme and its default port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Origin(String),
    Subdomains { scheme: String, suffix: String },
}

impl Pattern {
    /// `https://host[:port]` or `https://*.domain`; `None` when it does not parse.
    fn parse(spec: &str) -> Option<Self> {
        if let Some((scheme, rest)) = spec.split_once("://*.") {
            let domain = rest.trim_end_matches('/');
            if domain.is_empty() || domain.contains(['/', ':', '*']) {
                return None;
            }
            return Some(Pattern::Subdomains {
                scheme: scheme.to_ascii_lowercase(),
                suffix: format!(".{}", domain.to_ascii_lowercase()),
            });
        }
        let origin = Url::parse(spec).ok()?.origin();
        origin
            .is_tuple()
            .then(|| Pattern::Origin(origin.ascii_serialization()))
    }

    fn matches(&self, url: &Url) -> bool {
        match self {
            Pattern::Origin(o) => url.origin().ascii_serialization() == *o,
            Pattern::Subdomains { scheme, suffix } => {
                url.scheme() == scheme
                    && url.port().is_none()
                    && url.host_str().is_some_and(|h| {
                        h.len() > suffix.len() && h.to_ascii_lowercase().ends_with(suffix.as_str())
                    })
            }
        }
    }
}

/// The hosts one platform's media may come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hosts {
    own: Vec<Pattern>,
    content: Vec<Pattern>,
}

impl Hosts {
    /// The platform's documented hosts (`own` get credentials, `content` do not) and its
    /// configured API base, which counts as its own.
    pub(crate) fn new(own: &[&str], content: &[&str], api_base: &str) -> Self {
        let parse = |specs: &[&str]| specs.iter().filter_map(|s| Pattern::parse(s)).collect();
        let mut hosts = Hosts {
            own: parse(own),
            content: parse(content),
        };
        hosts.own.extend(Pattern::parse(api_base));
        hosts
    }

    /// Whether `url` may be requested, and with what.
    pub(crate) fn check(&self, url: &Url) -> Result<Access, MediaError> {
        if self.own.iter().any(|p| p.matches(url)) {
            Ok(Access::WithCredentials)
        } else if self.content.iter().any(|p| p.matches(url)) {
            Ok(Access::Plain)
        } else {
            Err(MediaError::UntrustedUrl)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(hosts: &Hosts, url: &str) -> Option<Access> {
        hosts.check(&Url::parse(url).unwrap()).ok()
    }

    #[test]
    fn own_hosts_get_credentials_content_hosts_do_not_the_rest_nothing() {
        let hosts = Hosts::new(
            &["https://api.twilio.com"],
            &["https://*.twiliocdn.com"],
            "http://127.0.0.1:9000/base",
        );
        let own = Some(Access::WithCredentials);
        assert_eq!(access(&hosts, "https://api.twilio.com/2010-04-01/x"), own);
        assert_eq!(access(&hosts, "https://API.twilio.com:443/x"), own);
        assert_eq!(access(&hosts, "http://127.0.0.1:9000/other"), own);
        assert_eq!(
            access(&hosts, "https://mms.twiliocdn.com/AC/abc"),
            Some(Access::Plain)
        );
        for refused in [
            "http://api.twilio.com/x",
            "https://api.twilio.com:8443/x",
            "https://api.twilio.com.evil.example/x",
            "https://twiliocdn.com/x",
            "https://eviltwiliocdn.com/x",
            "http://mms.twiliocdn.com/x",
            "https://mms.twiliocdn.com:8443/x",
            "http://127.0.0.1:9001/x",
            "http://localhost:9000/x",
        ] {
            assert_eq!(access(&hosts, refused), None, "{refused}");
        }
    }

    #[test]
    fn a_bad_pattern_allows_nothing() {
        let hosts = Hosts::new(&["not a url", "https://*."], &["https://*.a/b"], "");
        assert_eq!(access(&hosts, "https://x.a/"), None);
        assert!(hosts.own.is_empty() && hosts.content.is_empty());
    }
}
