export { createAcpHttpStream, type AcpHttpStream, type AcpCloseReason } from "./stream.js";
export {
  AcpHttpClient,
  type AcpHttpClientOptions,
  type AgentRequestHandler,
  type AgentRequestContext,
} from "./client.js";
export type { AcpAttachTarget, AcpHttpStreamOptions, AcpEnvelope, ReconnectOptions } from "./options.js";
/** The SSE body reader the transport uses, for other streams of the same server (e.g. process logs). */
export { sseItems, type SseItem } from "./sse.js";
export {
  AcpHttpError,
  AcpRpcError,
  AcpConnectionLostError,
  rpcErrorLabel,
  parseProblem,
  type ProblemDetails,
} from "./errors.js";
