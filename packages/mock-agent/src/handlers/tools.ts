import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { type PermissionOption, type ToolCallUpdate, type ToolKind } from "@agentclientprotocol/sdk";
import type { Turn } from "../turn.js";

export async function tool(turn: Turn, kind: ToolKind, title: string): Promise<void> {
  const toolCallId = turn.nextToolCallId();
  await turn.emit({
    sessionUpdate: "tool_call",
    toolCallId,
    title,
    kind,
    status: "pending",
    rawInput: { title, kind },
  });
  await turn.emit({ sessionUpdate: "tool_call_update", toolCallId, status: "in_progress" });
  await turn.emit({
    sessionUpdate: "tool_call_update",
    toolCallId,
    status: "completed",
    content: [{ type: "content", content: { type: "text", text: `done: ${title}` } }],
    rawOutput: { ok: true, title },
  });
}

export async function failTool(turn: Turn, title: string): Promise<void> {
  const toolCallId = turn.nextToolCallId();
  await turn.emit({
    sessionUpdate: "tool_call",
    toolCallId,
    title,
    kind: "other",
    status: "pending",
    rawInput: { title },
  });
  await turn.emit({
    sessionUpdate: "tool_call_update",
    toolCallId,
    status: "failed",
    content: [{ type: "content", content: { type: "text", text: `failed: ${title}` } }],
    rawOutput: { ok: false, error: "mock failure" },
  });
}

const PERMISSION_OPTIONS: PermissionOption[] = [
  { optionId: "allow_once", name: "Allow once", kind: "allow_once" },
  { optionId: "allow_always", name: "Allow always", kind: "allow_always" },
  { optionId: "reject_once", name: "Reject once", kind: "reject_once" },
  { optionId: "reject_always", name: "Reject always", kind: "reject_always" },
];

/**
 * Asks the client; resolves to the selected optionId, or undefined when the client answered
 * `cancelled` or the turn was cancelled while waiting (the turn then ends as cancelled).
 */
async function askPermission(turn: Turn, toolCall: ToolCallUpdate): Promise<string | undefined> {
  const asked = turn.client.request("session/request_permission", {
    sessionId: turn.sessionId,
    toolCall,
    options: PERMISSION_OPTIONS,
  });
  try {
    const response = await turn.untilCancelled(asked);
    return response.outcome.outcome === "selected" ? response.outcome.optionId : undefined;
  } catch (error) {
    if (turn.signal.aborted) return undefined;
    throw error;
  }
}

function allowed(optionId: string | undefined): boolean {
  return optionId === "allow_once" || optionId === "allow_always";
}

export async function permission(turn: Turn, title: string): Promise<void> {
  const toolCallId = turn.nextToolCallId();
  await turn.emit({
    sessionUpdate: "tool_call",
    toolCallId,
    title,
    kind: "execute",
    status: "pending",
    rawInput: { title },
  });
  const optionId = await askPermission(turn, { toolCallId, title, kind: "execute", status: "pending" });
  const ok = allowed(optionId);
  await turn.emit({ sessionUpdate: "tool_call_update", toolCallId, status: ok ? "completed" : "failed" });
  await turn.message(optionId === undefined ? "permission: cancelled" : `permission: selected ${optionId}`);
}

export async function write(turn: Turn, target: string, content: string): Promise<void> {
  const file = path.resolve(turn.session.cwd, target);
  const oldText = existsSync(file) ? readFileSync(file, "utf8") : null;
  const toolCallId = turn.nextToolCallId();
  const title = `write ${target}`;
  const diff = { type: "diff" as const, path: file, oldText, newText: content };
  await turn.emit({
    sessionUpdate: "tool_call",
    toolCallId,
    title,
    kind: "edit",
    status: "pending",
    content: [diff],
    locations: [{ path: file }],
    rawInput: { path: file, content },
  });
  const optionId = await askPermission(turn, {
    toolCallId,
    title,
    kind: "edit",
    status: "pending",
    content: [diff],
  });
  if (!allowed(optionId)) {
    await turn.emit({ sessionUpdate: "tool_call_update", toolCallId, status: "failed" });
    await turn.message("write rejected");
    return;
  }
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  await turn.emit({
    sessionUpdate: "tool_call_update",
    toolCallId,
    status: "completed",
    rawOutput: { path: file, bytes: Buffer.byteLength(content) },
  });
  await turn.message(`wrote ${target}`);
}
