#!/usr/bin/env node
// The `sandbox-agent` command. It runs the self-contained bundle (bundle/, `npm run build` makes it)
// when that was built from the current compiled output: two files (entry, start chunk) instead of ~70
// modules starts faster and takes less memory. Otherwise, and before the first bundle, it runs the
// compiled output (dist/) so that development never runs stale code.
//
// The bundle is current when its stamp (bundle/VERSION, which the bundler writes or refreshes) is no
// older than the last compile of the server and of the mock agent it ships (their .tsbuildinfo,
// which `tsc -b` rewrites whenever it emits). An installed package has no .tsbuildinfo, so it runs
// the bundle. `node dist/src/cli.js` runs the compiled output directly (e.g. to debug it).
import { statSync } from "node:fs";

const modified = (relative) =>
  statSync(new URL(relative, import.meta.url), { throwIfNoEntry: false })?.mtimeMs;
const stamp = modified("../bundle/VERSION");
const bundleIsCurrent =
  stamp !== undefined &&
  modified("../bundle/sandbox-agent.mjs") !== undefined &&
  !(modified("../dist/.tsbuildinfo") > stamp) &&
  !(modified("../../mock-agent/dist/.tsbuildinfo") > stamp);

await import(bundleIsCurrent ? "../bundle/sandbox-agent.mjs" : "../dist/src/cli.js");
