//! `X-Hub-Signature-256`: HMAC-SHA256 of the raw body under the app secret.

use crate::signature::{given_digest, hmac_sha256, same};
use crate::{ChannelError, RawRequest};

/// The header Meta signs deliveries with (matched case-insensitively).
pub const SIGNATURE_HEADER: &str = "x-hub-signature-256";

fn mac(app_secret: &[u8], body: &[u8]) -> [u8; 32] {
    hmac_sha256(app_secret, &[body])
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
    let given = given_digest(request, SIGNATURE_HEADER, "sha256=")?;
    if app_secret.is_empty() {
        return Err(ChannelError::BadSignature("no app secret configured"));
    }
    if same(&mac(app_secret, request.body), &given) {
        Ok(())
    } else {
        Err(ChannelError::BadSignature("signature mismatch"))
    }
}
