// The TypeScript SDKs' own OAuth client providers against `portico demo --oauth-issuer`, each
// unmodified: a first request gets 401 with `resource_metadata`, the SDK discovers the
// authorization server, registers dynamically (or uses client credentials), gets a token for
// the MCP endpoint (RFC 8707 `resource`) and calls a tool through to the demo backend.
// Usage: node ts_oauth.mjs <sdk1|client2> <code|cc> <mcp-url> <issuer>
// `code`: authorization code + PKCE, the "browser" is fetch following the redirects (the
// authorization server answers login and consent itself); `cc`: client credentials.

const [mode, flow, url, issuer] = process.argv.slice(2);
if (!issuer || !['sdk1', 'client2'].includes(mode) || !['code', 'cc'].includes(flow)) {
  console.error('usage: ts_oauth.mjs <sdk1|client2> <code|cc> <mcp-url> <issuer>');
  process.exit(2);
}
const tag = `${mode}/${flow}`;
function check(cond, what) {
  if (!cond) {
    console.error(`${tag}: FAILED: ${what}`);
    process.exit(1);
  }
}

let Client, Transport, ClientCredentialsProvider;
if (mode === 'sdk1') {
  ({ Client } = await import('@modelcontextprotocol/sdk/client/index.js'));
  ({ StreamableHTTPClientTransport: Transport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js'));
  ({ ClientCredentialsProvider } = await import('@modelcontextprotocol/sdk/client/auth-extensions.js'));
} else {
  ({ Client, StreamableHTTPClientTransport: Transport, ClientCredentialsProvider } = await import('@modelcontextprotocol/client'));
}
const newClient = () => mode === 'sdk1'
  ? new Client({ name: 'portico-oauth-sdk1', version: '1.0.0' })
  : new Client({ name: 'portico-oauth-client2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });

// Where the authorization server sends the code; nothing listens there: the "browser" below
// stops at it.
const CALLBACK = 'http://127.0.0.1:9/callback';

class BrowserProvider {
  constructor() { this.authUrl = undefined; }
  get redirectUrl() { return CALLBACK; }
  get clientMetadata() {
    return {
      client_name: `portico oauth interop ${mode}`,
      redirect_uris: [CALLBACK],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() { return this.client; }
  saveClientInformation(c) { this.client = c; }
  tokens() { return this.saved; }
  saveTokens(t) { this.saved = t; }
  redirectToAuthorization(u) { this.authUrl = new URL(u); }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
}

// A user agent: follows redirects with a cookie jar until the callback; returns its parameters.
async function browse(start) {
  const jar = new Map();
  let at = start.href;
  for (let i = 0; i < 20; i++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const r = await fetch(at, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const c of r.headers.getSetCookie()) {
      const kv = c.split(';')[0];
      const eq = kv.indexOf('=');
      jar.set(kv.slice(0, eq), kv.slice(eq + 1));
    }
    const loc = r.headers.get('location');
    check(loc, `a redirect at ${at} (got ${r.status}: ${(await r.text()).slice(0, 300)})`);
    const next = new URL(loc, at);
    if (next.href.startsWith(CALLBACK)) {
      check(!next.searchParams.get('error'), `no error at the callback: ${next.search}`);
      return next.searchParams;
    }
    at = next.href;
  }
  check(false, 'the authorization finished within 20 redirects');
}

// portico itself refuses the SDK's first, token-less request with the challenge.
const first = await fetch(url, {
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
});
const challenge = first.headers.get('www-authenticate') ?? '';
check(first.status === 401 && challenge.includes('resource_metadata="'), `401 with resource_metadata (got ${first.status} ${challenge})`);

let provider;
let client = newClient();
if (flow === 'cc') {
  provider = new ClientCredentialsProvider({
    clientId: 'backoffice',
    clientSecret: 'backoffice-secret-0123456789abcdef',
    expectedIssuer: issuer,
    // A client-credentials client asks for what it needs up front.
    scope: 'demo:call demo:book',
  });
  await client.connect(new Transport(new URL(url), { authProvider: provider }));
} else {
  provider = new BrowserProvider();
  const transport = new Transport(new URL(url), { authProvider: provider });
  try {
    await client.connect(transport);
    check(false, 'the first connection needs authorization');
  } catch (e) {
    check(provider.authUrl, `the SDK asked for authorization (${e})`);
  }
  check(provider.client?.client_id, 'the client registered dynamically');
  const a = provider.authUrl.searchParams;
  check(a.get('code_challenge_method') === 'S256' && a.get('code_challenge'), 'PKCE S256');
  check(a.get('resource') === url, `resource indicator ${a.get('resource')}`);
  const params = await browse(provider.authUrl);
  check(params.get('iss') === issuer, `RFC 9207 iss at the callback (${params.get('iss')})`);
  // sdk1 takes the code; client2 the callback's parameters (it checks `iss`, RFC 9207).
  await (mode === 'sdk1' ? transport.finishAuth(params.get('code')) : transport.finishAuth(params));
  client = newClient();
  await client.connect(new Transport(new URL(url), { authProvider: provider }));
}

const token = provider.tokens()?.access_token;
check(token, 'an access token was obtained');
const [, payload] = token.split('.');
const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
check(claims.iss === issuer, `iss ${claims.iss}`);
check([claims.aud].flat().includes(url), `aud ${JSON.stringify(claims.aud)}`);
check(flow === 'cc' ? claims.client_id === 'backoffice' : claims.sub === 'alice', `principal ${claims.sub} / ${claims.client_id}`);
if (mode === 'client2') {
  const v = client.getNegotiatedProtocolVersion();
  check(v === '2026-07-28', `2026-07-28 negotiated (got ${v})`);
}
const { tools } = await client.listTools();
check(tools.some((t) => t.name === 'usp_services_list'), 'usp_services_list is listed');
const result = await client.callTool({ name: 'usp_services_list', arguments: {} });
check(result.isError !== true, `the call succeeds: ${JSON.stringify(result).slice(0, 300)}`);
const services = result.structuredContent?.services ?? [];
check(services.some((s) => s.id === 'MASSAGE-60'), 'the backend answered');
await client.close();
console.log(`${tag}: ok (401 -> discovery -> token for ${claims.aud} -> ${tools.length} tools; usp_services_list -> ${services.length} services)`);
