export { createAcpHttpStream, type AcpHttpStream, type AcpCloseReason } from "./stream.js";
export {
  AcpHttpClient,
  type AcpHttpClientOptions,
  type AgentRequestHandler,
  type AgentRequestContext,
} from "./client.js";
export type { AcpHttpStreamOptions, AcpEnvelope, ReconnectOptions } from "./options.js";
export {
  AcpHttpError,
  AcpRpcError,
  AcpConnectionLostError,
  rpcErrorLabel,
  parseProblem,
  type ProblemDetails,
} from "./errors.js";
