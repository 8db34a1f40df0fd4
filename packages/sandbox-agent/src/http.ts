import { SandboxAgentHttpError } from "./errors.js";

export type FetchLike = typeof fetch;

export interface HttpOptions {
  baseUrl: string;
  token?: string;
  headers?: Record<string, string>;
  fetch?: FetchLike;
}

export type QueryValue = string | number | boolean | undefined;

export interface HttpRequest {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Record<string, QueryValue>;
  json?: unknown;
  /** `fetch`'s own body type: no DOM lib needed to compile against this package. */
  body?: RequestInit["body"];
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** Small authenticated HTTP helper for the control-plane endpoints; every non-2xx becomes `SandboxAgentHttpError`. */
export class HttpTransport {
  readonly baseUrl: string;
  private readonly options: HttpOptions;

  constructor(options: HttpOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.options = options;
  }

  /** Headers every request carries (authorization and the caller's extra headers). */
  headers(extra: Record<string, string> = {}): Record<string, string> {
    return {
      ...this.options.headers,
      ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}),
      ...extra,
    };
  }

  /** Whether requests carry a bearer token (WebSockets in browsers then need a ticket). */
  get hasToken(): boolean {
    return this.options.token !== undefined && this.options.token !== "";
  }

  /** The caller's fetch, or the global one called as a plain function (browsers reject `fetch` invoked with another `this`). */
  get fetch(): FetchLike {
    return this.options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  url(path: string, query: Record<string, QueryValue> = {}): string {
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(query)) {
      if (value !== undefined) url.searchParams.set(key, String(value));
    }
    return url.toString();
  }

  /** Sends the request and returns the 2xx response (body unread). */
  async send(request: HttpRequest): Promise<Response> {
    const url = this.url(request.path, request.query);
    const headers = this.headers(request.headers);
    let body = request.body;
    if (request.json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(request.json);
    }
    const init: RequestInit & { duplex?: "half" } = {
      method: request.method,
      headers,
      body,
      signal: request.signal,
    };
    // Streaming request bodies need half-duplex in Node's fetch.
    if (body instanceof ReadableStream) init.duplex = "half";
    const response = await this.fetch(url, init);
    if (!response.ok) throw await SandboxAgentHttpError.from(request.method, url, response);
    return response;
  }

  async json<T>(request: HttpRequest): Promise<T> {
    const response = await this.send(request);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }
}
