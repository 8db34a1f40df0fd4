import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { acpCompatible, acpCompatibleText, AcpHarnessError } from "../src/index.js";

describe("typed models and modelOptions", () => {
  it("accepts declared model ids, rejects unknown ones at compile time and at run time", () => {
    const pi = acpCompatible({
      name: "pi",
      models: ["pi-fast", "pi-pro"],
      modelOptions: {} as { reasoningEffort?: "low" | "high" },
      command: ({ model, harnessCwd, modelOptions }) =>
        `pi --acp -m ${model} --cwd ${harnessCwd}` +
        (modelOptions?.reasoningEffort ? ` --effort ${modelOptions.reasoningEffort}` : ""),
    });
    assert.equal(pi("pi-pro").model, "pi-pro");
    // @ts-expect-error — not in `models`
    assert.throws(() => pi("pi-ultra"), AcpHarnessError);
    // Base options are always there, merged with the declared ones.
    const options: Parameters<ReturnType<typeof pi>["chatStream"]>[0]["modelOptions"] = {
      reasoningEffort: "high",
      sessionId: "s",
      permissionMode: "acceptEdits",
    };
    assert.equal(options?.reasoningEffort, "high");
    // @ts-expect-error — not a declared option
    const wrong: Parameters<ReturnType<typeof pi>["chatStream"]>[0]["modelOptions"] = { effort: "high" };
    assert.ok(wrong);
  });

  it("acpCompatibleText is the one-shot form and any string works without `models`", () => {
    const adapter = acpCompatibleText("anything", {
      name: "acp",
      command: ({ model }) => `agent -m ${model}`,
    });
    assert.equal(adapter.name, "acp");
    assert.equal(adapter.model, "anything");
    assert.equal(adapter.combinedStructuredOutputSource(), "event");
  });
});
