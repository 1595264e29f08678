// A real OAuth 2.1 authorization server for the MCP authorization interop test: npm
// `oidc-provider` on 127.0.0.1 with dynamic client registration, authorization code + PKCE
// (login and consent answered automatically for the account `alice`), client credentials,
// resource indicators (RFC 8707) and JWT access tokens (ES256) for MCP endpoints on 127.0.0.1.
// Prints `issuer: URL` once it listens. Usage: node as.mjs
import Provider, { errors } from 'oidc-provider';
import * as jose from 'jose';
import http from 'node:http';

const SCOPES = 'demo:call demo:book';
const RESOURCE = /^http:\/\/127\.0\.0\.1:\d+\/mcp$/;

const server = http.createServer();
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const issuer = `http://127.0.0.1:${server.address().port}`;
const { privateKey } = await jose.generateKeyPair('ES256', { extractable: true });
const jwk = { ...(await jose.exportJWK(privateKey)), kid: 'as-es256', alg: 'ES256', use: 'sig' };

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  clients: [{
    client_id: 'backoffice',
    client_secret: 'backoffice-secret-0123456789abcdef',
    grant_types: ['client_credentials'],
    redirect_uris: [],
    response_types: [],
    scope: SCOPES,
  }],
  scopes: ['openid', 'offline_access', 'demo:call', 'demo:book'],
  findAccount: async (ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  pkce: { required: () => true },
  clientDefaults: { id_token_signed_response_alg: 'ES256' },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx, resource) => {
        if (!RESOURCE.test(resource)) throw new errors.InvalidTarget();
        return {
          scope: SCOPES,
          audience: resource,
          accessTokenTTL: 300,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});

// Login and consent, answered at once: alice logs in and grants what is asked.
provider.use(async (ctx, next) => {
  const m = ctx.path.match(/^\/interaction\/([^/]+)$/);
  if (!m) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  let result;
  if (details.prompt.name === 'login') {
    result = { login: { accountId: 'alice' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    const d = details.prompt.details;
    if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
    if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(d.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
  ctx.status = 303;
  ctx.redirect(to);
});

server.on('request', provider.callback());
console.log(`issuer: ${issuer}`);
