/** Line prefix the WebSocket bridge prints on stdout once it listens. */
export const READY_MARKER = "ACP_WS_LISTENING";
