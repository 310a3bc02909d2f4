//! The webhook secret token: configured with `setWebhook(secret_token=…)`, echoed by Telegram in
//! `X-Telegram-Bot-Api-Secret-Token` on every delivery. It authenticates the sender of the
//! request, not the body: Telegram signs nothing.

use crate::{ChannelError, RawRequest};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The header Telegram puts the secret token in (names are matched case-insensitively).
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";
/// The longest secret token `setWebhook` accepts.
pub const MAX_SECRET_LEN: usize = 256;
/// The shortest secret token accepted here. It is all that tells Telegram's deliveries from
/// anyone's (Telegram signs no body), and a wrong one is answered at once, so a short token
/// can be guessed request by request; 32 characters of `setWebhook`'s 64 are 192 bits when
/// random (`openssl rand -hex 16` gives 32 hex digits, 128 bits).
pub const MIN_SECRET_LEN: usize = 32;

/// Why a configuration value was refused at start-up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// An empty secret would let any request through.
    #[error("the Telegram webhook secret token is empty")]
    EmptySecret,
    /// `setWebhook` takes at most 256 characters of `A-Z`, `a-z`, `0-9`, `_` and `-`; Telegram
    /// would refuse anything else, so no delivery could ever match.
    #[error(
        "the Telegram webhook secret token must be 32-256 characters of A-Z, a-z, 0-9, _ and -"
    )]
    InvalidSecret,
    /// Shorter than [`MIN_SECRET_LEN`]: it could be guessed.
    #[error(
        "the Telegram webhook secret token must be at least 32 characters (it is all that \
         authenticates Telegram's deliveries; e.g. `openssl rand -hex 16`)"
    )]
    ShortSecret,
    /// A bot token looks like `123456789:AA…` (digits, a colon, then `A-Z a-z 0-9 _ -`).
    #[error("the Telegram bot token is empty or malformed")]
    InvalidBotToken,
    /// The API base must be an `http://` or `https://` URL.
    #[error("the Telegram API base must be an http:// or https:// URL")]
    InvalidApiBase,
    /// A username is 5-32 characters of `A-Z a-z 0-9 _` (after an optional `@`): anything else
    /// is no bot's, so no `/command@bot` could name it and no `t.me` link would open it.
    #[error(
        "the Telegram bot username must be 5-32 characters of A-Z, a-z, 0-9 and _ (an @ before it is fine)"
    )]
    InvalidBotUsername,
}

/// The bot's username as written (`@bridlebot`, `bridlebot`, blank for none), without the `@`.
pub fn bot_username(written: Option<&str>) -> Result<Option<String>, ConfigError> {
    let Some(written) = written.map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(None);
    };
    let name = written.strip_prefix('@').unwrap_or(written);
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if (5..=32).contains(&name.len()) && name.chars().all(allowed) {
        Ok(Some(name.to_owned()))
    } else {
        Err(ConfigError::InvalidBotUsername)
    }
}

/// Check a secret token as `setWebhook` would accept it.
pub(crate) fn validate_secret(secret: &str) -> Result<(), ConfigError> {
    if secret.is_empty() {
        return Err(ConfigError::EmptySecret);
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if secret.len() > MAX_SECRET_LEN || !secret.chars().all(allowed) {
        return Err(ConfigError::InvalidSecret);
    }
    if secret.len() < MIN_SECRET_LEN {
        return Err(ConfigError::ShortSecret);
    }
    Ok(())
}

/// The header must be present exactly once and equal the secret, byte for byte. Both sides are
/// hashed before the constant-time comparison so that not even the length leaks.
pub(crate) fn check_secret(secret: &[u8], request: &RawRequest<'_>) -> Result<(), ChannelError> {
    let mut given = request
        .headers
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(SECRET_HEADER));
    let value = given
        .next()
        .ok_or(ChannelError::BadSignature("missing secret token"))?;
    if given.next().is_some() {
        return Err(ChannelError::BadSignature("secret token header repeated"));
    }
    let expected = Sha256::digest(secret);
    let got = Sha256::digest(value.1.as_bytes());
    if expected.as_slice().ct_eq(got.as_slice()).into() {
        Ok(())
    } else {
        Err(ChannelError::BadSignature("secret token mismatch"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_checked_like_set_webhook_does() {
        assert_eq!(validate_secret(""), Err(ConfigError::EmptySecret));
        assert_eq!(validate_secret("a b"), Err(ConfigError::InvalidSecret));
        assert_eq!(validate_secret("é"), Err(ConfigError::InvalidSecret));
        assert_eq!(
            validate_secret(&"a".repeat(257)),
            Err(ConfigError::InvalidSecret)
        );
        assert_eq!(validate_secret(&"a".repeat(256)), Ok(()));
        assert_eq!(validate_secret(&"Az09_-".repeat(6)), Ok(()));
        assert_eq!(validate_secret("Az09_-"), Err(ConfigError::ShortSecret));
        assert_eq!(
            validate_secret(&"a".repeat(MIN_SECRET_LEN - 1)),
            Err(ConfigError::ShortSecret)
        );
        assert_eq!(validate_secret(&"a".repeat(MIN_SECRET_LEN)), Ok(()));
    }
}
