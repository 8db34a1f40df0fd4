/**
 * How the page's agent connections travel: `"http"` (POSTs and an SSE stream, the SDK's default)
 * or `"websocket"` (one WebSocket to `/v2/rpc`). A preference, not a secret: kept in
 * `localStorage`, so it survives reloads and applies to every tab of this origin.
 */
export type Transport = "http" | "websocket";

const STORAGE_KEY = "sandbox-agent.transport";
export const DEFAULT_TRANSPORT: Transport = "http";
export const TRANSPORT_LABEL: Record<Transport, string> = { http: "HTTP + SSE", websocket: "WebSocket" };

export function storedTransport(): Transport {
  const value = localStorage.getItem(STORAGE_KEY);
  return value === "http" || value === "websocket" ? value : DEFAULT_TRANSPORT;
}

export function storeTransport(transport: Transport): void {
  localStorage.setItem(STORAGE_KEY, transport);
}
