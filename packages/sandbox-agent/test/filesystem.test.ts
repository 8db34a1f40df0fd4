import assert from "node:assert/strict";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { tempDir } from "@sandbox-agent/testkit";
import { SandboxAgentHttpError } from "../src/index.js";
import { useServer } from "./helpers.js";

const root = tempDir("sdk-fs-root-");
const outside = tempDir("sdk-fs-outside-");
writeFileSync(path.join(outside, "secret.txt"), "do not read");
const fixture = useServer({ args: ["--fs-root", root] });

async function httpError(promise: Promise<unknown>): Promise<SandboxAgentHttpError> {
  const error = await promise.then(
    () => assert.fail("expected an HTTP error"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof SandboxAgentHttpError, String(error));
  return error;
}

describe("filesystem", () => {
  test("write, read, stat, list round trip", async () => {
    const { fs } = fixture.client({ autoConnect: false });
    const written = await fs.writeFile("/docs/a/readme.md", "# hello\n");
    assert.deepEqual(
      { ...written, mtime: "" },
      { name: "readme.md", path: "/docs/a/readme.md", type: "file", size: 8, mtime: "" },
    );
    assert.equal(
      readFileSync(path.join(root, "docs/a/readme.md"), "utf8"),
      "# hello\n",
      "landed inside the root",
    );
    assert.equal(await fs.readText("/docs/a/readme.md"), "# hello\n");
    assert.equal(
      await fs.readText("docs/a/readme.md"),
      "# hello\n",
      "relative paths are inside the root too",
    );
    const stat = await fs.stat("/docs/a");
    assert.equal(stat.type, "directory");
    await fs.writeFile("/docs/b.bin", new Uint8Array([0, 1, 2, 255]));
    assert.deepEqual([...(await fs.readFile("/docs/b.bin"))], [0, 1, 2, 255]);
    const flat = await fs.list("/docs");
    assert.deepEqual(
      flat.entries.map((e) => [e.path, e.type]),
      [
        ["/docs/a", "directory"],
        ["/docs/b.bin", "file"],
      ],
    );
    const deep = await fs.list("/docs", { recursive: true });
    assert.ok(deep.entries.some((e) => e.path === "/docs/a/readme.md"));
    assert.equal(deep.truncated, false);
    const limited = await fs.list("/docs", { recursive: true, limit: 1 });
    assert.equal(limited.entries.length, 1);
    assert.equal(limited.truncated, true);
    assert.equal(await fs.exists("/docs/b.bin"), true);
    assert.equal(await fs.exists("/docs/missing"), false);
  });

  test("streamed upload and ranged / streamed download", async () => {
    const { fs } = fixture.client({ autoConnect: false });
    const size = 3 * 1024 * 1024 + 7;
    const chunk = new Uint8Array(64 * 1024).map((_, i) => i % 251);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= size) return controller.close();
        const part = chunk.subarray(0, Math.min(chunk.length, size - sent));
        sent += part.length;
        controller.enqueue(part.slice());
      },
    });
    const stat = await fs.writeFile("/big.bin", body);
    assert.equal(stat.size, size);
    const range = await fs.readFile("/big.bin", { range: { start: 10, end: 20 } });
    assert.deepEqual(
      [...range],
      Array.from({ length: 10 }, (_, i) => (10 + i) % 251),
    );
    const tail = await fs.readFile("/big.bin", { range: { start: size - 3 } });
    assert.equal(tail.length, 3);
    let total = 0;
    const reader = (await fs.openRead("/big.bin")).getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.length;
    }
    assert.equal(total, size);
  });

  test("mkdir, move, remove and their conflicts", async () => {
    const { fs } = fixture.client({ autoConnect: false });
    await fs.mkdir("/m/x/y");
    assert.equal((await fs.stat("/m/x/y")).type, "directory");
    await fs.mkdir("/m/x/y");
    assert.equal((await httpError(fs.mkdir("/m/x/y", { recursive: false }))).status, 409);
    await fs.writeFile("/m/one.txt", "1");
    await fs.writeFile("/m/two.txt", "2");
    assert.equal((await httpError(fs.writeFile("/m/one.txt", "again", { overwrite: false }))).status, 409);
    assert.equal((await httpError(fs.move("/m/one.txt", "/m/two.txt"))).status, 409);
    const moved = await fs.move("/m/one.txt", "/m/x/uno.txt");
    assert.equal(moved.path, "/m/x/uno.txt");
    await fs.move("/m/x/uno.txt", "/m/two.txt", { overwrite: true });
    assert.equal(await fs.readText("/m/two.txt"), "1");
    assert.equal((await httpError(fs.remove("/m"))).status, 409, "non-empty directory needs recursive");
    await fs.remove("/m/two.txt");
    assert.equal(await fs.exists("/m/two.txt"), false);
    await fs.remove("/m", { recursive: true });
    assert.equal(existsSync(path.join(root, "m")), false);
    const missing = await httpError(fs.readText("/m/nothing"));
    assert.equal(missing.status, 404);
    assert.equal(missing.problem?.status, 404);
  });

  test("traversal attempts are refused and touch nothing outside the root", async () => {
    const { fs } = fixture.client({ autoConnect: false });
    const escape = path.relative(root, path.join(outside, "secret.txt"));
    const attempts: Array<[string, () => Promise<unknown>]> = [
      ["read ../", () => fs.readText(escape)],
      ["read /../", () => fs.readText(`/${escape}`)],
      ["read via a subdirectory", () => fs.readText(`/docs/../../${path.basename(outside)}/secret.txt`)],
      ["stat", () => fs.stat(`/../${path.basename(outside)}`)],
      ["list", () => fs.list("/..")],
      ["write", () => fs.writeFile(`/../${path.basename(outside)}/planted.txt`, "x")],
      ["mkdir", () => fs.mkdir(`/../${path.basename(outside)}/dir`)],
      ["move out", () => fs.move("/docs/b.bin", `/../${path.basename(outside)}/stolen.bin`)],
      ["remove", () => fs.remove(`/../${path.basename(outside)}/secret.txt`)],
    ];
    await fs.writeFile("/docs/b.bin", "b");
    for (const [name, attempt] of attempts) {
      const error = await httpError(attempt());
      assert.equal(error.status, 403, `${name}: ${error.message}`);
      assert.match(String(error.problem?.type), /path-escape/, name);
    }
    mkdirSync(path.join(root, "links"), { recursive: true });
    symlinkSync(outside, path.join(root, "links/out"));
    assert.equal((await httpError(fs.readText("/links/out/secret.txt"))).status, 403, "symlink escape");
    assert.equal((await httpError(fs.writeFile("/links/out/planted.txt", "x"))).status, 403);
    assert.equal(existsSync(path.join(outside, "planted.txt")), false);
    assert.equal(existsSync(path.join(outside, "stolen.bin")), false);
    assert.equal(readFileSync(path.join(outside, "secret.txt"), "utf8"), "do not read");
  });
});
