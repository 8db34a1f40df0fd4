import { RequestError } from "@agentclientprotocol/sdk";
import type { Turn } from "../turn.js";

export async function ext(turn: Turn, method: string, params: unknown): Promise<void> {
  await turn.client.notify(method, params);
}

export async function extRequest(turn: Turn, method: string, params: unknown): Promise<void> {
  try {
    const result = await turn.untilCancelled(turn.client.request<unknown>(method, params));
    await turn.message(`ext-request result: ${JSON.stringify(result ?? null)}`);
  } catch (error) {
    if (!(error instanceof RequestError)) throw error;
    await turn.message(`ext-request error: ${error.code} ${error.message}`);
  }
}
