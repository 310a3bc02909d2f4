//! `X-Hub-Signature-256`: HMAC-SHA256 of the raw body under the app secret.

use crate::{ChannelError, RawRequest};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The header Meta signs deliveries with (matched case-insensitively).
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

fn mac(app_secret: &[u8], body: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(app_secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// The header value Meta would send for `body`: `sha256=<lowercase hex>`. For tests and fakes.
pub fn sign(app_secret: &[u8], body: &[u8]) -> String {
    format!("sha256={}", hex::encode(mac(app_secret, body)))
}

/// Check the signature header against the raw body, in constant time.
pub(super) fn check_signature(
    app_secret: &[u8],
    request: &RawRequest<'_>,
) -> Result<(), ChannelError> {
    let given = request
        .header(SIGNATURE_HEADER)
        .ok_or(ChannelError::BadSignature("missing signature"))?;
    let given = given
        .trim()
        .strip_prefix("sha256=")
        .and_then(|h| hex::decode(h).ok())
        .filter(|g| g.len() == 32)
        .ok_or(ChannelError::BadSignature("malformed signature"))?;
    if app_secret.is_empty() {
        return Err(ChannelError::BadSignature("no app secret configured"));
    }
    if mac(app_secret, request.body)
        .as_slice()
        .ct_eq(&given)
        .into()
    {
        Ok(())
    } else {
        Err(ChannelError::BadSignature("signature mismatch"))
    }
}
