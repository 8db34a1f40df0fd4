import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseScript, ScriptError } from "../src/index.js";

describe("parseScript", () => {
  it("echoes a prompt without any command", () => {
    assert.deepEqual(parseScript("hello; world\nagain"), [
      { name: "echo", text: "echo: hello; world\nagain" },
    ]);
  });

  it("splits lines and semicolons, keeping json lines verbatim", () => {
    assert.deepEqual(parseScript('chunks 3 ab;  think  x  y\njson {"a": "b; c"}\nplain words'), [
      { name: "chunks", count: 3, text: "ab" },
      { name: "think", text: "x  y" },
      { name: "json", text: '{"a": "b; c"}' },
      { name: "echo", text: "plain words" },
    ]);
  });

  it("parses arguments with defaults", () => {
    assert.deepEqual(parseScript('crash; plan a | b |; tool edit fix it; ext _mock/ping {"n":1}'), [
      { name: "crash", code: 1 },
      { name: "plan", entries: ["a", "b"] },
      { name: "tool", kind: "edit", title: "fix it" },
      { name: "ext", method: "_mock/ping", params: { n: 1 } },
    ]);
  });

  for (const bad of ["chunks many", "stop later", "tool nope x", "mcp add [1]", "sleep -1", "ext _x {bad"]) {
    it(`rejects "${bad}" with a message naming the command`, () => {
      assert.throws(
        () => parseScript(bad),
        (e: unknown) => e instanceof ScriptError && e.message.includes(bad),
      );
    });
  }
});
