// Loaded with `node --import` into a server under test (after module-log.ts): appends each V8 flag
// the server sets, as a line `flag FLAG`, to the file named by $MODULE_LOG_FILE, so that the log
// shows which modules had loaded when it set it. It loads `node:v8` at start, which the server
// itself does not: use it only where that does not matter.
import { appendFileSync } from "node:fs";
import v8 from "node:v8";

const file = process.env.MODULE_LOG_FILE;
const setFlags = v8.setFlagsFromString.bind(v8);
v8.setFlagsFromString = (flag: string): void => {
  if (file) appendFileSync(file, `flag ${flag}\n`);
  setFlags(flag);
};
