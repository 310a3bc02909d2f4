//! One GET that follows redirects itself, hop by hop, so that each hop's host is checked before
//! it is contacted ([`Hosts`]) and credentials go only to the platform's own hosts.
//!
//! The client it runs on ([`client`]) follows no redirect and sends no `Referer`: a Telegram
//! file URL carries the bot token in its path, and reqwest's default policy would hand that URL
//! to the next host as the `Referer`.

use super::MediaError;
use super::hosts::{Access, Hosts};
use reqwest::{StatusCode, Url};
use std::time::{Duration, Instant};

/// Redirects followed before giving up.
pub(crate) const MAX_REDIRECTS: usize = 5;
/// How long to wait for a platform's TCP and TLS handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The credentials of one platform, put on a request only for its own hosts.
#[derive(Clone, Copy)]
pub(crate) enum Auth<'a> {
    /// In the URL already (Telegram's token is in the path the platform gave).
    None,
    Bearer(&'a str),
    Basic {
        user: &'a str,
        password: &'a str,
    },
}

impl Auth<'_> {
    fn apply(self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::None => request,
            Auth::Bearer(token) => request.bearer_auth(token),
            Auth::Basic { user, password } => request.basic_auth(user, Some(password)),
        }
    }
}

/// The media client: no redirects followed by reqwest, no `Referer`, compiled-in public roots
/// (as the worker's client: no read of the machine's certificate store).
pub(crate) fn client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .referer(false)
        .connect_timeout(CONNECT_TIMEOUT)
        .tls_certs_only(
            webpki_root_certs::TLS_SERVER_ROOT_CERTS
                .iter()
                .filter_map(|der| reqwest::Certificate::from_der(der).ok()),
        )
        .build()
}

/// GET `url`, following at most [`MAX_REDIRECTS`] redirects to hosts in `hosts`, all within
/// `timeout`. Answers the first response that is not a redirect (any status).
pub(crate) async fn get(
    http: &reqwest::Client,
    url: &str,
    hosts: &Hosts,
    auth: Auth<'_>,
    timeout: Duration,
) -> Result<reqwest::Response, MediaError> {
    let deadline = Instant::now() + timeout;
    let mut url = Url::parse(url).map_err(|_| MediaError::UntrustedUrl)?;
    for hop in 0..=MAX_REDIRECTS {
        let access = hosts.check(&url).inspect_err(|_| {
            // The host only: a path or query may carry a token. (Slack redirects to the
            // workspace's sign-in page when the app lacks the files:read scope.)
            if hop > 0 {
                tracing::warn!(
                    host = url.host_str().unwrap_or(""),
                    "a media download redirected off the platform's hosts; not followed"
                );
            }
        })?;
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(MediaError::Timeout)?;
        let mut request = http.get(url.clone()).timeout(left);
        if access == Access::WithCredentials {
            request = auth.apply(request);
        }
        let response = request.send().await.map_err(MediaError::from_http)?;
        let Some(next) = redirect_target(&response) else {
            return Ok(response);
        };
        url = next?;
    }
    Err(MediaError::Upstream {
        status: StatusCode::FOUND.as_u16(),
        what: "too many redirects",
    })
}

/// Where a redirect points, resolved against the URL that answered; `None` if it is not one.
fn redirect_target(response: &reqwest::Response) -> Option<Result<Url, MediaError>> {
    let status = response.status();
    let is_redirect = matches!(
        status,
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    );
    if !is_redirect {
        return None;
    }
    let next = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|location| response.url().join(location).ok())
        .ok_or(MediaError::Upstream {
            status: status.as_u16(),
            what: "a redirect without a usable Location",
        });
    Some(next)
}
