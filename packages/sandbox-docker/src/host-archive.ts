import { lstat, readdir, readFile, readlink } from "node:fs/promises";
import path from "node:path";
import { pack } from "tar-stream";

/**
 * A tar (rooted at `/`) of the host directory `hostDir` placed at `dest` inside the sandbox:
 * regular files (with their modes), directories and symlinks, in one upload.
 */
export async function directoryArchive(hostDir: string, dest: string): Promise<Buffer> {
  const tar = pack();
  const root = dest.replace(/^\/+/, "").replace(/\/+$/, "");
  const chunks: Buffer[] = [];
  tar.on("data", (chunk) => chunks.push(chunk as Buffer));
  const done = new Promise<void>((resolve, reject) => tar.once("end", resolve).once("error", reject));
  const add = async (rel: string): Promise<void> => {
    const full = path.join(hostDir, rel);
    const info = await lstat(full);
    const name = rel === "" ? root : `${root}/${rel.split(path.sep).join("/")}`;
    const mode = info.mode & 0o7777;
    if (info.isDirectory()) {
      if (name !== "") tar.entry({ name, type: "directory", mode });
      for (const child of (await readdir(full)).sort()) await add(rel === "" ? child : path.join(rel, child));
    } else if (info.isSymbolicLink()) {
      tar.entry({ name, type: "symlink", linkname: await readlink(full), mode });
    } else if (info.isFile()) {
      tar.entry({ name, mode, mtime: info.mtime }, await readFile(full));
    }
  };
  await add("");
  tar.finalize();
  await done;
  return Buffer.concat(chunks);
}
