// Runs chat() with an acpCompatible harness against the project's mock ACP agent
// in a local-process sandbox and prints every streamed AG-UI event.
// Usage (from the repo root): npx tsc -b && node examples/chat-mock/main.mjs ["<mock script>"]
import { fileURLToPath } from "node:url";
import { acpCompatible } from "@sandbox-agent/ai-acp";
import { defineSandbox, localProcessSandbox, withSandbox } from "@sandbox-agent/ai-sandbox";
import { chat, toolDefinition } from "@tanstack/ai";

const mockBin = fileURLToPath(new URL("../../packages/mock-agent/bin/mock-agent.js", import.meta.url));
const quote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;

const mock = acpCompatible({
  name: "mock",
  command: () => `${quote(process.execPath)} ${quote(mockBin)}`,
  planEventName: "mock.plan",
  emitDiff: true,
});

const sandbox = defineSandbox({ id: "example-chat-mock", provider: localProcessSandbox() });

const weather = toolDefinition({
  name: "weather",
  description: "Weather for a city",
  inputSchema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}).server(async ({ city }) => ({ city, forecast: "sunny" }));

const script =
  process.argv[2] ??
  'think planning the answer; plan look | answer; tool read README.md; mcp weather {"city":"Oslo"}; write hello.txt hi; echo all done';

try {
  for await (const event of chat({
    adapter: mock("mock-fast"),
    messages: [{ role: "user", content: script }],
    tools: [weather],
    middleware: [withSandbox(sandbox)],
  })) {
    const { type, ...rest } = event;
    console.log(type.padEnd(26), JSON.stringify(rest).slice(0, 160));
  }
} finally {
  await mock.dispose();
  await sandbox.dispose();
}
