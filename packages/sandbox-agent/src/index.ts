/**
 * sandbox-agent SDK: control a coding agent running inside a sandbox through a sandbox-agent
 * server — sessions, prompts, streamed updates, permissions — plus health, agents and files.
 */
export { SandboxAgentClient, type SandboxAgentClientOptions } from "./client.js";
export { SandboxAgent, type StartOptions, type EmbeddedServer } from "./embedded.js";
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
  TurnEndedEvent,
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
export {
  Terminal,
  type TerminalOptions,
  type TerminalExit,
  type WebSocketLike,
  type WebSocketConstructor,
} from "./terminal.js";
export type { FetchLike } from "./http.js";
export type * from "./types.js";
