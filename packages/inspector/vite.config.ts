import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";
import { defineConfig, type Plugin } from "vite";

const COMPRESSIBLE = /\.(html|js|css|svg|json|txt)$/;

/**
 * Writes `.br` and `.gz` siblings of every text file of the build, so the server sends compressed
 * files without compressing at run time (the server picks one by `accept-encoding`).
 */
function precompress(): Plugin {
  let outDir = "";
  return {
    name: "sandbox-agent:precompress",
    apply: "build",
    configResolved: (config) => void (outDir = path.resolve(config.root, config.build.outDir)),
    closeBundle() {
      for (const entry of readdirSync(outDir, { recursive: true, withFileTypes: true })) {
        if (!entry.isFile() || !COMPRESSIBLE.test(entry.name)) continue;
        const file = path.join(entry.parentPath, entry.name);
        const bytes = readFileSync(file);
        writeFileSync(`${file}.gz`, gzipSync(bytes, { level: 9 }));
        writeFileSync(
          `${file}.br`,
          brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
        );
      }
    },
  };
}

export default defineConfig({
  root: "app",
  base: "/ui/",
  // Preact through the automatic JSX runtime (no React, no compat layer).
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: {
    outDir: "../dist/ui",
    emptyOutDir: true,
    // Chromium, Firefox and Safari of the last years load module preloads natively.
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  plugins: [precompress()],
});
