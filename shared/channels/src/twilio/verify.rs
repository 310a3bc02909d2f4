//! `X-Twilio-Signature`: base64(HMAC-SHA1(auth token, URL + sorted parameters)).
//!
//! The signed string is the full URL Twilio requested (scheme, host, path and the raw query
//! string, exactly as configured in Twilio), followed by every POST parameter: names in byte
//! order, and for a name given more than once each distinct value in byte order, as
//! `name` + `value` with no separators, values form-*decoded*. Every parameter counts, known or
//! not: Twilio adds new ones without notice. As Twilio's own helper libraries do, the URL is tried
//! both with and without the scheme's default port (Twilio is not consistent about `:443`).

use super::form;
use crate::{ChannelError, RawRequest};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha1::Sha1;
use std::collections::{BTreeMap, BTreeSet};
use subtle::ConstantTimeEq;

/// The header carrying Twilio's signature.
pub const SIGNATURE_HEADER: &str = "x-twilio-signature";

/// The only body Twilio's Messaging webhooks send (a `charset` parameter may follow).
pub const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded";

/// The string Twilio signs for `url` and these decoded POST parameters.
pub fn signed_string(url: &str, params: &[(String, String)]) -> String {
    let mut by_name: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (name, value) in params {
        by_name.entry(name).or_default().insert(value);
    }
    let mut s = url.to_owned();
    for (name, values) in by_name {
        for value in values {
            s.push_str(name);
            s.push_str(value);
        }
    }
    s
}

fn mac(auth_token: &[u8], url: &str, params: &[(String, String)]) -> [u8; 20] {
    let mut mac = Hmac::<Sha1>::new_from_slice(auth_token).expect("HMAC takes any key length");
    mac.update(signed_string(url, params).as_bytes());
    mac.finalize().into_bytes().into()
}

/// What Twilio puts in `X-Twilio-Signature` for a request to `url` with these decoded POST
/// parameters (useful to sign test requests).
pub fn sign(auth_token: &[u8], url: &str, params: &[(String, String)]) -> String {
    STANDARD.encode(mac(auth_token, url, params))
}

/// The public URL Twilio requested: `base` (no trailing slash needed) + `path` + `?query`.
pub fn request_url(base: &str, path: &str, query: Option<&str>) -> String {
    let mut url = base.trim_end_matches('/').to_owned();
    if !path.starts_with('/') {
        url.push('/');
    }
    url.push_str(path);
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// `url` and the same URL with its port toggled: a port given is removed; none given gets the
/// scheme's default (`:443` for https, `:80` for http).
fn port_variants(url: &str) -> [Option<String>; 2] {
    let Some(scheme_end) = url.find("://") else {
        return [Some(url.to_owned()), None];
    };
    let host_start = scheme_end + 3;
    let host_end = url[host_start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| host_start + i);
    let authority = &url[host_start..host_end];
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let port_at = host_port
        .rfind(':')
        .filter(|&i| !host_port[i..].contains(']'))
        .filter(|&i| host_port[i + 1..].bytes().all(|b| b.is_ascii_digit()));
    let alternative = match port_at {
        Some(i) => {
            let cut = host_end - (host_port.len() - i);
            Some(format!("{}{}", &url[..cut], &url[host_end..]))
        }
        None => {
            let port = match &url[..scheme_end] {
                s if s.eq_ignore_ascii_case("https") => ":443",
                s if s.eq_ignore_ascii_case("http") => ":80",
                _ => return [Some(url.to_owned()), None],
            };
            Some(format!("{}{port}{}", &url[..host_end], &url[host_end..]))
        }
    };
    [Some(url.to_owned()), alternative]
}

/// Check `X-Twilio-Signature` on the raw request; see the module docs.
pub(crate) fn verify(
    auth_token: &[u8],
    public_base_url: &str,
    request: &RawRequest<'_>,
) -> Result<(), ChannelError> {
    let given = request
        .header(SIGNATURE_HEADER)
        .ok_or(ChannelError::BadSignature("missing signature"))?;
    let given = STANDARD
        .decode(given.trim())
        .ok()
        .filter(|g| g.len() == 20)
        .ok_or(ChannelError::BadSignature("malformed signature"))?;
    if let Some(ct) = request.header("content-type") {
        let mime = ct.split(';').next().unwrap_or_default().trim();
        if !mime.eq_ignore_ascii_case(FORM_CONTENT_TYPE) {
            return Err(ChannelError::BadSignature("body is not form-encoded"));
        }
    }
    let params = form::decode(request.body)
        .map_err(|_| ChannelError::BadSignature("body is not form-encoded"))?;
    let url = request_url(public_base_url, request.path, request.query);
    let mut matched = subtle::Choice::from(0);
    for candidate in port_variants(&url).into_iter().flatten() {
        matched |= mac(auth_token, &candidate, &params).ct_eq(given.as_slice());
    }
    if matched.into() {
        Ok(())
    } else {
        Err(ChannelError::BadSignature("signature mismatch"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn names_sort_bytewise_and_repeated_values_sort_and_dedupe() {
        let p = params(&[("b", "2"), ("B", "1"), ("a", "y"), ("a", "x"), ("a", "y")]);
        assert_eq!(signed_string("https://h/p", &p), "https://h/pB1axayb2");
    }

    /// The duplicate-parameter vector from Twilio's helper libraries' test suites
    /// (`twilio-python` `test_compute_signature_duplicate_multi_dict`, `twilio-php`).
    #[test]
    fn twilios_duplicate_parameter_vector() {
        let p = params(&[
            ("Sid", "CA123"),
            ("SidAccount", "AC123"),
            ("Digits", "5678"),
            ("Digits", "1234"),
            ("Digits", "1234"),
        ]);
        assert_eq!(
            sign(b"12345", "https://mycompany.com/myapp.php?foo=1&bar=2", &p),
            "IK+Dwps556ElfBT0I3Rgjkr1wJU="
        );
    }

    #[test]
    fn the_url_is_base_plus_path_plus_raw_query() {
        assert_eq!(
            request_url("https://h.example/", "/webhooks/twilio", Some("a=%20b&c")),
            "https://h.example/webhooks/twilio?a=%20b&c"
        );
        assert_eq!(
            request_url("https://h.example/prod", "webhooks/twilio", Some("")),
            "https://h.example/prod/webhooks/twilio"
        );
    }

    #[test]
    fn the_port_is_tried_both_ways() {
        let v = |u: &str| port_variants(u).into_iter().flatten().collect::<Vec<_>>();
        assert_eq!(
            v("https://h.example/x?y=1"),
            ["https://h.example/x?y=1", "https://h.example:443/x?y=1"]
        );
        assert_eq!(
            v("http://h.example:8080/x"),
            ["http://h.example:8080/x", "http://h.example/x"]
        );
        assert_eq!(v("http://[::1]/x"), ["http://[::1]/x", "http://[::1]:80/x"]);
        assert_eq!(
            v("https://h.example"),
            ["https://h.example", "https://h.example:443"]
        );
        assert_eq!(v("not a url"), ["not a url"]);
    }
}
