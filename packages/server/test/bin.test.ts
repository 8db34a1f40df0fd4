import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { repoRoot, tempDir } from "@sandbox-agent/testkit";

const realBin = path.join(repoRoot, "packages/server/bin/sandbox-agent.js");

/**
 * The bin's choice between the bundle and the compiled output, on a copy of the package layout whose
 * two entries only say which one ran, with file times set by the test.
 */
function layout(): {
  run: () => string;
  touch: (file: string, secondsAgo: number) => void;
  remove: (file: string) => void;
} {
  const root = tempDir("server-bin-");
  const pkg = path.join(root, "packages/server");
  const file = (relative: string) => path.join(root, "packages", relative);
  for (const dir of ["server/bin", "server/bundle", "server/dist/src", "mock-agent/dist"])
    mkdirSync(file(dir), { recursive: true });
  copyFileSync(realBin, path.join(pkg, "bin/sandbox-agent.js"));
  writeFileSync(file("server/bundle/sandbox-agent.mjs"), 'process.stdout.write("bundle");\n');
  writeFileSync(file("server/dist/src/cli.js"), 'process.stdout.write("dist");\n');
  for (const stamp of ["server/bundle/VERSION", "server/dist/.tsbuildinfo", "mock-agent/dist/.tsbuildinfo"])
    writeFileSync(file(stamp), "x");
  const touch = (relative: string, secondsAgo: number): void => {
    const at = new Date(Date.now() - secondsAgo * 1000);
    utimesSync(file(relative), at, at);
  };
  return {
    run: () => execFileSync(process.execPath, [path.join(pkg, "bin/sandbox-agent.js")], { encoding: "utf8" }),
    touch,
    remove: (relative) => rmSync(file(relative), { recursive: true }),
  };
}

describe("bin/sandbox-agent.js", () => {
  it("runs the bundle when it was stamped after the last compile of the server and the mock agent", () => {
    const { run, touch } = layout();
    touch("server/dist/.tsbuildinfo", 60);
    touch("mock-agent/dist/.tsbuildinfo", 60);
    touch("server/bundle/VERSION", 10);
    assert.equal(run(), "bundle");
  });

  it("runs the compiled output when the server or the mock agent was compiled after the bundle", () => {
    const { run, touch } = layout();
    touch("server/bundle/VERSION", 60);
    touch("server/dist/.tsbuildinfo", 10);
    touch("mock-agent/dist/.tsbuildinfo", 100);
    assert.equal(run(), "dist");
    touch("server/dist/.tsbuildinfo", 100);
    touch("mock-agent/dist/.tsbuildinfo", 10);
    assert.equal(run(), "dist");
  });

  it("runs the bundle of an installed package: no .tsbuildinfo, every file of the same time", () => {
    const { run, touch, remove } = layout();
    remove("server/dist/.tsbuildinfo");
    remove("mock-agent");
    for (const file of ["server/bundle/VERSION", "server/bundle/sandbox-agent.mjs", "server/dist/src/cli.js"])
      touch(file, 3600);
    assert.equal(run(), "bundle");
  });

  it("runs the compiled output when there is no bundle, or no stamp", () => {
    const { run, touch, remove } = layout();
    touch("server/dist/.tsbuildinfo", 60);
    touch("mock-agent/dist/.tsbuildinfo", 60);
    remove("server/bundle/VERSION");
    assert.equal(run(), "dist");
    remove("server/bundle");
    assert.equal(run(), "dist");
  });
});
