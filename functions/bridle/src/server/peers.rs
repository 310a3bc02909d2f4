//! Each client's share of the server's connections: one address (an IPv6 address by its /64)
//! holds at most [`HttpLimits::max_per_peer`](super::limits::HttpLimits) at once, so one client
//! trickling its requests (a header every few seconds, a body a byte at a time) cannot take
//! every place and keep everyone else's browsers, sign-ins and platform webhooks waiting.
//! Loopback, private and link-local addresses (a reverse proxy or Docker's port forwarding on
//! the same host or network, a LAN) and the trusted proxies are not counted: everyone comes
//! through them.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// The name a client is counted under (as the sign-in rate counts them).
pub fn client_of(ip: IpAddr) -> String {
    crate::auth::from_address::network(ip)
}

/// The places held, per client.
#[derive(Debug)]
pub struct PerPeer {
    cap: usize,
    exempt: Vec<IpAddr>,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

/// One connection's place; given back when dropped.
#[derive(Debug)]
pub struct Place {
    client: Option<String>,
    held: Arc<Mutex<HashMap<String, usize>>>,
}

impl PerPeer {
    pub fn new(cap: usize, exempt: Vec<IpAddr>) -> Self {
        Self {
            cap: cap.max(1),
            exempt: exempt.into_iter().map(|ip| ip.to_canonical()).collect(),
            held: Arc::default(),
        }
    }

    /// A place for a connection from `ip`; `None` when that client holds its share already.
    pub fn take(&self, ip: IpAddr) -> Option<Place> {
        let ip = ip.to_canonical();
        let nearby = match ip {
            IpAddr::V4(v4) => v4.is_private() || v4.is_link_local(),
            IpAddr::V6(v6) => v6.is_unique_local() || v6.is_unicast_link_local(),
        };
        if ip.is_loopback() || nearby || self.exempt.contains(&ip) {
            return Some(Place {
                client: None,
                held: self.held.clone(),
            });
        }
        let client = client_of(ip);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let count = held.entry(client.clone()).or_default();
        if *count >= self.cap {
            return None;
        }
        *count += 1;
        Some(Place {
            client: Some(client),
            held: self.held.clone(),
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(count) = held.get_mut(&client) {
            *count -= 1;
            if *count == 0 {
                held.remove(&client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A client holds its share and no more; a place given back is taken again; one /64 is one
    /// client; loopback, private addresses (Docker's port forwarding) and the trusted proxies
    /// are not counted; nothing is kept for a client that holds nothing.
    #[test]
    fn each_client_holds_its_share_and_no_more() {
        // A proxy written as IPv4 mapped into IPv6 is that IPv4 address.
        let peers = PerPeer::new(2, vec![ip("::ffff:198.51.100.4")]);
        let a = peers.take(ip("203.0.113.7")).unwrap();
        let b = peers.take(ip("203.0.113.7")).unwrap();
        assert!(peers.take(ip("203.0.113.7")).is_none(), "past its share");
        assert!(peers.take(ip("203.0.113.8")).is_some(), "another client");
        drop(a);
        let c = peers.take(ip("203.0.113.7")).expect("a place given back");
        drop((b, c));

        let _one = peers.take(ip("2001:db8:aa:bb::1")).unwrap();
        let _two = peers.take(ip("2001:db8:aa:bb::2")).unwrap();
        assert!(peers.take(ip("2001:db8:aa:bb::3")).is_none(), "one /64");

        let local: Vec<_> = (0..10)
            .map(|_| peers.take(ip("127.0.0.1")).unwrap())
            .collect();
        let docker: Vec<_> = (0..10)
            .map(|_| peers.take(ip("172.17.0.1")).unwrap())
            .collect();
        let proxied: Vec<_> = (0..10)
            .map(|_| peers.take(ip("::ffff:198.51.100.4")).unwrap())
            .collect();
        assert_eq!(local.len() + docker.len() + proxied.len(), 30);
        drop((local, docker, proxied, _one, _two));
        assert!(peers.held.lock().unwrap().is_empty());
    }
}
