import net from "node:net";
import type { AddressInfo } from "node:net";

/**
 * A TCP proxy in front of a server whose SSE sockets the test can cut without the server knowing
 * why, and which records what requests went through.
 */
export interface CuttableProxy {
  baseUrl: string;
  /** Destroys every socket pair whose latest request is a GET (the SSE streams); returns how many. */
  cutStreams(): number;
  /** Silently stops forwarding server→client bytes on every SSE socket (a half-open connection). */
  freezeStreams(): number;
  /**
   * Silently drops client→server bytes on every GET socket (SSE streams, WebSockets) from now on:
   * what the client writes there never arrives, as when a connection dies as it is written.
   */
  blackHoleStreams(): number;
  /** GET requests seen so far (initial opens plus reconnects). */
  gets(): number;
  /** Method and headers (lower-case names) of every request that went through, in order. */
  requests(): RecordedRequest[];
  stop(): Promise<void>;
}

export interface RecordedRequest {
  method: string;
  headers: Record<string, string>;
  /** When the request head reached the proxy (`Date.now()`). */
  at: number;
}

/** The method and headers of a request head at the start of `chunk`, if one starts there. */
function requestHead(chunk: Buffer): RecordedRequest | undefined {
  const text = chunk.toString("latin1");
  const method = /^(GET|POST|DELETE) /.exec(text)?.[1];
  if (!method) return undefined;
  const headers: Record<string, string> = {};
  for (const line of text.split("\r\n\r\n", 1)[0]!.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { method, headers, at: Date.now() };
}

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
  lastMethod: string;
}

function destroyPair(pair: Pair): void {
  pair.client.destroy();
  pair.upstream.destroy();
}

export async function startProxy(targetPort: number): Promise<CuttableProxy> {
  const pairs = new Set<Pair>();
  let gets = 0;
  const recorded: RecordedRequest[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, "127.0.0.1");
    const pair: Pair = { client, upstream, lastMethod: "" };
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.on("data", (chunk: Buffer) => {
      // A request head starts a chunk; bodies of our small POSTs never start with a method name.
      const head = requestHead(chunk);
      if (!head) return;
      recorded.push(head);
      pair.lastMethod = head.method;
      if (head.method === "GET") gets += 1;
    });
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    cutStreams: () => {
      const streams = [...pairs].filter((p) => p.lastMethod === "GET");
      for (const p of streams) destroyPair(p);
      return streams.length;
    },
    freezeStreams: () => {
      const streams = [...pairs].filter((p) => p.lastMethod === "GET");
      for (const p of streams) {
        p.upstream.unpipe(p.client);
        p.upstream.pause();
      }
      return streams.length;
    },
    blackHoleStreams: () => {
      const streams = [...pairs].filter((p) => p.lastMethod === "GET");
      // The recording `data` listener keeps the client side flowing: its bytes are read and dropped.
      for (const p of streams) p.client.unpipe(p.upstream);
      return streams.length;
    },
    gets: () => gets,
    requests: () => [...recorded],
    stop: async () => {
      for (const p of pairs) destroyPair(p);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
