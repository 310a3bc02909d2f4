//! The HMAC-SHA256 signature scheme several platforms share (the generic channel, WhatsApp,
//! Slack): a keyed hash over some parts of the request, sent as `<prefix><hex>` in a header and
//! compared in constant time.

use crate::{ChannelError, RawRequest};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// HMAC-SHA256 of the concatenated `parts` under `key`.
pub(crate) fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// The 32-byte digest in `header`, written as `<prefix><64 hex digits>`.
pub(crate) fn given_digest(
    request: &RawRequest<'_>,
    header: &str,
    prefix: &str,
) -> Result<Vec<u8>, ChannelError> {
    request
        .header(header)
        .ok_or(ChannelError::BadSignature("missing signature"))?
        .trim()
        .strip_prefix(prefix)
        .and_then(|h| hex::decode(h.trim()).ok())
        .filter(|g| g.len() == 32)
        .ok_or(ChannelError::BadSignature("malformed signature"))
}

/// Constant-time equality of two digests.
pub(crate) fn same(expected: &[u8], given: &[u8]) -> bool {
    expected.ct_eq(given).into()
}
