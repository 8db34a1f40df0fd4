import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { withSandbox } from "@sandbox-agent/ai-sandbox";
import { fetchServerSentEvents, ChatClient } from "@tanstack/ai-client";
import { chat, chatParamsFromRequest, toServerSentEventsResponse } from "@tanstack/ai";
import { startAcpBridgeInSandbox, startAcpServerInSandbox, type AcpServerHandle } from "../src/index.js";
import {
  customs,
  freePort,
  mockCommand,
  ownWebSocketServerCommand,
  run,
  testBed,
  texts,
  type TestBed,
} from "./helpers.js";

describe("transports and delivery", { timeout: 300_000 }, () => {
  let bed: TestBed;
  before(async () => {
    bed = await testBed("ai-acp-transports");
  });
  after(() => bed.close());

  it("openTransport + startAcpServerInSandbox: the agent's own WebSocket ACP server, as in the harness docs", async () => {
    const port = await freePort();
    const servers: AcpServerHandle[] = [];
    // The documentation's example, with the mock agent's WebSocket server for `my-agent serve`.
    const myAgent = bed.harness({
      openTransport: async ({ sandbox, harnessCwd, signal }) => {
        const server = await startAcpServerInSandbox(sandbox, {
          port,
          cwd: harnessCwd,
          command: ownWebSocketServerCommand(port),
          readyMarker: "LISTENING",
          buildWsUrl: ({ channel, port }) => `${channel.url.replace(/^http/i, "ws")}:${port}`,
          ...(signal ? { signal } : {}),
        });
        servers.push(server);
        const ws = await server.connect(signal);
        return {
          kind: "stream",
          stream: ws.stream,
          dispose: async () => {
            ws.close();
            await server.dispose();
          },
        };
      },
    });
    const chunks = await run(bed, myAgent("m"), "echo over websocket; tool read x");
    assert.equal(texts(chunks), "over websocket");
    assert.equal(customs(chunks, "mock.session-id").length, 1);
    assert.equal(servers[0]?.url, `ws://127.0.0.1:${port}`);
    await myAgent.dispose();
    assert.equal(servers.length, 1);
    await assert.rejects(fetch(`http://127.0.0.1:${port}/`), "the server stopped with its transport");
  });

  it("startAcpServerInSandbox: a server that exits before its ready marker is an error with its output", async () => {
    const sandbox = await bed.sandbox.start();
    await assert.rejects(
      startAcpServerInSandbox(sandbox, {
        port: 1,
        command: "echo 'cannot bind' >&2; exit 3",
        readyMarker: "listening",
      }),
      /exited before ready \(code 3.*cannot bind/s,
    );
  });

  it("startAcpBridgeInSandbox: a stdio agent behind a WebSocket server started in the sandbox", async () => {
    const servers: Array<{ dispose(): Promise<void> }> = [];
    const mock = bed.harness({
      openTransport: async ({ sandbox, harnessCwd, signal }) => {
        const server = await startAcpBridgeInSandbox(sandbox, {
          command: mockCommand(),
          cwd: harnessCwd,
          signal,
        });
        servers.push(server);
        assert.match(server.url, /^ws:\/\/127\.0\.0\.1:\d+$/);
        const ws = await server.connect(signal);
        return {
          ...ws,
          dispose: async () => {
            await ws.dispose();
            await server.dispose();
          },
        };
      },
    });
    const chunks = await run(bed, mock("m"), "echo over websocket; tool read x");
    assert.equal(texts(chunks), "over websocket");
    await mock.dispose();
    assert.equal(servers.length, 1);
  });

  it("a crash behind the WebSocket server is reported, not hung", async () => {
    const mock = bed.harness({
      openTransport: async ({ sandbox, signal }) => {
        const server = await startAcpBridgeInSandbox(sandbox, { command: mockCommand(), signal });
        const ws = await server.connect(signal);
        return {
          ...ws,
          dispose: async () => {
            await ws.dispose();
            await server.dispose();
          },
        };
      },
    });
    const chunks = await run(bed, mock("m"), "echo x; crash 4");
    const last = chunks.at(-1) as unknown as { type: string; code: string };
    assert.equal(last.type, "RUN_ERROR");
    assert.equal(last.code, "agent_exited");
  });

  it("streams through toServerSentEventsResponse and reads back with @tanstack/ai-client", async () => {
    const mock = bed.harness();
    const http: Server = createServer((req, res) => {
      void (async () => {
        const body = await new Promise<string>((resolve) => {
          let data = "";
          req.on("data", (c: Buffer) => (data += c.toString()));
          req.on("end", () => resolve(data));
        });
        const request = new Request("http://local/api/chat", {
          method: "POST",
          body,
          headers: { "content-type": "application/json" },
        });
        const params = await chatParamsFromRequest(request);
        const response = toServerSentEventsResponse(
          chat({
            adapter: mock("m"),
            messages: params.messages,
            threadId: params.threadId,
            middleware: [withSandbox(bed.sandbox)],
          }),
        );
        res.writeHead(response.status, Object.fromEntries(response.headers));
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
        res.end();
      })();
    });
    await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
    try {
      const { port } = http.address() as AddressInfo;
      const client = new ChatClient({
        connection: fetchServerSentEvents(`http://127.0.0.1:${port}/api/chat`),
      });
      await client.sendMessage("echo via sse; tool read notes; think hmm");
      const assistant = client.getMessages().find((m) => m.role === "assistant");
      assert.ok(assistant, "the client rebuilt an assistant message");
      const text = assistant.parts.find((p) => p.type === "text");
      assert.equal(text?.type === "text" ? text.content : undefined, "via sse");
      assert.ok(
        assistant.parts.some((p) => p.type === "tool-call"),
        "tool call part",
      );
      assert.ok(
        assistant.parts.some((p) => p.type === "thinking"),
        "reasoning part",
      );
    } finally {
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    }
  });

  it("emitDiff reports new and changed files as file.changed events", async () => {
    const sandbox = await bed.sandbox.start();
    await sandbox.files.writeFile("existing.txt", "old\n");
    const mock = bed.harness({ emitDiff: true });
    const chunks = await run(bed, mock("m"), "write fresh/new.txt brand-new; write existing.txt changed");
    const changes = customs(chunks, "file.changed") as Array<{ type: string; path: string; diff: string }>;
    const created = changes.find((c) => c.path.endsWith("fresh/new.txt"));
    assert.equal(created?.type, "create");
    assert.match(created?.diff ?? "", /\+brand-new/);
    const changed = changes.find((c) => c.path.endsWith("existing.txt"));
    assert.equal(changed?.type, "change");
    assert.match(changed?.diff ?? "", /-old/);
    assert.equal(changes.length, 2);
  });
});
