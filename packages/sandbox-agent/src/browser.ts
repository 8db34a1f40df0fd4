/**
 * The SDK without embedded mode: everything here runs in any JavaScript runtime with `fetch` and web
 * streams (Node, browsers). Bundlers pick this entry through the package's `browser` export
 * condition, so a browser bundle never sees `SandboxAgent.start()` and the Node modules it spawns
 * a server with.
 */
export { SandboxAgentClient, type ReattachOptions, type SandboxAgentClientOptions } from "./client.js";
/** Following a session another replica drives, through the shared store. */
export { followSession, type MirroredEvent } from "./follow.js";
export {
  SandboxAgentHttpError,
  NotConnectedError,
  AlreadyConnectedError,
  AgentRequestError,
  type ProblemDetails,
} from "./errors.js";
export type {
  SandboxAgentEvent,
  SandboxAgentEventType,
  EventOfType,
  EventFilter,
  EventStreamOptions,
  SessionUpdateEvent,
  PermissionRequestEvent,
  TurnStartedEvent,
  TurnEndedEvent,
  TurnFailedEvent,
  SessionEndedEvent,
  ParseErrorEvent,
  NotificationEvent,
  DisconnectedEvent,
} from "./events.js";
export type {
  HealthStatus,
  AgentDescription,
  AgentPackage,
  InstallAgentOptions,
  InstallResult,
} from "./control-plane.js";
export type {
  FileSystem,
  FileStat,
  FileType,
  DirectoryListing,
  ListOptions,
  ReadOptions,
  WriteOptions,
  FileData,
} from "./filesystem.js";
export type {
  Processes,
  ProcessInfo,
  CommandOptions,
  RunOptions,
  RunResult,
  CreateOptions,
  LogEntry,
  LogsOptions,
  LogsResult,
  OutputStream,
} from "./processes.js";
export type { LogEvent, FollowOptions } from "./log-stream.js";
export type { Connections, ConnectionInfo, ConnectionSessionInfo } from "./connections.js";
export {
  Terminal,
  type TerminalOptions,
  type TerminalExit,
  type WebSocketLike,
  type WebSocketConstructor,
} from "./terminal.js";
export type { FetchLike } from "./http.js";
export type { AcpEnvelope } from "acp-http-client";
export type * from "./types.js";
