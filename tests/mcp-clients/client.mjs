// The official MCP TypeScript SDK client (npm `@modelcontextprotocol/sdk`) against Bridle's /mcp.
//
// Usage: node client.mjs URL TOKEN. Connects, lists the tools, calls a read tool, a write tool,
// and a write tool with invalid arguments; prints one JSON object with what it saw. Exits
// non-zero on a failure.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const textOf = (result) => result.content.map((block) => block.text ?? "").join("");

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "bridle-interop", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const read = await client.callTool({ name: "list_events", arguments: {} });
const write = await client.callTool({
  name: "create_event",
  arguments: { title: "Node Open", starts_at: "2030-06-01T09:00", venue: "Hall 3", capacity: 8 },
});
const invalid = await client.callTool({
  name: "create_event",
  arguments: { title: "X", capacity: "lots" },
});
console.log(
  JSON.stringify({
    server: client.getServerVersion()?.name ?? null,
    tools: tools.tools.map((t) => t.name).sort(),
    read: { is_error: Boolean(read.isError), text: textOf(read) },
    write: { is_error: Boolean(write.isError), structured: write.structuredContent ?? null },
    invalid: { is_error: Boolean(invalid.isError), text: textOf(invalid) },
  }),
);
await client.close();
