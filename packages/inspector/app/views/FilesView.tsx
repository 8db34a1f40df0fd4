import { useEffect, useState } from "preact/hooks";
import type { DirectoryListing, FileStat } from "sandbox-agent";
import { Icon } from "../components/Icon.js";
import { errorMessage, formatBytes, formatRelative } from "../lib/format.js";
import type { ServerModel } from "../lib/server.js";

/** Text shown inline up to this size; larger files are downloaded. */
const PREVIEW_BYTES = 512 * 1024;
const IMAGE_TYPES: Record<string, string> = {
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
};

type Preview =
  { kind: "text"; text: string; truncated: boolean } | { kind: "image"; url: string } | { kind: "binary" };

function join(dir: string, name: string): string {
  return `${dir.replace(/\/+$/, "")}/${name}`;
}

function parentOf(path: string): string {
  const parent = path.replace(/\/[^/]*$/, "");
  return parent === "" ? "/" : parent;
}

function looksBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, 8000).includes(0);
}

async function loadPreview(server: ServerModel, file: FileStat): Promise<Preview> {
  const ext = file.name.split(".").pop()?.toLowerCase() ?? "";
  const imageType = IMAGE_TYPES[ext];
  if (imageType && file.size <= 8 * PREVIEW_BYTES) {
    const blob = await new Response(await server.control.fs.openRead(file.path)).blob();
    return { kind: "image", url: URL.createObjectURL(new Blob([blob], { type: imageType })) };
  }
  const bytes = await server.control.fs.readFile(file.path, { range: { start: 0, end: PREVIEW_BYTES } });
  if (looksBinary(bytes)) return { kind: "binary" };
  return { kind: "text", text: new TextDecoder().decode(bytes), truncated: file.size > PREVIEW_BYTES };
}

async function download(server: ServerModel, file: FileStat): Promise<void> {
  const url = URL.createObjectURL(await new Response(await server.control.fs.openRead(file.path)).blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = file.name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function Breadcrumbs({ path, go }: { path: string; go: (path: string) => void }) {
  const parts = path.split("/").filter(Boolean);
  return (
    <nav class="breadcrumbs" data-testid="breadcrumbs">
      <button class="link" onClick={() => go("/")}>
        root
      </button>
      {parts.map((part, i) => (
        <span key={i}>
          {" / "}
          <button class="link" onClick={() => go(`/${parts.slice(0, i + 1).join("/")}`)}>
            {part}
          </button>
        </span>
      ))}
    </nav>
  );
}

function FilePreview({ server, file }: { server: ServerModel; file: FileStat }) {
  const [preview, setPreview] = useState<Preview>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    let url: string | undefined;
    setPreview(undefined);
    setError(undefined);
    loadPreview(server, file).then(
      (p) => {
        if (p.kind === "image") url = p.url;
        setPreview(p);
      },
      (e: unknown) => setError(errorMessage(e)),
    );
    return () => url && URL.revokeObjectURL(url);
  }, [server, file.path, file.mtime]);
  return (
    <div class="file-preview" data-testid="file-preview">
      <header>
        <strong>{file.path}</strong>
        <span class="muted">
          {formatBytes(file.size)} · {formatRelative(file.mtime)}
        </span>
        <button
          onClick={() => download(server, file).catch((e: unknown) => setError(errorMessage(e)))}
          data-testid="download"
        >
          Download
        </button>
      </header>
      {error && <div class="form-error">{error}</div>}
      {preview?.kind === "text" && (
        <pre class="file-text" data-testid="file-text">
          {preview.text}
          {preview.truncated && "\n… (truncated: download the file for the rest)"}
        </pre>
      )}
      {preview?.kind === "image" && <img class="file-image" src={preview.url} alt={file.name} />}
      {preview?.kind === "binary" && <div class="muted">Binary file: download it to view.</div>}
    </div>
  );
}

export function FilesView({
  server,
  path,
  go,
}: {
  server: ServerModel;
  path: string;
  go: (path: string) => void;
}) {
  const [listing, setListing] = useState<DirectoryListing>();
  const [selected, setSelected] = useState<FileStat>();
  const [error, setError] = useState<string>();
  const [uploading, setUploading] = useState(false);
  const load = async () => {
    setError(undefined);
    try {
      const info = await server.control.fs.stat(path);
      const dir = info.type === "directory" ? path : parentOf(path);
      setSelected(info.type === "directory" ? undefined : info);
      setListing(await server.control.fs.list(dir));
    } catch (e) {
      setError(errorMessage(e));
    }
  };
  useEffect(() => void load(), [server, path]);
  const dir = listing?.path ?? path;
  const upload = async (files: FileList | null) => {
    if (!files) return;
    setUploading(true);
    try {
      for (const file of Array.from(files)) await server.control.fs.writeFile(join(dir, file.name), file);
      await load();
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setUploading(false);
    }
  };
  const entries = [...(listing?.entries ?? [])].sort(
    (a, b) => Number(b.type === "directory") - Number(a.type === "directory") || a.name.localeCompare(b.name),
  );
  return (
    <div class="page files">
      <div class="files-toolbar">
        <Breadcrumbs path={dir} go={go} />
        <label class={`button${uploading ? " disabled" : ""}`}>
          {uploading ? "Uploading…" : "Upload files"}
          <input
            type="file"
            multiple
            hidden
            disabled={uploading}
            onChange={(e) => void upload(e.currentTarget.files)}
            data-testid="upload"
          />
        </label>
      </div>
      {error && <div class="form-error">{error}</div>}
      <div class="files-body">
        <table class="file-table" data-testid="file-table">
          <thead>
            <tr>
              <th>name</th>
              <th class="num">size</th>
              <th>modified</th>
            </tr>
          </thead>
          <tbody>
            {dir !== "/" && (
              <tr>
                <td colSpan={3}>
                  <button class="link" onClick={() => go(parentOf(dir))}>
                    ..
                  </button>
                </td>
              </tr>
            )}
            {entries.map((entry) => (
              <tr key={entry.path} class={selected?.path === entry.path ? "selected" : ""}>
                <td>
                  <button class="link file-link" onClick={() => go(entry.path)} data-testid="file-entry">
                    <Icon
                      name={
                        entry.type === "directory" ? "folder" : entry.type === "symlink" ? "link" : "file"
                      }
                    />
                    {entry.name}
                  </button>
                </td>
                <td class="num">{entry.type === "file" ? formatBytes(entry.size) : ""}</td>
                <td title={entry.mtime}>{formatRelative(entry.mtime)}</td>
              </tr>
            ))}
            {listing && entries.length === 0 && (
              <tr>
                <td colSpan={3} class="muted">
                  Empty directory
                </td>
              </tr>
            )}
          </tbody>
        </table>
        {selected && <FilePreview server={server} file={selected} />}
      </div>
      {listing?.truncated && (
        <div class="muted">Only the first {listing.entries.length} entries are shown.</div>
      )}
    </div>
  );
}
