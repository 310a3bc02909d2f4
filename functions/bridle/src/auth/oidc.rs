//! The OpenID Connect relying party, on the `openidconnect` crate: discovery, the authorization
//! URL (code flow with PKCE S256, a fresh state and nonce), the code exchange, and ID-token
//! verification (signature against the issuer's JWKS, `iss`, `aud`, `exp`, `nonce`; unsigned
//! tokens refused). The JWKS is cached; a token signed with a key id the cache does not know makes
//! one refetch (at most every [`JWKS_MIN_REFRESH`]), so a provider's key rotation needs no
//! restart, and the cache is refetched anyway once it is [`JWKS_MAX_AGE`] old.

use openidconnect::core::{
    CoreAuthPrompt, CoreAuthenticationFlow, CoreClient, CoreIdToken, CoreJsonWebKeySet,
    CoreProviderMetadata,
};
use openidconnect::http;
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, HttpRequest,
    HttpResponse, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    SignatureVerificationError,
};
use std::sync::RwLock;
use std::time::{Duration, Instant};

/// A key id the cached JWKS does not know triggers a refetch at most this often.
pub const JWKS_MIN_REFRESH: Duration = Duration::from_secs(10);
/// The cached JWKS is refetched when it is older than this.
pub const JWKS_MAX_AGE: Duration = Duration::from_secs(3600);
/// Every call to the provider has a deadline (DESIGN invariant 5).
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the provider is and who we are to it.
#[derive(Clone)]
pub struct OidcSettings {
    /// `BRIDLE_OIDC_ISSUER`.
    pub issuer: String,
    /// `BRIDLE_OIDC_CLIENT_ID`.
    pub client_id: String,
    /// `BRIDLE_OIDC_CLIENT_SECRET`; `None` for a public client (PKCE alone).
    pub client_secret: Option<String>,
    /// Where the provider sends the browser back: `<BRIDLE_PUBLIC_URL>/auth/callback`.
    pub redirect_url: String,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "set"))
            .field("redirect_url", &self.redirect_url)
            .finish()
    }
}

/// Why signing in failed. The user sees a calm page; this goes to the log.
#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    #[error("the OpenID Connect settings are not valid: {0}")]
    Settings(String),
    #[error("the identity provider could not be reached or answered badly: {0}")]
    Provider(String),
    #[error("the code exchange failed: {0}")]
    Exchange(String),
    #[error("the ID token was refused: {0}")]
    Token(#[from] ClaimsVerificationError),
    #[error("the ID token is malformed: {0}")]
    Malformed(String),
    #[error("the provider returned no ID token")]
    NoIdToken,
}

/// Who signed in, from a verified ID token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// The provider's subject (`sub`): stable per person at this issuer.
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
    /// When the provider last authenticated the person (`auth_time`, whole seconds, as ms);
    /// `None` when the token does not say.
    pub authenticated_at_ms: Option<i64>,
}

impl SignedIn {
    /// The provider authenticated the person before `at_ms` (a sign-out everywhere; 0: none):
    /// the whole second its `auth_time` names lies before it, so a person who authenticated in
    /// the second of the sign-out is not turned away. A token without `auth_time` cannot tell,
    /// and is not held to it.
    pub fn authenticated_before(&self, at_ms: i64) -> bool {
        at_ms > 0
            && self
                .authenticated_at_ms
                .is_some_and(|t| t.saturating_add(999) < at_ms)
    }
}

/// What the browser is sent to the provider with, and what we keep to finish the sign-in.
#[derive(Debug)]
pub struct Authorization {
    pub url: String,
    pub state: String,
    pub nonce: String,
    pub pkce_verifier: String,
}

struct Keys {
    metadata: CoreProviderMetadata,
    fetched: Instant,
}

/// The relying party, built once at start-up from discovery.
pub struct Oidc {
    settings: OidcSettings,
    http: reqwest::Client,
    keys: RwLock<Keys>,
    /// When the JWKS was last fetched again after start-up (`None`: not yet).
    refresh: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// reqwest as the `openidconnect` HTTP client, without following redirects (SSRF) and with a
/// deadline.
async fn send(client: &reqwest::Client, request: HttpRequest) -> Result<HttpResponse, OidcHttp> {
    let (parts, body) = request.into_parts();
    let response = client
        .request(parts.method, parts.uri.to_string())
        .headers(parts.headers)
        .body(body)
        .timeout(PROVIDER_TIMEOUT)
        .send()
        .await?;
    let mut builder = http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        builder = builder.header(name, value);
    }
    let body = response.bytes().await?.to_vec();
    builder.body(body).map_err(|e| OidcHttp(e.to_string()))
}

/// An HTTP failure talking to the provider.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OidcHttp(String);

impl From<reqwest::Error> for OidcHttp {
    fn from(e: reqwest::Error) -> Self {
        Self(e.to_string())
    }
}

impl Oidc {
    /// Discover the provider (metadata and keys). A provider that cannot be reached at
    /// start-up is a start-up error: better than a server whose sign-in button fails.
    pub async fn discover(settings: OidcSettings) -> Result<Self, OidcError> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| OidcError::Provider(e.to_string()))?;
        let issuer = IssuerUrl::new(settings.issuer.clone())
            .map_err(|e| OidcError::Settings(format!("BRIDLE_OIDC_ISSUER: {e}")))?;
        RedirectUrl::new(settings.redirect_url.clone())
            .map_err(|e| OidcError::Settings(format!("the redirect URL: {e}")))?;
        let client = http.clone();
        let metadata = CoreProviderMetadata::discover_async(issuer, &move |r| {
            let client = client.clone();
            async move { send(&client, r).await }
        })
        .await
        .map_err(|e| OidcError::Provider(error_chain(&e)))?;
        Ok(Self {
            settings,
            http,
            keys: RwLock::new(Keys {
                metadata,
                fetched: Instant::now(),
            }),
            refresh: tokio::sync::Mutex::new(None),
        })
    }

    fn client(
        &self,
    ) -> CoreClient<
        openidconnect::EndpointSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointNotSet,
        openidconnect::EndpointMaybeSet,
        openidconnect::EndpointMaybeSet,
    > {
        let metadata = self.keys.read().unwrap().metadata.clone();
        CoreClient::from_provider_metadata(
            metadata,
            ClientId::new(self.settings.client_id.clone()),
            self.settings.client_secret.clone().map(ClientSecret::new),
        )
        .set_redirect_uri(
            RedirectUrl::new(self.settings.redirect_url.clone())
                .expect("checked when the client was discovered"),
        )
    }

    /// A fresh authorization request: where to send the browser, and the secrets to keep.
    /// `again`: the provider is asked to authenticate the person again (`prompt=login`,
    /// `max_age=0`) rather than sign them in on a session it holds.
    pub fn authorize(&self, again: bool) -> Authorization {
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let client = self.client();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scope(Scope::new("email".into()))
            .add_scope(Scope::new("profile".into()))
            .set_pkce_challenge(challenge);
        if again {
            request = request
                .add_prompt(CoreAuthPrompt::Login)
                .set_max_age(Duration::ZERO);
        }
        let (url, state, nonce) = request.url();
        Authorization {
            url: url.to_string(),
            state: state.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
        }
    }

    /// Exchange the code (with the PKCE verifier) and verify the ID token against `nonce`.
    pub async fn finish(
        &self,
        code: &str,
        pkce_verifier: &str,
        nonce: &str,
    ) -> Result<SignedIn, OidcError> {
        let client = self.client();
        let http = self.http.clone();
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|e| OidcError::Provider(e.to_string()))?
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_owned()))
            .request_async(&move |r| {
                let http = http.clone();
                async move { send(&http, r).await }
            })
            .await
            .map_err(|e| OidcError::Exchange(error_chain(&e)))?;
        let token =
            openidconnect::TokenResponse::id_token(&response).ok_or(OidcError::NoIdToken)?;
        self.verify(token, nonce).await
    }

    /// Verify an ID token given as its compact text (used by [`Oidc::finish`]; public for tests
    /// of the verification rules).
    pub async fn verify_text(&self, token: &str, nonce: &str) -> Result<SignedIn, OidcError> {
        let token: CoreIdToken = token
            .parse()
            .map_err(|e: serde_json::Error| OidcError::Malformed(e.to_string()))?;
        self.verify(&token, nonce).await
    }

    async fn verify(&self, token: &CoreIdToken, nonce: &str) -> Result<SignedIn, OidcError> {
        let stale = self.keys.read().unwrap().fetched.elapsed() > JWKS_MAX_AGE;
        if stale {
            self.refetch_keys(Duration::ZERO).await?;
        }
        match self.check(token, nonce) {
            Err(OidcError::Token(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            ))) => {
                // Perhaps the provider rotated its keys: look once more, then decide.
                self.refetch_keys(JWKS_MIN_REFRESH).await?;
                self.check(token, nonce)
            }
            other => other,
        }
    }

    fn check(&self, token: &CoreIdToken, nonce: &str) -> Result<SignedIn, OidcError> {
        let client = self.client();
        let claims = token.claims(&client.id_token_verifier(), &Nonce::new(nonce.to_owned()))?;
        Ok(SignedIn {
            subject: claims.subject().as_str().to_owned(),
            email: claims.email().map(|e| e.as_str().to_owned()),
            email_verified: claims.email_verified().unwrap_or(false),
            name: claims
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.as_str().to_owned()),
            authenticated_at_ms: claims.auth_time().map(|t| t.timestamp_millis()),
        })
    }

    /// Fetch the JWKS again unless that happened less than `min_interval` ago.
    async fn refetch_keys(&self, min_interval: Duration) -> Result<(), OidcError> {
        let mut last = self.refresh.lock().await;
        if last.is_some_and(|t| t.elapsed() < min_interval) {
            return Ok(());
        }
        let uri = self.keys.read().unwrap().metadata.jwks_uri().clone();
        let http = self.http.clone();
        let jwks = CoreJsonWebKeySet::fetch_async(&uri, &move |r| {
            let http = http.clone();
            async move { send(&http, r).await }
        })
        .await
        .map_err(|e| OidcError::Provider(error_chain(&e)))?;
        {
            let mut keys = self.keys.write().unwrap();
            keys.metadata = keys.metadata.clone().set_jwks(jwks);
            keys.fetched = Instant::now();
        }
        *last = Some(Instant::now());
        tracing::info!("fetched the identity provider's signing keys again");
        Ok(())
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::SignedIn;

    fn at(authenticated_at_ms: Option<i64>) -> SignedIn {
        SignedIn {
            subject: "s".into(),
            email: None,
            email_verified: false,
            name: None,
            authenticated_at_ms,
        }
    }

    #[test]
    fn an_authentication_counts_as_before_a_sign_out_only_if_its_whole_second_is() {
        let out = 1_800_000_000_500;
        assert!(at(Some(1_799_999_999_000)).authenticated_before(out));
        // `auth_time` is whole seconds: the second of the sign-out may hold a later moment.
        assert!(!at(Some(1_800_000_000_000)).authenticated_before(out));
        assert!(!at(Some(1_800_000_001_000)).authenticated_before(out));
        assert!(!at(Some(0)).authenticated_before(0), "never signed out");
        assert!(
            !at(None).authenticated_before(out),
            "no auth_time: not held"
        );
    }
}
