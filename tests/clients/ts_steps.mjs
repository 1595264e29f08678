// A journey of dependent tool calls through one real TypeScript MCP client: lists the tools (so
// the SDK validates each structuredContent against the tool's outputSchema, as users' clients
// do), then makes the calls of a JSON list in order. A string argument `${name.path}` is replaced
// by the value at `path` (dot-separated) of the structuredContent of the earlier step saved `as`
// `name`. Prints, per step, the result or the error the client threw.
// Usage: node ts_steps.mjs <sdk1|client2> <mcp-url> <steps.json>
// Run by tests/e2e/test_ucp_shop.py from a folder where the packages are installed.
import { readFileSync } from 'node:fs';

const [mode, url, stepsFile] = process.argv.slice(2);
if (!stepsFile || !['sdk1', 'client2'].includes(mode)) {
  console.error('usage: ts_steps.mjs <sdk1|client2> <mcp-url> <steps.json>');
  process.exit(2);
}
const steps = JSON.parse(readFileSync(stepsFile, 'utf8'));

let client;
if (mode === 'sdk1') {
  const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
  const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
  client = new Client({ name: 'portico-steps-sdk1', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
} else {
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  client = new Client({ name: 'portico-steps-client2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
}
const version = mode === 'sdk1' ? '2025-11-25' : client.getNegotiatedProtocolVersion();

const saved = {};
function fill(value) {
  if (typeof value === 'string') {
    const m = /^\$\{(\w+)\.([\w.]+)\}$/.exec(value);
    if (!m) return value;
    let v = saved[m[1]];
    for (const part of m[2].split('.')) v = v?.[part];
    if (v === undefined) throw new Error(`no value for ${value}`);
    return v;
  }
  if (Array.isArray(value)) return value.map(fill);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v)]));
  return value;
}

const { tools } = await client.listTools();
const out = { version, tools: tools.map((t) => ({ name: t.name, inputSchema: t.inputSchema, outputSchema: t.outputSchema })), steps: [] };
for (const step of steps) {
  try {
    const result = await client.callTool({ name: step.name, arguments: fill(step.arguments) });
    if (step.as) saved[step.as] = result.structuredContent;
    out.steps.push({ name: step.name, result });
  } catch (e) {
    out.steps.push({ name: step.name, error: { code: e?.code ?? null, message: String(e?.message ?? e), data: e?.data ?? null } });
  }
}
await client.close();
console.log(JSON.stringify(out));
