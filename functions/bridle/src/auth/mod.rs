//! Sign-in for the web app. With `BRIDLE_OIDC_ISSUER` set, people sign in with OpenID Connect
//! (authorization code flow with PKCE, [`oidc`]); a session is an opaque random secret in an
//! `HttpOnly; SameSite=Lax` cookie (`Secure` unless the server is plain HTTP on loopback), found
//! server-side by its SHA-256 ([`store::Sessions`]) until it expires or the user signs out;
//! every state-changing request carries the session's CSRF token ([`gate`]). Without it, the
//! local server is one local user with no sign-in, on loopback only.
//!
//! Who someone is comes from the verified ID token, never from the model or the request body:
//! the provider's subject is bound to an account (channel `oidc` in [`store::Identities`]); a
//! first sign-in finds a pre-created account by its verified e-mail, or creates one when
//! sign-up is open.

pub mod from_address;
pub mod gate;
pub mod oidc;
pub mod pending;
pub mod routes;

pub use gate::{CurrentUser, gate};
pub use oidc::{Oidc, OidcError, OidcSettings, SignedIn};

use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;
use store::{Account, CreateAccountError, Email, Session, Store, StoreError};
use transcript::UserId;

/// The identity channel that binds a provider's subject to an account.
pub const OIDC_CHANNEL: &str = "oidc";
/// The session cookie (its base name: see [`SignIn::cookie_name`]).
pub const SESSION_COOKIE: &str = "bridle_session";
/// The cookie that ties a sign-in in progress to the browser that started it (its base name).
pub const LOGIN_COOKIE: &str = "bridle_login";
/// How long a sign-in may take at the provider.
pub const LOGIN_TTL: Duration = Duration::from_secs(10 * 60);
/// How long a verified sign-in's state is remembered, so its callback cannot be replayed
/// (far longer than any provider keeps a code usable).
pub const USED_LOGIN_KEPT: Duration = Duration::from_secs(24 * 60 * 60);

/// Who may sign in (`BRIDLE_SIGNUP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signup {
    /// A first sign-in creates an account.
    Open,
    /// Only accounts an operator created (`bridle users add`) may sign in.
    Closed,
}

/// Everything sign-in needs, built once at start-up.
pub struct SignIn {
    pub oidc: Arc<Oidc>,
    pub store: Arc<dyn Store>,
    /// `BRIDLE_PUBLIC_URL`, without a trailing slash.
    pub public_url: String,
    pub signup: Signup,
    pub session_ttl: Duration,
    pub clock: budget::Clock,
    /// Sign-ins that may come back to one client address a minute ([`from_address`]).
    pub rate: budget::RequestRate,
    /// Reverse proxies whose `X-Forwarded-For` names the client ([`from_address`]).
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("oidc", &self.oidc)
            .field("public_url", &self.public_url)
            .field("signup", &self.signup)
            .field("session_ttl", &self.session_ttl)
            .finish_non_exhaustive()
    }
}

/// Why a signed-in person gets no session.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("no account is set up for this person and sign-up is closed")]
    NotInvited,
    #[error("the account is closed")]
    Closed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A new session: the cookie's secret (given to the browser once) and what is stored.
#[derive(Debug)]
pub struct NewSession {
    pub secret: String,
    pub session: Session,
}

/// URL-safe random text of `bytes` random bytes.
pub fn random_token(bytes: usize) -> Result<String, getrandom::Error> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf))
}

/// The stored key of a session secret.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

impl SignIn {
    /// Whether cookies get `Secure`: always, except for plain HTTP on a loopback host (a
    /// browser would drop a `Secure` cookie there).
    pub fn secure_cookies(&self) -> bool {
        !is_plain_loopback(&self.public_url)
    }

    /// A cookie's name here: with `Secure` cookies, `__Host-` and the base name, which a
    /// browser accepts only from this very host, `Secure`, with `Path=/` and no `Domain`. So a
    /// page on a sibling host (another function URL under `on.aws`, another subdomain of the
    /// operator's domain) cannot plant a session or a sign-in of its own choosing here (it
    /// could set a plain-named cookie for the parent domain, which would reach this host).
    pub fn cookie_name(&self, base: &str) -> String {
        match self.secure_cookies() {
            true => format!("__Host-{base}"),
            false => base.to_owned(),
        }
    }

    /// The account of the person the provider vouched for: bound before, found by verified
    /// e-mail, or new (sign-up open). A closed account gets no session.
    pub async fn account_for(&self, who: &SignedIn) -> Result<Account, Refused> {
        let store = self.store.as_ref();
        let now = (self.clock)();
        if let Some(user) = store.identity(OIDC_CHANNEL, &who.subject).await? {
            return usable(store.account(&user).await?);
        }
        // A provider that does not vouch for the address cannot claim an account by it.
        let email = who
            .email
            .as_deref()
            .filter(|_| who.email_verified)
            .and_then(|e| Email::parse(e).ok());
        if let Some(email) = &email
            && let Some(account) = store.account_by_email(email).await?
        {
            let bound = self.bind_subject(&who.subject, &account.user, now).await?;
            if bound != account.user {
                return usable(store.account(&bound).await?);
            }
            tracing::info!(user = %account.user, "signed in for the first time: bound by e-mail");
            return usable(Some(account));
        }
        if self.signup == Signup::Closed {
            return Err(Refused::NotInvited);
        }
        let name = who
            .name
            .clone()
            .or_else(|| email.as_ref().map(|e| e.as_str().to_owned()))
            .unwrap_or_else(|| "New user".to_owned());
        let user = UserId(uuid::Uuid::new_v4().to_string());
        let account = Account {
            email: email.clone(),
            created_at_ms: now,
            ..Account::new(user.clone(), name)
        };
        match store.create_account(&account).await {
            Ok(()) => {}
            // Another first sign-in with this address won the race: use its account.
            Err(CreateAccountError::EmailTaken(email)) => {
                let account = store.account_by_email(&email).await?;
                if let Some(a) = &account {
                    let bound = self.bind_subject(&who.subject, &a.user, now).await?;
                    if bound != a.user {
                        return usable(store.account(&bound).await?);
                    }
                }
                return usable(account);
            }
            Err(CreateAccountError::UserTaken(_)) => {
                return Err(Refused::Store(StoreError::Conflict {
                    what: "a fresh user id".into(),
                }));
            }
            Err(CreateAccountError::Store(e)) => return Err(e.into()),
        }
        // Crash story: an account without its binding is found by e-mail next time (or, with
        // no e-mail, a second account is made: harmless, and the operator can close it).
        let bound = self.bind_subject(&who.subject, &user, now).await?;
        if bound != user {
            // Another first sign-in of this person, at the same moment, bound theirs first:
            // this one's account is left unbound (as after a crash here), and unused.
            tracing::info!(user = %bound, "a first sign-in raced another of the same person; using theirs");
            return usable(store.account(&bound).await?);
        }
        tracing::info!(user = %user, "account created at first sign-in");
        Ok(account)
    }

    /// Bind the provider's `subject` to `user` unless it is bound already (another first
    /// sign-in of the same person at once won): the user it is bound to now.
    async fn bind_subject(
        &self,
        subject: &str,
        user: &UserId,
        now: i64,
    ) -> Result<UserId, StoreError> {
        let store = self.store.as_ref();
        match store
            .bind_identity_if(OIDC_CHANNEL, subject, user, None, now)
            .await
        {
            Ok(()) => Ok(user.clone()),
            Err(StoreError::Conflict { .. }) => store
                .identity(OIDC_CHANNEL, subject)
                .await?
                .ok_or_else(|| StoreError::Conflict {
                    what: "a sign-in's binding, unbound again at once".into(),
                }),
            Err(e) => Err(e),
        }
    }

    /// Start a session for `user`.
    ///
    /// `now` is when the sign-in's callback began, before it read the account: a sign-out
    /// everywhere made while it ran (which the account it read did not show) ends this session
    /// too, as one started at or before it. (A callback that read a sign-out it passed, the
    /// provider having authenticated the person after it, starts past that sign-out's cut.)
    pub async fn start_session(&self, user: &UserId, now: i64) -> Result<NewSession, StoreError> {
        let unavailable = |e: getrandom::Error| StoreError::Unavailable(Box::new(e));
        let secret = random_token(32).map_err(unavailable)?;
        let session = Session {
            id_hash: hash_secret(&secret),
            user: user.clone(),
            csrf: random_token(24).map_err(unavailable)?,
            created_at_ms: now,
            expires_at_ms: now + self.session_ttl.as_millis() as i64,
        };
        self.store.put_session(&session).await?;
        Ok(NewSession { secret, session })
    }
}

fn usable(account: Option<Account>) -> Result<Account, Refused> {
    match account {
        Some(a) if a.status == store::AccountStatus::Closed => Err(Refused::Closed),
        Some(a) => Ok(a),
        // Bound to an account that is gone: treat as not invited.
        None => Err(Refused::NotInvited),
    }
}

/// `http://` on 127.0.0.0/8, `[::1]` or `localhost`.
pub fn is_plain_loopback(url: &str) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    url.scheme() == "http"
        && match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d == "localhost",
            None => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_stored_as_hashes() {
        let (a, b) = (random_token(32).unwrap(), random_token(32).unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43, "32 bytes, base64url without padding");
        assert_eq!(hash_secret(&a).len(), 64);
        assert_ne!(hash_secret(&a), a);
    }

    #[test]
    fn plain_loopback_is_only_http_on_this_machine() {
        assert!(is_plain_loopback("http://127.0.0.1:8080"));
        assert!(is_plain_loopback("http://localhost:8080/"));
        assert!(is_plain_loopback("http://[::1]:8080"));
        assert!(!is_plain_loopback("https://127.0.0.1:8080"));
        assert!(!is_plain_loopback("http://bridle.example"));
        assert!(!is_plain_loopback("http://10.0.0.5:8080"));
    }
}
