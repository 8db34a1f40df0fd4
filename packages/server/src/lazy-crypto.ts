import { createRequire } from "node:module";

let loaded: typeof import("node:crypto") | undefined;

/**
 * `node:crypto`, loaded on first use: it brings OpenSSL's set-up (~1 MiB of memory and a few ms),
 * which an idle server without a token never needs. Its users (ids of new connections and
 * processes, tickets, the token check) call it when they run.
 */
export function nodeCrypto(): typeof import("node:crypto") {
  return (loaded ??= createRequire(import.meta.url)("node:crypto") as typeof import("node:crypto"));
}
