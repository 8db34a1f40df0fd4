#!/usr/bin/env node
/**
 * A WebSocket ACP server that runs inside the sandbox: every WebSocket
 * connection spawns the agent command and relays JSON-RPC messages between the
 * socket (one message per text frame) and the agent's stdio (one per line).
 *
 * Usage: acp-ws-bridge <host> <port> <base64 shell command>
 * Prints `ACP_WS_LISTENING <port>` on stdout once it accepts connections.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createInterface } from "node:readline";
import { WebSocketServer, type WebSocket } from "ws";
import { READY_MARKER } from "./ready-marker.js";

function main(): void {
  const [host, portArg, encoded] = process.argv.slice(2);
  if (!host || !portArg || !encoded) {
    process.stderr.write("usage: acp-ws-bridge <host> <port> <base64 command>\n");
    process.exit(2);
  }
  const command = Buffer.from(encoded, "base64").toString("utf8");
  const children = new Set<ChildProcess>();
  const server = new WebSocketServer({ host, port: Number(portArg) });
  server.on("listening", () => {
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : Number(portArg);
    process.stdout.write(`${READY_MARKER} ${port}\n`);
  });
  server.on("connection", (socket) => {
    const child = bridge(socket, command, () => children.delete(child));
    children.add(child);
  });
  const shutdown = (): void => {
    for (const c of children) killGroup(c);
    server.close();
    setTimeout(() => process.exit(0), 200).unref();
  };
  process.on("SIGTERM", shutdown);
  process.on("SIGINT", shutdown);
}

function bridge(socket: WebSocket, command: string, onExit: () => void): ChildProcess {
  const child = spawn(command, { shell: true, detached: true, stdio: ["pipe", "pipe", "inherit"] });
  createInterface({ input: child.stdout! }).on("line", (line) => {
    if (line.trim() !== "") socket.send(line);
  });
  socket.on("message", (data) => {
    // JSON-RPC text must stay one line on stdio; re-serialise to drop any newlines.
    const text = data.toString();
    try {
      child.stdin!.write(`${JSON.stringify(JSON.parse(text))}\n`);
    } catch {
      socket.close(1007, "invalid JSON");
    }
  });
  socket.on("close", () => killGroup(child));
  child.stdin!.on("error", () => socket.close(1011, "agent stdin closed"));
  child.on("exit", (code, signal) => {
    onExit();
    socket.close(1011, `agent exited (code ${code ?? "null"}, signal ${signal ?? "null"})`);
  });
  return child;
}

function killGroup(child: ChildProcess): void {
  if (child.exitCode !== null || child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    return;
  }
  setTimeout(() => {
    try {
      process.kill(-child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }, 2_000).unref();
}

main();
