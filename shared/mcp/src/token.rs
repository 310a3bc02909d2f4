//! Token strings: what a client sends, and the hash the store keeps.

use base64::Engine;
use sha2::{Digest, Sha256};

/// Every token starts with this, so a leaked one is recognisable (secret scanners, logs).
pub const TOKEN_PREFIX: &str = "brd_";

/// A new token: `brd_` and 32 random bytes from the operating system, base64url without
/// padding (256 bits: not guessable, nothing to stretch).
pub fn mint_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// The stored form of a token: hex SHA-256 of its exact text.
pub fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A token's public id (listed, used to revoke): `tok_` and 12 random hex digits.
pub fn new_token_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("tok_{}", &id[..12])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_prefixed() {
        let a = mint_token().unwrap();
        let b = mint_token().unwrap();
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 43);
        assert_ne!(a, b);
        assert!(
            a[TOKEN_PREFIX.len()..]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }

    #[test]
    fn the_hash_is_sha256_hex() {
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_ne!(new_token_id(), new_token_id());
    }
}
