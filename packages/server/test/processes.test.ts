import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startServer, tempDir, waitFor, type RunningServer } from "@sandbox-agent/testkit";
import { processesWith } from "./support/procs.js";
import { ProcessApi, type ProcessInfo } from "./support/processes.js";

const TOKEN = "process-api-token";

/** Chunks of one stream cover it without gap or overlap, from offset 0. */
function assertContiguous(entries: Array<{ offset: number; data: string }>): void {
  let next = 0;
  for (const entry of entries) {
    assert.equal(entry.offset, next);
    next += Buffer.byteLength(entry.data);
  }
}

describe("process API: run to completion", () => {
  let server: RunningServer;
  let api: ProcessApi;
  before(async () => {
    server = await startServer({ token: TOKEN, env: { HOST_SECRET_FOR_TEST: "leaked" } });
    api = new ProcessApi(server);
  });
  after(() => server.stop());

  it("returns exit code, both streams and duration; stdin is fed and closed", async () => {
    const { status, body } = await api.call("POST", "/v2/processes/run", {
      command: "sh",
      args: ["-c", 'read line; echo "got $line"; echo oops >&2; exit 3'],
      stdin: "hello\n",
    });
    assert.equal(status, 200);
    assert.deepEqual(
      { ...body, durationMs: undefined },
      {
        exitCode: 3,
        signal: null,
        stdout: "got hello\n",
        stderr: "oops\n",
        encoding: "utf8",
        truncated: false,
        timedOut: false,
        durationMs: undefined,
      },
    );
    assert.equal(typeof body.durationMs, "number");
  });

  it("keeps bytes exact with base64", async () => {
    const bytes = Buffer.from([0, 255, 1, 254, 10]);
    const { body } = await api.call("POST", "/v2/processes/run", {
      command: "cat",
      stdin: bytes.toString("base64"),
      encoding: "base64",
    });
    assert.deepEqual(Buffer.from(body.stdout as string, "base64"), bytes);
  });

  it("runs with the minimal environment plus the request's variables", async () => {
    const { body } = await api.call("POST", "/v2/processes/run", { command: "env", env: { ADDED: "yes" } });
    const names = (body.stdout as string).split("\n").map((line) => line.split("=")[0]);
    assert.ok(names.includes("PATH") && names.includes("ADDED"), String(body.stdout));
    assert.ok(!names.includes("HOST_SECRET_FOR_TEST"), "host variables are not passed on");
    assert.ok(!names.includes("SANDBOX_AGENT_DATA_DIR"));
  });

  it("kills the whole process group at the timeout", async () => {
    const marker = "4711.25";
    const { body } = await api.call("POST", "/v2/processes/run", {
      command: "sh",
      args: ["-c", `sleep ${marker} & sleep ${marker}`],
      timeoutMs: 300,
    });
    assert.equal(body.timedOut, true);
    assert.equal(body.signal, "SIGKILL");
    await waitFor(() => processesWith(marker).length === 0, 5000, "the group to be gone");
  });

  it("drops output past maxOutputBytes and says so", async () => {
    const { body } = await api.call("POST", "/v2/processes/run", {
      command: "sh",
      args: ["-c", "head -c 100000 /dev/zero | tr '\\0' a"],
      maxOutputBytes: 1000,
    });
    assert.equal((body.stdout as string).length, 1000);
    assert.equal(body.truncated, true);
    assert.equal(body.exitCode, 0);
  });

  it("answers 400 saying what is wrong for an unknown command, directory or program", async () => {
    const unknown = await api.call("POST", "/v2/processes/run", { command: "no-such-command-xyz" });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.body.type, "https://sandboxagent.dev/problems/command-not-found");
    assert.match(unknown.body.detail as string, /no-such-command-xyz/);
    const cwd = await api.call("POST", "/v2/processes/run", { command: "true", cwd: "/no/such/dir" });
    assert.equal(cwd.status, 400);
    assert.match(cwd.body.detail as string, /\/no\/such\/dir does not exist/);
    const notExecutable = await api.call("POST", "/v2/processes/run", { command: "/etc/passwd" });
    assert.equal(
      notExecutable.body.type,
      "https://sandboxagent.dev/problems/not-executable",
      JSON.stringify(notExecutable.body),
    );
    const tooLong = await api.call("POST", "/v2/processes/run", { command: "true", timeoutMs: 10 ** 12 });
    assert.equal(tooLong.status, 400);
    assert.equal(tooLong.body.type, "https://sandboxagent.dev/problems/validation-failed");
  });

  it("requires the token like every endpoint", async () => {
    const response = await fetch(`${server.baseUrl}/v2/processes/run`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ command: "true" }),
    });
    assert.equal(response.status, 401);
  });
});

describe("process API: background processes and logs", () => {
  let server: RunningServer;
  let api: ProcessApi;
  before(async () => {
    server = await startServer({
      token: TOKEN,
      config: { processes: { maxLogBytes: 4096, killGraceMs: 400, maxInputBytes: 1024 } },
    });
    api = new ProcessApi(server);
  });
  after(() => server.stop());

  it("takes input, closes stdin, and reports the exit", async () => {
    const proc = await api.create({ command: "cat" });
    assert.equal(proc.status, "running");
    assert.equal((await api.input(proc.id, "one\n")).status, 200);
    const closed = await api.input(proc.id, "two\n", true);
    assert.equal((closed.body as unknown as ProcessInfo).stdinOpen, false);
    const exited = await api.exited(proc.id);
    assert.equal(exited.exitCode, 0);
    assert.equal(await api.text(proc.id), "one\ntwo\n");
    const late = await api.input(proc.id, "three\n");
    assert.equal(late.status, 409);
    assert.equal(late.body.type, "https://sandboxagent.dev/problems/process-exited");
  });

  it("follows the output, survives a cut connection and resumes with Last-Event-ID, losing nothing", async () => {
    const proc = await api.create({ command: "cat" });
    const first = await api.follow(proc.id);
    assert.equal(first.response.status, 200);
    for (const line of ["a\n", "b\n"]) await api.input(proc.id, line);
    await first.until(() => first.text() === "a\nb\n", "the first lines");
    const cursor = first.lastId()!;
    first.cut();
    await first.done;
    // Written while nobody follows: delivered on resume.
    for (const line of ["c\n", "d\n"]) await api.input(proc.id, line);
    const second = await api.follow(proc.id, { "last-event-id": cursor });
    await api.input(proc.id, "e\n", true);
    await second.done;
    assert.equal(second.text(), "c\nd\ne\n");
    assertContiguous([...first.output(), ...second.output()]);
    assert.deepEqual(second.exit(), { exitCode: 0, signal: null });
    // After the exit event there is nothing more: 204, which also stops an EventSource.
    const again = await api.follow(proc.id, { "last-event-id": second.lastId()! });
    assert.equal(again.response.status, 204);
    const foreign = await api.follow(proc.id, { "last-event-id": "999" });
    assert.equal(foreign.response.status, 410);
  });

  it("keeps the last maxLogBytes, answers 410 for a dropped cursor, and never drops what a follower has not read", async () => {
    const proc = await api.create({
      command: "sh",
      args: ["-c", "read go; head -c 200000 /dev/zero | tr '\\0' a; echo; echo done"],
    });
    const follower = await api.follow(proc.id);
    await api.input(proc.id, "go\n");
    await follower.done;
    const output = follower.output();
    assert.equal(follower.text(), "a".repeat(200000) + "\ndone\n");
    assertContiguous(output);
    const logs = await api.call<{ entries: unknown[]; droppedBytes: number }>(
      "GET",
      `/v2/processes/${proc.id}/logs`,
    );
    assert.ok(logs.body.droppedBytes >= 200000 - 4096, `dropped ${logs.body.droppedBytes}`);
    const dropped = await api.call("GET", `/v2/processes/${proc.id}/logs?since=1`);
    assert.equal(dropped.status, 410);
    assert.equal(typeof dropped.body.oldestSeq, "number");
  });

  it("stops a process that ignores SIGTERM with SIGKILL after the grace period; kill is immediate", async () => {
    const marker = "4711.31";
    const stubborn = await api.create({
      command: "sh",
      args: ["-c", `trap '' TERM; echo ready; sleep ${marker}`],
    });
    await waitFor(async () => (await api.text(stubborn.id)) === "ready\n", 5000, "ready");
    const started = Date.now();
    const stopped = await api.call<ProcessInfo>("POST", `/v2/processes/${stubborn.id}/stop`);
    assert.equal(stopped.body.status, "exited");
    assert.equal(stopped.body.signal, "SIGKILL");
    assert.ok(Date.now() - started >= 350, `escalated after ${Date.now() - started} ms`);
    assert.deepEqual(processesWith(marker), []);

    const polite = await api.create({ command: "sleep", args: ["4711.32"] });
    const termed = await api.call<ProcessInfo>("POST", `/v2/processes/${polite.id}/stop`);
    assert.equal(termed.body.signal, "SIGTERM");

    const victim = await api.create({ command: "sh", args: ["-c", "trap '' TERM; sleep 4711.33"] });
    const killed = await api.call<ProcessInfo>("POST", `/v2/processes/${victim.id}/kill`);
    assert.equal(killed.body.signal, "SIGKILL");
    assert.deepEqual(processesWith("4711.33"), []);
  });

  it("answers 404 for an unknown id, 413 for too much input", async () => {
    const missing = await api.call("GET", "/v2/processes/no-such-id");
    assert.equal(missing.status, 404);
    assert.equal(missing.body.type, "https://sandboxagent.dev/problems/unknown-process");
    assert.equal((await api.call("POST", "/v2/processes/no-such-id/input", { data: "x" })).status, 404);
    const proc = await api.create({ command: "cat" });
    const big = await api.input(proc.id, "x".repeat(2000));
    assert.equal(big.status, 413);
    assert.match(big.body.detail as string, /maxInputBytes/);
    assert.equal((await api.input(proc.id, "small\n")).status, 200, "the process is still usable");
    await api.call("DELETE", `/v2/processes/${proc.id}`);
  });

  it("DELETE kills the whole group and forgets the process", async () => {
    const marker = "4711.41";
    const proc = await api.create({ command: "sh", args: ["-c", `sleep ${marker} & sleep ${marker}`] });
    await waitFor(() => processesWith(marker).length >= 2, 5000, "both sleeps");
    const deleted = await api.call("DELETE", `/v2/processes/${proc.id}`);
    assert.equal(deleted.status, 204);
    assert.deepEqual(processesWith(marker), []);
    assert.equal((await api.call("GET", `/v2/processes/${proc.id}`)).status, 404);
    const listed = await api.call<{ processes: ProcessInfo[] }>("GET", "/v2/processes");
    assert.ok(!listed.body.processes.some((p) => p.id === proc.id));
  });

  it("is in the OpenAPI document", async () => {
    const { body } = await api.call<{ paths: Record<string, Record<string, unknown>> }>(
      "GET",
      "/v2/openapi.json",
    );
    for (const path of [
      "/v2/processes",
      "/v2/processes/run",
      "/v2/processes/{id}",
      "/v2/processes/{id}/input",
      "/v2/processes/{id}/stop",
      "/v2/processes/{id}/kill",
      "/v2/processes/{id}/logs",
      "/v2/processes/{id}/terminal",
      "/v2/processes/{id}/terminal/resize",
      "/v2/processes/{id}/terminal/ticket",
    ])
      assert.ok(body.paths[path], path);
  });
});

describe("process API: limits and shutdown", () => {
  it("answers 429 past maxProcesses, and the server's SIGTERM leaves no process behind", async () => {
    const workdir = tempDir("processes-shutdown-");
    const server = await startServer({
      args: ["--workdir", workdir],
      config: { processes: { maxProcesses: 3, killGraceMs: 300 } },
    });
    const api = new ProcessApi(server);
    const markers = ["4711.51", "4711.52", "4711.53"];
    await api.create({ command: "sleep", args: [markers[0]!] });
    await api.create({ command: "sh", args: ["-c", `trap '' TERM; sleep ${markers[1]}`] });
    await api.create({ command: "sh", args: ["-c", `sleep ${markers[2]} & sleep ${markers[2]}`], tty: true });
    const refused = await api.call("POST", "/v2/processes/run", { command: "true" });
    assert.equal(refused.status, 429);
    assert.match(refused.body.detail as string, /maxProcesses/);
    await waitFor(() => markers.every((m) => processesWith(m).length > 0), 5000, "every process");
    server.process.kill("SIGTERM");
    const [code] = await new Promise<[number | null]>((resolve) =>
      server.process.once("exit", (c) => resolve([c])),
    );
    assert.equal(code, 0, "the server stopped by itself");
    assert.deepEqual(markers.flatMap(processesWith), []);
  });
});
