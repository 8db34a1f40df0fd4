import { spawn, type ChildProcess } from "node:child_process";
import { stopChild } from "@sandbox-agent/testkit";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** The scripted model (a copy of the shared recipe's server): Anthropic, OpenAI and Gemini wire formats. */
export const fakeModelScript = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  "../../fixtures/fake-model-server.mjs",
);

export interface FakeModel {
  url: string;
  port: number;
  /** Each request the agent sent to the "model" (one JSON object per line of its log). */
  requests(): Array<Record<string, unknown>>;
  stop(): Promise<void>;
}

const PORT_MIN = 25000;
const PORT_MAX = 25099;

/** Starts the fake model on the first free port from `firstPort` on (the script accepts 25000-25099 only). */
export async function startFakeModel(firstPort: number, logDir: string): Promise<FakeModel> {
  for (let port = firstPort; port <= PORT_MAX && port >= PORT_MIN; port++) {
    const started = await tryPort(port, path.join(logDir, `fake-model-${port}.jsonl`));
    if (started) return started;
  }
  throw new Error(`no free port for the fake model from ${firstPort} to ${PORT_MAX}`);
}

function tryPort(port: number, log: string): Promise<FakeModel | undefined> {
  const child = spawn(
    process.execPath,
    [fakeModelScript, "--port", String(port), "--max-seconds", "900", "--log", log],
    {
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  return new Promise((resolve) => {
    let out = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve(undefined);
    }, 10_000);
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d;
      if (!out.includes("FAKE_MODEL_LISTENING")) return;
      clearTimeout(timer);
      resolve(handle(child, port, log));
    });
    child.once("exit", () => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
}

function handle(child: ChildProcess, port: number, log: string): FakeModel {
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests: () => {
      try {
        return readFileSync(log, "utf8")
          .split("\n")
          .filter(Boolean)
          .map((line) => JSON.parse(line) as Record<string, unknown>);
      } catch {
        return [];
      }
    },
    stop: () => stopChild(child),
  };
}
