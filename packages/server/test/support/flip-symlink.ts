// A hostile local process for race tests: swaps directory DIR for a symlink to OUTSIDE and back in
// a tight loop until the file STOP exists (checked every 100 swaps) or MAX_MS have passed, then
// prints how many swaps it made and exits. A stop file rather than a signal: the loop never yields
// to the event loop, so a signal handler would not run.
// Usage: node flip-symlink.js DIR OUTSIDE STOP MAX_MS
import { existsSync, renameSync, rmSync, symlinkSync, unlinkSync } from "node:fs";

const [dir, outside, stop, maxMs] = process.argv.slice(2);
if (!dir || !outside || !stop || !maxMs) throw new Error("usage: flip-symlink DIR OUTSIDE STOP MAX_MS");
const parked = `${dir}.parked`;
const deadline = Date.now() + Number(maxMs);

/** One swap: the directory out, the symlink in, the symlink out, the directory back. */
function flip(): void {
  renameSync(dir!, parked);
  symlinkSync(outside!, dir!);
  unlinkSync(dir!);
  renameSync(parked, dir!);
}

/** After a failed step (the server created the directory anew meanwhile): the original back in place. */
function restore(): void {
  if (!existsSync(parked)) return;
  rmSync(dir!, { recursive: true, force: true });
  renameSync(parked, dir!);
}

let flips = 0;
while (Date.now() < deadline && !existsSync(stop!)) {
  for (let i = 0; i < 100; i++) {
    try {
      flip();
      flips++;
    } catch {
      try {
        restore();
      } catch {
        // try again on the next round
      }
    }
  }
}
process.stdout.write(`${flips}\n`);
