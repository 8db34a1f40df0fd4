import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { describe, it } from "node:test";
import { microtask } from "../src/runtime/microtask.js";

describe("microtask", () => {
  it("runs in the microtask queue, in order with queueMicrotask and promise reactions", async () => {
    const order: string[] = [];
    queueMicrotask(() => order.push("queueMicrotask 1"));
    microtask(() => order.push("microtask 1"));
    void Promise.resolve().then(() => order.push("then"));
    microtask(() => order.push("microtask 2"));
    queueMicrotask(() => order.push("queueMicrotask 2"));
    order.push("synchronous");
    await new Promise<void>((resolve) => setImmediate(resolve));
    assert.deepEqual(order, [
      "synchronous",
      "queueMicrotask 1",
      "microtask 1",
      "then",
      "microtask 2",
      "queueMicrotask 2",
    ]);
  });

  it("turns a throw into an uncaught exception, as queueMicrotask does, not an unhandled rejection", () => {
    const module = new URL("../src/runtime/microtask.js", import.meta.url).href;
    const script = `
      import { microtask } from ${JSON.stringify(module)};
      process.on("uncaughtException", (error) => console.log("uncaughtException", error.message));
      process.on("unhandledRejection", (error) => console.log("unhandledRejection", error.message));
      microtask(() => { throw new Error("boom"); });
      microtask(() => console.log("next microtask ran"));
    `;
    const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    assert.deepEqual(out.trim().split("\n"), ["next microtask ran", "uncaughtException boom"]);
  });
});
