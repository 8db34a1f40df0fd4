export {
  acpCompatible,
  acpCompatibleText,
  AcpTextAdapter,
  type AcpHarness,
  type AcpInputModalities,
} from "./adapter.js";
export type {
  AcpBaseModelOptions,
  AcpCompatibleConfig,
  AcpLaunchContext,
  AcpModelOptions,
  AcpSessionTransport,
  AuthMode,
  BuildPromptContext,
  ExitInfo,
  ExtNotification,
  PermissionHandler,
  PermissionMode,
  PermissionRequestInfo,
  PermissionStrategy,
  PromptBuilder,
} from "./config.js";
export { AcpHarnessError, type AcpErrorCode } from "./errors.js";
export {
  startAcpServerInSandbox,
  type AcpServerHandle,
  type AcpWebSocket,
  type StartAcpServerOptions,
} from "./start-acp-server.js";
export {
  startAcpBridgeInSandbox,
  type AcpBridgeHandle,
  type StartAcpBridgeOptions,
} from "./start-acp-bridge.js";
export { stdioTransport, type StdioTransportOptions } from "./transports/stdio.js";
export { webSocketTransport, type WebSocketTransportOptions } from "./transports/websocket.js";
