import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { IncomingMessage, ServerResponse } from "node:http";
import { problems } from "../http/problem.js";
import type { Route } from "../http/router.js";
import { INSPECTOR_PATH } from "./public-path.js";
import { sendStatic, type CachePolicy } from "./static-files.js";

/** A file name of the build (hashed assets, index.html, the icon): no path separators, no dot files. */
const FILE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Set by the bundler: the bundle ships the inspector's build as `ui/` beside its own files. */
declare const SANDBOX_AGENT_BUNDLED_UI: string | undefined;

/**
 * The built page: beside the bundle, else `dist/ui` of `@sandbox-agent/inspector`; undefined when
 * neither is there.
 */
function defaultAssetsDir(): string | undefined {
  if (typeof SANDBOX_AGENT_BUNDLED_UI === "string") {
    const dir = fileURLToPath(new URL(SANDBOX_AGENT_BUNDLED_UI, import.meta.url));
    return existsSync(path.join(dir, "index.html")) ? dir : undefined;
  }
  try {
    return path.dirname(fileURLToPath(import.meta.resolve("@sandbox-agent/inspector/ui/index.html")));
  } catch {
    return undefined;
  }
}

/**
 * The inspector page at `/ui/`: the build's `index.html` (revalidated on every load) and its
 * content-hashed `assets/` (cached for a year, immutable). Loaded on the first `/ui` request.
 */
export function inspectorRoutes(assetsDir = defaultAssetsDir()): Route[] {
  const serve = (res: ServerResponse, req: IncomingMessage, relative: string, cache: CachePolicy) => {
    if (assetsDir === undefined) {
      throw problems.notFound(
        "The inspector is not installed (package @sandbox-agent/inspector); in a checkout, run `npm run build`.",
      );
    }
    return sendStatic(req, res, path.join(assetsDir, relative), cache);
  };
  const fileParam = (name: string | undefined): string => {
    if (name === undefined || !FILE_NAME.test(name)) throw problems.notFound(`No inspector file ${name}.`);
    return name;
  };
  return [
    {
      method: "GET",
      path: "/ui",
      handler: ({ res }) => {
        res.writeHead(308, { location: INSPECTOR_PATH, "content-length": 0 });
        res.end();
      },
    },
    { method: "GET", path: "/ui/", handler: ({ req, res }) => serve(res, req, "index.html", "revalidate") },
    {
      method: "GET",
      path: "/ui/{file}",
      handler: ({ req, res, params }) => serve(res, req, fileParam(params.file), "revalidate"),
    },
    {
      method: "GET",
      path: "/ui/assets/{file}",
      handler: ({ req, res, params }) =>
        serve(res, req, path.join("assets", fileParam(params.file)), "immutable"),
    },
  ];
}
