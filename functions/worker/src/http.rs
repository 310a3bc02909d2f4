//! The worker's HTTPS client for the platforms' APIs (replies, media downloads).
//!
//! It trusts Mozilla's root program as compiled in (`webpki-root-certs`, kept by the rustls
//! project), not the machine's store: reqwest's platform verifier reads and parses every file of
//! the system's certificate store when the client is built, which is on every cold start of the
//! worker: 2.7 ms of its 6.9 ms start on this machine (`scripts/cold-start --worker`, before and
//! after this client).
//! The platforms Bridle talks to (Meta's Graph API, Telegram, Slack, Twilio) chain to public
//! roots in that program. A root-program change reaches the Lambda with the next build, as the
//! Amazon roots of the AWS clients do (`aws-roots`).

use std::time::Duration;

/// How long to wait for a platform's TCP and TLS handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The client: compiled-in public roots only, [`CONNECT_TIMEOUT`].
pub fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .tls_certs_only(roots())
        .build()
}

fn roots() -> impl Iterator<Item = reqwest::Certificate> {
    webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .filter_map(|der| reqwest::Certificate::from_der(der).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every compiled-in root is usable, and the roots the platforms' API hosts chained to when
    /// this was written are among them (matched by the subject's common name in the DER):
    /// DigiCert Global Root G2 (graph.facebook.com, api.twilio.com), Go Daddy Root G2
    /// (api.telegram.org), Amazon Root CA 1 (slack.com), ISRG Root X1 (Let's Encrypt, common
    /// for media hosts).
    #[test]
    fn the_roots_parse_and_cover_the_platforms() {
        assert_eq!(
            roots().count(),
            webpki_root_certs::TLS_SERVER_ROOT_CERTS.len()
        );
        let has = |name: &str| {
            webpki_root_certs::TLS_SERVER_ROOT_CERTS
                .iter()
                .any(|der| der.windows(name.len()).any(|w| w == name.as_bytes()))
        };
        for root in [
            "DigiCert Global Root G2",
            "Go Daddy Root Certificate Authority - G2",
            "ISRG Root X1",
            "Amazon Root CA 1",
        ] {
            assert!(has(root), "{root} is missing");
        }
        client().expect("the client builds with the compiled-in roots");
    }
}
