import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startProxy, waitFor, type CuttableProxy } from "@sandbox-agent/testkit";
import { WebSocket as NodeWebSocket } from "ws";
import {
  SandboxAgentHttpError,
  type LogEvent,
  type Terminal,
  type WebSocketConstructor,
} from "../src/index.js";
import { useServer } from "./helpers.js";

const fixture = useServer();

/** Reads a terminal's output until `pattern` shows up; returns everything read so far. */
async function readUntil(terminal: Terminal, pattern: RegExp, seen: { text: string }): Promise<string> {
  const reader = terminal.readable.getReader();
  const decoder = new TextDecoder();
  try {
    while (!pattern.test(seen.text)) {
      const { done, value } = await reader.read();
      if (done) throw new Error(`terminal closed before ${pattern}; got ${JSON.stringify(seen.text)}`);
      seen.text += decoder.decode(value, { stream: true });
    }
    return seen.text;
  } finally {
    reader.releaseLock();
  }
}

/** `ws`'s WebSocket used the way a browser's is: no headers, so the SDK has to use a ticket. */
const BrowserWebSocket = class extends NodeWebSocket {
  constructor(url: string, protocols?: string | string[]) {
    super(url, protocols);
  }
} as unknown as WebSocketConstructor;

describe("SDK processes", { timeout: 60_000 }, () => {
  it("runs a command to completion: text, bytes, stdin, environment", async () => {
    const client = fixture.client({ autoConnect: false });
    const result = await client.processes.run({
      command: "sh",
      args: ["-c", 'read x; echo "$x $GREETING"; echo warn >&2; exit 2'],
      stdin: "hi\n",
      env: { GREETING: "there" },
    });
    assert.deepEqual(
      { ...result, durationMs: 0 },
      {
        exitCode: 2,
        signal: null,
        stdout: "hi there\n",
        stderr: "warn\n",
        truncated: false,
        timedOut: false,
        durationMs: 0,
      },
    );
    const bytes = new Uint8Array([0, 200, 255, 10]);
    const binary = await client.processes.run({ command: "cat", stdin: bytes, binary: true });
    assert.deepEqual(binary.stdout, bytes);
    await assert.rejects(client.processes.run({ command: "no-such-program-abc" }), (error: unknown) => {
      assert.ok(error instanceof SandboxAgentHttpError);
      assert.equal(error.status, 400);
      assert.equal(error.problem?.type, "https://sandboxagent.dev/problems/command-not-found");
      return true;
    });
  });

  it("manages a background process: input, logs, stop, kill, remove", async () => {
    const { processes } = fixture.client({ autoConnect: false });
    const cat = await processes.create({ command: "cat" });
    await processes.input(cat.id, "first\n");
    await waitFor(async () => (await processes.logs(cat.id)).entries.length > 0, 5000, "output");
    const logs = await processes.logs(cat.id);
    assert.equal(new TextDecoder().decode(logs.entries[0]!.data), "first\n");
    await processes.input(cat.id, "second\n", { eof: true });
    await waitFor(async () => (await processes.get(cat.id)).status === "exited", 5000, "exit");
    const rest = await processes.logs(cat.id, { since: logs.lastSeq });
    assert.deepEqual(
      rest.entries.map((e) => new TextDecoder().decode(e.data)),
      ["second\n"],
    );
    assert.equal(rest.exitCode, 0);
    assert.ok((await processes.list()).some((p) => p.id === cat.id));

    const stubborn = await processes.create({ command: "sh", args: ["-c", "trap '' TERM; sleep 600"] });
    assert.equal((await processes.stop(stubborn.id)).signal, "SIGKILL");
    const sleeper = await processes.create({ command: "sleep", args: ["600"] });
    assert.equal((await processes.kill(sleeper.id)).signal, "SIGKILL");
    for (const id of [cat.id, stubborn.id, sleeper.id]) await processes.remove(id);
    await assert.rejects(
      processes.get(cat.id),
      (e: unknown) => e instanceof SandboxAgentHttpError && e.status === 404,
    );
  });

  describe("following logs through a connection that drops", () => {
    let proxy: CuttableProxy;
    before(async () => {
      proxy = await startProxy(fixture.server.port);
    });
    after(() => proxy.stop());

    it("reconnects with Last-Event-ID and delivers every chunk once, then the exit", async () => {
      const viaProxy = fixture.client({ autoConnect: false, baseUrl: proxy.baseUrl });
      const direct = fixture.client({ autoConnect: false });
      const proc = await direct.processes.create({ command: "cat" });
      const events: LogEvent[] = [];
      const following = (async () => {
        for await (const event of viaProxy.processes.logs(proc.id, { follow: true })) events.push(event);
      })();
      const text = () =>
        events
          .map((e) => (e.type === "output" ? new TextDecoder().decode(e.data) : `<exit ${e.exitCode}>`))
          .join("");
      for (let i = 0; i < 6; i++) {
        await direct.processes.input(proc.id, `line ${i}\n`);
        await waitFor(() => text().includes(`line ${i}\n`), 5000, `line ${i}`);
        if (i % 2 === 0) assert.ok(proxy.cutStreams() >= 1, "a stream was cut");
        await direct.processes.input(proc.id, `gap ${i}\n`);
      }
      await direct.processes.input(proc.id, "", { eof: true });
      await following;
      const expected = [0, 1, 2, 3, 4, 5].map((i) => `line ${i}\ngap ${i}\n`).join("");
      assert.equal(text(), `${expected}<exit 0>`);
      const seqs = events.flatMap((e) => (e.type === "output" ? [e.seq] : []));
      assert.deepEqual(
        seqs,
        [...seqs].sort((a, b) => a - b),
        "in order",
      );
      assert.equal(new Set(seqs).size, seqs.length, "none twice");
      assert.ok(proxy.gets() >= 4, `reconnected (${proxy.gets()} GETs)`);
    });
  });

  it("opens a terminal in Node (ws, token in a header): output, input, resize, exit", async () => {
    const { processes } = fixture.client({ autoConnect: false });
    const proc = await processes.create({ command: "sh", tty: true, cols: 90, rows: 20 });
    const terminal = await processes.terminal(proc.id);
    const seen = { text: "" };
    terminal.write("tty; stty size\n");
    await readUntil(terminal, /\/dev\/pts\/\d+\r\n20 90\r\n/, seen);
    terminal.resize(132, 43);
    await waitFor(async () => (await processes.get(proc.id)).cols === 132, 5000, "resize");
    terminal.write("stty size; exit 5\n");
    await readUntil(terminal, /43 132\r\n/, seen);
    assert.deepEqual(await terminal.exited, { exitCode: 5, signal: null });
    assert.equal((await terminal.closed).code, 1000);
  });

  it("replays the scrollback to a new viewer, in Node and the browser way", async () => {
    const { processes } = fixture.client({ autoConnect: false });
    const proc = await processes.create({ command: "sh", args: ["-c", "echo ready; exec cat"], tty: true });
    await waitFor(
      async () => (await processes.get(proc.id)).stdoutBytes > 0,
      5000,
      "the process to print before any viewer attaches",
    );
    for (const options of [{}, { WebSocket: BrowserWebSocket }]) {
      const terminal = await processes.terminal(proc.id, options);
      terminal.write("typed\n");
      const seen = await readUntil(terminal, /typed\r\n/, { text: "" });
      // The replay is sent right after the upgrade: it must not be lost before the listeners exist.
      assert.match(seen, /^ready\r\n/);
      terminal.close();
      await terminal.closed;
    }
    await processes.remove(proc.id);
  });

  it("closes a viewer whose reader stops reading, while the process keeps writing", async () => {
    const { processes } = fixture.client({ autoConnect: false });
    const proc = await processes.create({
      command: "sh",
      args: ["-c", "while :; do echo tick; sleep 0.01; done"],
      tty: true,
    });
    const terminal = await processes.terminal(proc.id, { WebSocket: BrowserWebSocket });
    await readUntil(terminal, /tick/, { text: "" });
    // Output that arrives after the reader left must not be pushed into the cancelled stream.
    await terminal.readable.cancel();
    assert.equal((await terminal.closed).code, 1000);
    assert.equal((await processes.get(proc.id)).status, "running", "closing a viewer leaves the process");
    await processes.remove(proc.id);
  });

  it("opens a terminal the browser way (standard WebSocket, single-use ticket)", async () => {
    const { processes } = fixture.client({ autoConnect: false });
    const proc = await processes.create({ command: "sh", tty: true });
    const terminal = await processes.terminal(proc.id, { WebSocket: BrowserWebSocket });
    const writer = terminal.writable.getWriter();
    await writer.write("echo via-$((2*21))\n");
    await readUntil(terminal, /via-42/, { text: "" });
    terminal.close();
    assert.equal((await terminal.closed).code, 1000);
    assert.equal((await processes.get(proc.id)).status, "running", "closing a viewer leaves the process");

    const noTicket = new BrowserWebSocket(
      `${fixture.server.baseUrl.replace("http", "ws")}/v2/processes/${proc.id}/terminal`,
    );
    const refused = await new Promise<string>((resolve) =>
      noTicket.addEventListener("error", (e) => resolve(e.message ?? "")),
    );
    assert.match(refused, /401/);
    await processes.remove(proc.id);
  });
});
