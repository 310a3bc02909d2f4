//! Sign-ins per client address. A callback whose `state` matches its login cookie makes Bridle
//! call the identity provider: the code exchange, one HTTP request (on AWS to the Cognito user
//! pool's token endpoint, whose requests per second are a quota the whole pool shares). The
//! cookie is the sender's own, so a script can make as many such callbacks as it likes, each
//! with a made-up code. So each is counted first against the address it came from, in the
//! budget ledger (every instance shares it): past [`SIGN_INS`] (`BRIDLE_SIGN_INS_PER_MINUTE`,
//! default 20 a minute) it gets 429 with `Retry-After` and the provider is not called. Only
//! callbacks that would reach the provider are counted; refusing the others costs nothing.
//! One the provider verifies is given back ([`Counted::give_back`]): a made-up code never
//! verifies, so the count holds failed exchanges and those under way, and people signing in
//! from one address (an office, a carrier's NAT) do not use it up for each other.
//!
//! The address is the peer's on the local server and the Function URL's `sourceIp` on the web
//! Lambda (both set by the connection, never by a header the client writes), in the request's
//! [`ConnectInfo`]. An IPv4 address is counted alone; an IPv6 address by its /64, as one host
//! usually holds a whole /64. A request with no address (neither front set one) is counted
//! under one shared name, so it is limited too. Behind a reverse proxy the peer is the proxy,
//! for everyone: name it in `BRIDLE_TRUSTED_PROXIES` and a request from it is counted by the
//! address its `X-Forwarded-For` puts last that is not itself a trusted proxy (the one the
//! proxy saw; what a client wrote in the header before it is not trusted). Without that, the
//! count is the whole site's, and one script could keep everyone from signing in.

use super::SignIn;
use crate::server::web_rates::SIGN_INS;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
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

/// The client's address: the peer's, or for a peer in `trusted` (a reverse proxy), the last
/// address of `X-Forwarded-For` that is not itself a trusted proxy, read from the right (what
/// the proxies appended), never past an entry that is not an address (what a client wrote is
/// to the left of what the proxy appended: nothing it writes there moves the count). An IPv4
/// address mapped into IPv6 (a dual-stack listener) is the IPv4 address.
pub fn client_ip(peer: IpAddr, headers: &HeaderMap, trusted: &[IpAddr]) -> IpAddr {
    let peer = peer.to_canonical();
    if !trusted.contains(&peer) {
        return peer;
    }
    let values: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .map(|v| v.to_str().unwrap_or(""))
        .collect();
    for entry in values.iter().rev().flat_map(|v| v.rsplit(',')) {
        match entry.trim().parse::<IpAddr>().map(|ip| ip.to_canonical()) {
            Ok(ip) if trusted.contains(&ip) => continue,
            Ok(ip) => return ip,
            Err(_) => return peer,
        }
    }
    peer
}

/// One callback counted against its client address, let through to the provider.
#[derive(Debug)]
#[must_use = "a sign-in the provider verified is given back"]
pub struct Counted {
    scope: String,
    now_ms: i64,
}

impl Counted {
    /// The provider verified the code: this sign-in is a person's, not a made-up callback, and
    /// stops counting (so people behind one address, an office or a carrier's NAT, are not
    /// kept out by each other's sign-ins; only failed exchanges, and those under way, fill
    /// the count).
    pub async fn give_back(self, sign_in: &SignIn) {
        sign_in
            .rate
            .give_back(
                sign_in.store.as_ref(),
                self.scope,
                SIGN_INS.window,
                self.now_ms,
            )
            .await;
    }
}

/// Count one callback about to call the provider, from `client` (behind `headers`) at
/// `now_ms`: `Ok` lets it through (to be given back once the provider verifies it); `Err` is
/// the page that turns it away, the provider not called — 429 with `Retry-After` past the
/// rate, 503 when the count cannot be kept (fail closed).
pub async fn count(
    sign_in: &SignIn,
    client: Option<&ConnectInfo<SocketAddr>>,
    headers: &HeaderMap,
    now_ms: i64,
) -> Result<Counted, Response> {
    let from = client.map_or_else(
        || "unknown".to_owned(),
        |c| network(client_ip(c.0.ip(), headers, &sign_in.trusted_proxies)),
    );
    let scope = format!("sign_in_from:{from}");
    let counted = sign_in
        .rate
        .count(
            sign_in.store.as_ref(),
            scope.clone(),
            SIGN_INS.window,
            now_ms,
        )
        .await;
    let refused = match counted {
        RequestCount::Allowed => return Ok(Counted { scope, now_ms }),
        RequestCount::Over { wait_s } => {
            tracing::warn!(%from, per_minute = sign_in.rate.per_minute, "sign-ins from one address over the rate; refused");
            let sentence = (SIGN_INS.over)(sign_in.rate.per_minute, wait_s);
            let mut page = super::routes::problem(StatusCode::TOO_MANY_REQUESTS, &sentence);
            page.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(wait_s));
            page
        }
        RequestCount::Unchecked => super::routes::problem(
            StatusCode::SERVICE_UNAVAILABLE,
            "Bridle could not finish signing you in just now. Please try again in a moment.",
        ),
    };
    Err(refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_a_trusted_proxy_the_client_is_the_last_address_it_did_not_add_itself() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let headers = |xff: &[&str]| {
            let mut h = HeaderMap::new();
            for v in xff {
                h.append("x-forwarded-for", v.parse().unwrap());
            }
            h
        };
        let proxy = [ip("10.0.0.2"), ip("10.0.0.3")];
        // Not behind a trusted proxy: the header is the client's own words.
        assert_eq!(
            client_ip(ip("198.51.100.7"), &headers(&["203.0.113.9"]), &proxy),
            ip("198.51.100.7")
        );
        // Behind one: what the proxy saw, not what the client wrote before it.
        assert_eq!(
            client_ip(ip("10.0.0.2"), &headers(&["6.6.6.6, 203.0.113.9"]), &proxy),
            ip("203.0.113.9")
        );
        // Through two trusted proxies, in two header lines.
        assert_eq!(
            client_ip(
                ip("10.0.0.2"),
                &headers(&["6.6.6.6, 203.0.113.9", "10.0.0.3"]),
                &proxy
            ),
            ip("203.0.113.9")
        );
        // What the client wrote cannot cut the proxy's entry off: the last one counts.
        for spoof in [
            "1.2.3.4,",
            "1.2.3.4, junk",
            "junk",
            ",,",
            "1.2.3.4, 10.0.0.3",
        ] {
            assert_eq!(
                client_ip(
                    ip("10.0.0.2"),
                    &headers(&[&format!("{spoof}, 203.0.113.9")]),
                    &proxy
                ),
                ip("203.0.113.9"),
                "{spoof:?}"
            );
        }
        // A dual-stack listener sees the proxy as an IPv4 address mapped into IPv6.
        assert_eq!(
            client_ip(ip("::ffff:10.0.0.2"), &headers(&["203.0.113.9"]), &proxy),
            ip("203.0.113.9")
        );
        // Nothing usable: the proxy itself.
        assert_eq!(
            client_ip(ip("10.0.0.2"), &headers(&["not an address"]), &proxy),
            ip("10.0.0.2")
        );
        assert_eq!(
            client_ip(ip("10.0.0.2"), &HeaderMap::new(), &proxy),
            ip("10.0.0.2")
        );
    }

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
