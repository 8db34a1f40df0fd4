// CPU profiles of a window of a benchmark: a server started with `--inspect=127.0.0.1:PORT` is
// profiled through the inspector protocol from just before to just after `work()`, so the profile
// holds that phase only (`--cpu-prof` covers the whole process, start-up included).
import { writeFileSync } from "node:fs";
import WebSocket from "ws";

/** Runs `work()` with V8's sampling profiler on in the process behind `inspectPort`; returns the profile. */
export async function profileWindow(inspectPort, work, intervalUs = 250) {
  const [target] = await (await fetch(`http://127.0.0.1:${inspectPort}/json/list`)).json();
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  let seq = 0;
  const replies = new Map();
  ws.on("message", (data) => {
    const m = JSON.parse(data);
    replies.get(m.id)?.(m.result);
  });
  const send = (method, params = {}) =>
    new Promise((resolve) => {
      const id = ++seq;
      replies.set(id, resolve);
      ws.send(JSON.stringify({ id, method, params }));
    });
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: intervalUs });
  await send("Profiler.start");
  await work();
  const { profile } = await send("Profiler.stop");
  ws.close();
  return profile;
}

/** Where a frame's self time goes: V8's pseudo-frames, native functions, or a JavaScript module. */
function groupOf({ functionName, url }) {
  if (functionName.startsWith("(")) return functionName; // (idle), (program), (garbage collector)
  if (!url) return "native (C++ called from JS)";
  if (url.startsWith("node:")) return url.replace(/^node:internal\//, "node:");
  return "application JS";
}

/**
 * Self time per group and the heaviest functions of a profile, as text; `per` divides the busy
 * time (everything but idle) by a count of operations, e.g. the turns of the window.
 */
export function summarize(profile, per, file) {
  if (file) writeFileSync(file, JSON.stringify(profile));
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const interval = (profile.endTime - profile.startTime) / profile.samples.length; // µs
  const groups = new Map();
  const functions = new Map();
  for (const id of profile.samples) {
    const frame = byId.get(id).callFrame;
    const group = groupOf(frame);
    groups.set(group, (groups.get(group) ?? 0) + interval);
    if (group === "(idle)") continue;
    const name = `${frame.functionName || "(anonymous)"} ${frame.url.split("/").pop()}:${frame.lineNumber + 1}`;
    functions.set(name, (functions.get(name) ?? 0) + interval);
  }
  const busy = [...groups].reduce((sum, [g, us]) => (g === "(idle)" ? sum : sum + us), 0);
  const sorted = (map, n) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n);
  const pct = (us) => `${((us / busy) * 100).toFixed(1)} %`;
  return [
    `busy ${(busy / 1000).toFixed(0)} ms of ${((profile.endTime - profile.startTime) / 1000).toFixed(0)} ms` +
      ` (${(busy / per).toFixed(0)} µs per operation, main thread only)`,
    ...sorted(groups, 12)
      .filter(([g]) => g !== "(idle)")
      .map(([g, us]) => `  ${pct(us).padStart(7)}  ${g}`),
    "  heaviest functions (self time):",
    ...sorted(functions, 12).map(([f, us]) => `  ${pct(us).padStart(7)}  ${f}`),
  ].join("\n");
}
