import { readFileSync } from "node:fs";

/** Set by the bundler (`scripts/bundle.mjs`): a bundle has no package.json beside it. */
declare const SANDBOX_AGENT_BUNDLED_VERSION: string | undefined;

/** The server package's version: inlined in a bundle, else read once from its package.json. */
export const VERSION: string =
  typeof SANDBOX_AGENT_BUNDLED_VERSION === "string"
    ? SANDBOX_AGENT_BUNDLED_VERSION
    : (
        JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
          version: string;
        }
      ).version;
