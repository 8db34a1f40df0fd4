import type { SandboxChannel } from "./types.js";

/** The channel of a sandbox whose ports are those of `url`'s host (`http://host`, no port). */
export function sameNetwork(url: string): SandboxChannel {
  return { url, reach: (port) => Promise.resolve(port) };
}

/** `http://host` of a base URL (`http://127.0.0.1:2468/x` → `http://127.0.0.1`). */
export function hostUrl(baseUrl: string): string {
  const url = new URL(baseUrl);
  return `${url.protocol}//${url.hostname}`;
}
