// One real TypeScript MCP client against `portico demo`: lists tools and completes one call
// through to the demo backend, checking the result (not only the exit code).
// Usage: node ts_client.mjs <sdk1|client2> <mcp-url>
// Run by scripts/clients from a folder where the packages are installed.

const [mode, url] = process.argv.slice(2);
if (!url || !['sdk1', 'client2'].includes(mode)) {
  console.error('usage: ts_client.mjs <sdk1|client2> <mcp-url>');
  process.exit(2);
}

function check(cond, what) {
  if (!cond) {
    console.error(`${mode}: FAILED: ${what}`);
    process.exit(1);
  }
}

let client;
if (mode === 'sdk1') {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  client = new Client({ name: 'portico-clients-sdk1', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  check(client.getServerVersion()?.name === 'portico-demo', 'serverInfo names portico-demo');
} else {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  client = new Client(
    { name: 'portico-clients-client2', version: '1.0.0' },
    { versionNegotiation: { mode: 'auto' } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const version = client.getNegotiatedProtocolVersion();
  check(version === '2026-07-28', `auto negotiation picks 2026-07-28 (got ${version}, era ${client.getProtocolEra()})`);
}

const { tools } = await client.listTools();
const names = tools.map((t) => t.name);
check(names.length === 14, `14 demo tools listed (got ${names.length}: ${names.join(', ')})`);
check(names.includes('usp_services_list'), 'usp_services_list is listed');

const result = await client.callTool({ name: 'usp_services_list', arguments: {} });
check(result.isError !== true, `the call succeeds: ${JSON.stringify(result).slice(0, 300)}`);
const services = result.structuredContent?.services ?? [];
check(services.length === 3, `3 spa services from the backend (got ${services.length})`);
check(services.some((s) => s.id === 'MASSAGE-60'), 'MASSAGE-60 is among them');
check(/^3 services:/.test(result.content?.[0]?.text ?? ''), 'the summary text is served');

await client.close();
console.log(`${mode}: ok (${names.length} tools; usp_services_list -> ${services.map((s) => s.id).join(', ')})`);
