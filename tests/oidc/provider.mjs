// A real OpenID Connect provider on loopback for Bridle's "Sign in with OpenID Connect" tests.
//
// It is panva's oidc-provider (OpenID Certified), configured as the smallest provider a
// Relying Party can sign in against with the authorization code flow and PKCE:
//
//   node tests/oidc/provider.mjs [port]
//
// Settings (argv wins over the environment for the port):
//   port / OIDC_PORT              port on 127.0.0.1; 0 or unset = a free one
//   OIDC_CLIENT_ID                the one client's id               (default "bridle")
//   OIDC_CLIENT_SECRET            its secret (a confidential client) (default "bridle-secret")
//   OIDC_REDIRECT_URIS            its redirect URIs, comma-separated (required)
//   OIDC_POST_LOGOUT_REDIRECT_URIS  where RP-initiated logout may return, comma-separated (optional)
//   OIDC_TOKEN_AUTH_METHOD        client_secret_basic (default) or client_secret_post
//   OIDC_AUTO_CONSENT             1 (default): no consent page, the login form is the only page;
//                                 0: oidc-provider's consent page ("Continue") follows the login
//
// What a browser (or a test posting forms) sees: GET /auth?... redirects to /interaction/<uid>,
// an HTML form posting `prompt=login`, `login` and `password` to /interaction/<uid>. Any login
// is accepted, with any password (the form only insists on one). The account's `sub` is the
// login, `email` is `<login>@example.com` (`email_verified` true) and `name` the login with its
// first letter in upper case. After the form the browser lands on the client's redirect URI
// with `code`, `state` and `iss` (RFC 9207).
//
// When listening it prints exactly one line `READY <issuer>` on stdout (oidc-provider's own
// notices may print other lines around it; its warnings go to stderr). It exits on SIGTERM,
// SIGINT, or when its stdin is closed, so a test that dies without cleaning up (its end of the
// stdin pipe closes with it) leaves no provider behind. To run it by hand in the background,
// keep stdin open: `sleep infinity | node tests/oidc/provider.mjs 9000 &`.
//
// Plain HTTP on 127.0.0.1: nothing special is needed, and that is deliberate.
//  - The issuer is `http://127.0.0.1:<port>`; oidc-provider builds every endpoint URL from it.
//  - Cookies get the `Secure` attribute only when the request itself is HTTPS (oidc-provider
//    sets `secure` from Koa's `ctx.secure`), so over plain HTTP the session and interaction
//    cookies are sent back by browsers and cookie-jar clients alike. `proxy` stays off: there
//    is no reverse proxy, and with it on a client could fake `X-Forwarded-Proto`.
//  - http:// redirect URIs are refused only for the implicit flow; this client does the code
//    flow only (response type `code`), so `http://127.0.0.1:<port>/...` is accepted.
//  - Node 20: oidc-provider 9 prints "Unsupported runtime. Use Node.js v22.x LTS" on stderr
//    (it asks for Node 22 LTS; checked to work on Node 20.20); 9.x is the only line receiving
//    fixes (8.x is out of support), so that warning is expected and harmless here.
//
// Also deliberate, for a test provider:
//  - PKCE is required for every authorization request; oidc-provider 9 only supports S256.
//  - `conformIdTokenClaims: false`: the ID token carries the scope's claims (email,
//    email_verified, name) like Google's and most providers' do, so the Relying Party does not
//    need the userinfo endpoint (which works too).
//  - The cookie key and storage are fresh per process and in memory (the dev adapter); the
//    signing key is oidc-provider's quick-start one (see `jwks` below).
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import process from 'node:process';

import Provider from 'oidc-provider';

const list = (value) => (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);

const portArg = process.argv[2] ?? process.env.OIDC_PORT ?? '0';
const port = Number.parseInt(portArg, 10);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`provider.mjs: bad port ${JSON.stringify(portArg)}`);
  process.exit(2);
}
const clientId = process.env.OIDC_CLIENT_ID || 'bridle';
const clientSecret = process.env.OIDC_CLIENT_SECRET || 'bridle-secret';
const redirectUris = list(process.env.OIDC_REDIRECT_URIS);
if (redirectUris.length === 0) {
  console.error('provider.mjs: set OIDC_REDIRECT_URIS (comma-separated) to the client\'s redirect URIs');
  process.exit(2);
}
const postLogoutRedirectUris = list(process.env.OIDC_POST_LOGOUT_REDIRECT_URIS);
const tokenAuthMethod = process.env.OIDC_TOKEN_AUTH_METHOD || 'client_secret_basic';
const autoConsent = (process.env.OIDC_AUTO_CONSENT ?? '1') !== '0';

const capitalised = (login) => login.charAt(0).toUpperCase() + login.slice(1);

const server = createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(port, '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: redirectUris,
      post_logout_redirect_uris: postLogoutRedirectUris,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: tokenAuthMethod,
      id_token_signed_response_alg: 'RS256',
    },
  ],
  // No `jwks`: oidc-provider signs with its built-in quick-start key (one RS256 key, kid
  // `keystore-CHANGE-ME`, public in its source; it warns about it on stderr). RS256 is what every
  // Relying Party library accepts by default. Not a key generated here: RSA key generation at
  // start-up (crypto.generateKeyPairSync) now and then hung for over 30 s when several
  // providers started at once on a loaded machine.
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  pkce: { required: () => true },
  responseTypes: ['code'],
  scopes: ['openid', 'email', 'profile'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
  },
  conformIdTokenClaims: false,
  // Lifetimes in seconds (oidc-provider's defaults, set so it does not print a notice for each).
  ttl: {
    AuthorizationCode: 60,
    AccessToken: 3600,
    IdToken: 3600,
    Interaction: 3600,
    Session: 14 * 24 * 3600,
    Grant: 14 * 24 * 3600,
  },
  features: {
    // The built-in HTML login (and consent) pages; development-only by design, which is what
    // a test provider is. oidc-provider warns about it on stderr.
    devInteractions: { enabled: true },
  },
  async findAccount(_ctx, id) {
    return {
      accountId: id,
      async claims() {
        return { sub: id, email: `${id}@example.com`, email_verified: true, name: capitalised(id) };
      },
    };
  },
  // Auto-consent (oidc-provider's documented way to skip consent for a first-party client):
  // after the login form, a grant of everything this provider offers is made for the client,
  // so the consent prompt never shows.
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId
      || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) {
      return ctx.oidc.provider.Grant.find(grantId);
    }
    if (!autoConsent) {
      return undefined;
    }
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile');
    grant.addOIDCClaims(['sub', 'email', 'email_verified', 'name']);
    await grant.save();
    return grant;
  },
});

// Errors a test would otherwise only see as a redirect with `error=...`: say why on stderr.
for (const event of ['server_error', 'authorization.error', 'grant.error', 'end_session.error', 'userinfo.error']) {
  provider.on(event, (_ctx, err) => {
    console.error(`provider.mjs: ${event}: ${err?.name ?? ''} ${err?.message ?? err} ${err?.error_description ?? ''}`.trim());
  });
}

server.on('request', provider.callback());

let stopping = false;
function stop(why) {
  if (stopping) return;
  stopping = true;
  console.error(`provider.mjs: stopping (${why})`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on('SIGTERM', () => stop('SIGTERM'));
process.on('SIGINT', () => stop('SIGINT'));
process.stdin.on('end', () => stop('stdin closed'));
process.stdin.on('close', () => stop('stdin closed'));
process.stdin.on('error', () => stop('stdin error'));
process.stdin.resume();

process.stdout.write(`READY ${issuer}\n`);
