// The official TypeScript SDK client: start, then one chat call with progress; prints one
// JSON line ({reply, progress, ms}). Used by interop/tests/test_resume.py behind a proxy that
// cuts the chat's response stream. Usage: node ts_chat.mjs URL LINE
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, line] = process.argv.slice(2);
const client = new Client({ name: "ts-interop", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
const start = await client.callTool({ name: "start", arguments: {} });
const handle = start._meta["turnscope/start"].handle;
let progress = 0;
const began = Date.now();
const result = await client.callTool(
  { name: "chat", arguments: { handle, line } },
  undefined,
  { timeout: 20000, onprogress: () => { progress += 1; } },
);
const ms = Date.now() - began;
console.log(JSON.stringify({ reply: result._meta["turnscope/turn"].reply, isError: !!result.isError, progress, ms }));
await transport.terminateSession();
await client.close();
