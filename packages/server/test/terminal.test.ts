import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { processesWith } from "./support/procs.js";
import { ProcessApi } from "./support/processes.js";

const TOKEN = "terminal-token";
const ALLOWED = "http://app.example";

describe("terminals (pseudo-terminal + WebSocket)", { timeout: 60_000 }, () => {
  let server: RunningServer;
  let api: ProcessApi;
  before(async () => {
    server = await startServer({
      token: TOKEN,
      args: ["--allow-origin", ALLOWED],
      config: { processes: { scrollbackBytes: 64, maxInputBytes: 1024, ticketTtlMs: 300 } },
    });
    api = new ProcessApi(server);
  });
  after(() => server.stop());

  it("runs on a real terminal: tty, window size, resize, Ctrl-C to the foreground job", async () => {
    const proc = await api.create({ command: "sh", tty: true, cols: 100, rows: 30 });
    assert.equal(proc.tty, true);
    const term = api.terminal(proc.id);
    await term.opened;
    term.type("tty; stty size\n");
    await term.until(/\/dev\/pts\/\d+\r\n30 100\r\n/);

    const resized = await api.call("POST", `/v2/processes/${proc.id}/terminal/resize`, {
      cols: 120,
      rows: 40,
    });
    assert.equal(resized.status, 200);
    term.type("stty size\n");
    await term.until("40 120\r\n");
    term.ws.send(JSON.stringify({ type: "resize", cols: 90, rows: 20 }));
    term.type("stty size\n");
    await term.until("20 90\r\n");
    assert.deepEqual([(await api.info(proc.id)).cols, (await api.info(proc.id)).rows], [90, 20]);

    term.type("sleep 4711.61\n");
    await waitFor(() => processesWith("4711.61").length > 0, 5000, "the foreground sleep");
    term.type("\x03");
    await term.until("^C");
    term.type("echo after=$?\n");
    await term.until("after=130");
    assert.deepEqual(processesWith("4711.61"), []);

    term.type("exit 7\n");
    assert.deepEqual(await term.closed, { code: 1000, reason: "process exited" });
    assert.deepEqual(term.messages.at(-1), { type: "exit", exitCode: 7, signal: null });
    assert.match(await api.text(proc.id), /40 120/, "terminal output is in the logs too");
  });

  it("serves several viewers; a late one gets the bounded scrollback first", async () => {
    const proc = await api.create({ command: "sh", tty: true });
    const first = api.terminal(proc.id);
    await first.opened;
    first.type("echo $((6*7))-marker; printf '%080d\\n' 0; echo $((100+1))-tail\n");
    await first.until("101-tail\r\n");
    const late = api.terminal(proc.id);
    await late.opened;
    await late.until("101-tail");
    assert.ok(!late.output.includes("42-marker"), "scrollback is bounded (64 bytes)");
    assert.ok(late.output.length <= 64 && late.output.startsWith("0000"), JSON.stringify(late.output));
    first.type("echo shared-$((1+1))\n");
    await Promise.all([first.until("shared-2"), late.until("shared-2")]);
    late.type("echo from-late-$((2+3))\n");
    await first.until("from-late-5");
    await api.call("DELETE", `/v2/processes/${proc.id}`);
    await Promise.all([first.closed, late.closed]);
  });

  it("authenticates the upgrade with the bearer header or a single-use ticket, never without", async () => {
    const proc = await api.create({ command: "sh", tty: true });
    const anonymous = api.terminal(proc.id, { headers: {} });
    await assert.rejects(anonymous.opened);
    assert.equal(anonymous.refused, 401);

    const { status, body } = await api.call<{ ticket: string }>(
      "POST",
      `/v2/processes/${proc.id}/terminal/ticket`,
    );
    assert.equal(status, 201);
    const withTicket = api.terminal(proc.id, { ticket: body.ticket });
    await withTicket.opened;
    const reused = api.terminal(proc.id, { ticket: body.ticket });
    await assert.rejects(reused.opened);
    assert.equal(reused.refused, 401, "a ticket is good for one upgrade");

    const other = await api.create({ command: "sh", tty: true });
    const elsewhere = (
      await api.call<{ ticket: string }>("POST", `/v2/processes/${other.id}/terminal/ticket`)
    ).body;
    const wrongProcess = api.terminal(proc.id, { ticket: elsewhere.ticket });
    await assert.rejects(wrongProcess.opened);
    assert.equal(wrongProcess.refused, 401);

    const stale = (await api.call<{ ticket: string }>("POST", `/v2/processes/${proc.id}/terminal/ticket`))
      .body;
    await new Promise((resolve) => setTimeout(resolve, 400)); // past ticketTtlMs (300 ms)
    const expired = api.terminal(proc.id, { ticket: stale.ticket });
    await assert.rejects(expired.opened);
    assert.equal(expired.refused, 401);
    for (const id of [proc.id, other.id]) await api.call("DELETE", `/v2/processes/${id}`);
  });

  it("checks Origin on the upgrade", async () => {
    const proc = await api.create({ command: "sh", tty: true });
    const ticket = async () =>
      (await api.call<{ ticket: string }>("POST", `/v2/processes/${proc.id}/terminal/ticket`)).body.ticket;
    const foreign = api.terminal(proc.id, {
      ticket: await ticket(),
      headers: { origin: "http://evil.example" },
    });
    await assert.rejects(foreign.opened);
    assert.equal(foreign.refused, 403);
    const allowed = api.terminal(proc.id, { ticket: await ticket(), headers: { origin: ALLOWED } });
    await allowed.opened;
    allowed.type("echo ok-$((3*3))\n");
    await allowed.until("ok-9");
    await api.call("DELETE", `/v2/processes/${proc.id}`);
  });

  it("refuses a process without a terminal (409), an unknown one (404), a plain GET (426), oversized input (1009)", async () => {
    const piped = await api.create({ command: "cat" });
    const notTty = api.terminal(piped.id);
    await assert.rejects(notTty.opened);
    assert.equal(notTty.refused, 409);
    const unknown = api.terminal("no-such-process");
    await assert.rejects(unknown.opened);
    assert.equal(unknown.refused, 404);
    const plain = await api.call("GET", `/v2/processes/${piped.id}/terminal`);
    assert.equal(plain.status, 426);

    const proc = await api.create({ command: "sh", tty: true });
    const term = api.terminal(proc.id);
    await term.opened;
    term.type("x".repeat(2000));
    assert.equal((await term.closed).code, 1009);
    for (const id of [piped.id, proc.id]) await api.call("DELETE", `/v2/processes/${id}`);
  });
});
