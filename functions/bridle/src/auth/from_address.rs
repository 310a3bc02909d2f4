//! Sign-ins per client address. A callback whose `state` matches its login cookie makes Bridle
//! call the identity provider: the code exchange, one HTTP request (on AWS to the Cognito user
//! pool's token endpoint, whose requests per second are a quota the whole pool shares). The
//! cookie is the sender's own, so a script can make as many such callbacks as it likes, each
//! with a made-up code. So each is counted first against the address it came from, in the
//! budget ledger (every instance shares it): past [`SIGN_INS`] (`BRIDLE_SIGN_INS_PER_MINUTE`,
//! default 20 a minute) it gets 429 with `Retry-After` and the provider is not called. Only
//! callbacks that would reach the provider are counted; refusing the others costs nothing.
//!
//! The address is the peer's on the local server and the Function URL's `sourceIp` on the web
//! Lambda (both set by the connection, never by a header the client writes), in the request's
//! [`ConnectInfo`]. An IPv4 address is counted alone; an IPv6 address by its /64, as one host
//! usually holds a whole /64. A request with no address (neither front set one) is counted
//! under one shared name, so it is limited too. The local server behind a reverse proxy sees
//! the proxy's address for everyone: the count is then the whole site's.

use super::SignIn;
use crate::server::web_rates::SIGN_INS;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use budget::RequestCount;
use std::net::{IpAddr, SocketAddr};

/// The name a client address is counted under: an IPv4 address whole, an IPv6 address by its
/// /64 (an IPv4 address mapped into IPv6 as the IPv4 address).
pub fn network(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let s = v6.segments();
                format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
            }
        },
    }
}

/// Count one callback about to call the provider, from `client` at `now_ms`: `None` lets it
/// through; `Some` is the page that turns it away, the provider not called — 429 with
/// `Retry-After` past the rate, 503 when the count cannot be kept (fail closed).
pub async fn refusal(
    sign_in: &SignIn,
    client: Option<&ConnectInfo<SocketAddr>>,
    now_ms: i64,
) -> Option<Response> {
    let from = client.map_or_else(|| "unknown".to_owned(), |c| network(c.0.ip()));
    let counted = sign_in
        .rate
        .count(
            sign_in.store.as_ref(),
            format!("sign_in_from:{from}"),
            SIGN_INS.window,
            now_ms,
        )
        .await;
    match counted {
        RequestCount::Allowed => None,
        RequestCount::Over { wait_s } => {
            tracing::warn!(%from, per_minute = sign_in.rate.per_minute, "sign-ins from one address over the rate; refused");
            let sentence = (SIGN_INS.over)(sign_in.rate.per_minute, wait_s);
            let mut page = super::routes::problem(StatusCode::TOO_MANY_REQUESTS, &sentence);
            page.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(wait_s));
            Some(page)
        }
        RequestCount::Unchecked => Some(super::routes::problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "Bridle could not finish signing you in just now. Please try again in a moment.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_address_counts_alone_and_an_ipv6_one_by_its_64() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(network(ip("203.0.113.9")), "203.0.113.9");
        assert_eq!(network(ip("::ffff:203.0.113.9")), "203.0.113.9");
        assert_eq!(
            network(ip("2001:db8:aa:bb:1:2:3:4")),
            network(ip("2001:db8:aa:bb:ffff::1")),
            "one host's /64 is one count"
        );
        assert_eq!(network(ip("2001:db8:aa:bb::1")), "2001:db8:aa:bb::/64");
        assert_ne!(
            network(ip("2001:db8:aa:bb::1")),
            network(ip("2001:db8:aa:bc::1"))
        );
    }
}
