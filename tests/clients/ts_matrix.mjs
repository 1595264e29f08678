// The client matrix through one real TypeScript MCP client: lists the tools (so the SDK caches
// each outputSchema and validates structuredContent against it, as users' clients do), then makes
// every call of a JSON list and prints, per call, what the client handed back: the result, or
// the error it threw (a JSON-RPC error from the server, or the SDK's own -32602 when a
// structuredContent does not fit the outputSchema).
// Usage: node ts_matrix.mjs <sdk1|client2> <mcp-url> <calls.json>
// Run by tests/e2e/test_client_matrix.py from a folder where the packages are installed.
import { readFileSync } from 'node:fs';

const [mode, url, callsFile] = process.argv.slice(2);
if (!callsFile || !['sdk1', 'client2'].includes(mode)) {
  console.error('usage: ts_matrix.mjs <sdk1|client2> <mcp-url> <calls.json>');
  process.exit(2);
}
const calls = JSON.parse(readFileSync(callsFile, 'utf8'));

let client;
if (mode === 'sdk1') {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  client = new Client({ name: 'portico-matrix-sdk1', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
} else {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  client = new Client({ name: 'portico-matrix-client2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
}
const version = mode === 'sdk1' ? '2025-11-25' : client.getNegotiatedProtocolVersion();

const { tools } = await client.listTools();
const out = { version, tools: tools.map((t) => t.name), calls: [] };
for (const { name, arguments: args } of calls) {
  try {
    const result = await client.callTool({ name, arguments: args });
    out.calls.push({ result });
  } catch (e) {
    out.calls.push({ error: { code: e?.code ?? null, message: String(e?.message ?? e), data: e?.data ?? null } });
  }
}
await client.close();
console.log(JSON.stringify(out));
