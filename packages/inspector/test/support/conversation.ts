import type { Page } from "playwright-core";
import { waitFor } from "@sandbox-agent/testkit";

/** The session pane's composer and conversation, as the browser tests drive and read them. */
export function conversation(page: () => Page, stepMs: number) {
  const agentText = () => page().getByTestId("agent-message").last().innerText();
  const send = async (prompt: string) => {
    await page().getByTestId("prompt").fill(prompt);
    await page().getByTestId("send").click();
  };
  const turns = () => page().getByTestId("turn-end").count();
  /** Sends a prompt and waits for its turn to end. */
  const sendTurn = async (prompt: string) => {
    const before = await turns();
    await send(prompt);
    await waitFor(
      async () => (await turns()) > before,
      stepMs,
      `the turn of ${JSON.stringify(prompt)} to end`,
    );
  };
  /** Clicks "Allow once" on the last permission request; waits for its tool call and the answer. */
  const allowOnce = async () => {
    const permission = page().getByTestId("permission").last();
    const tool = page().getByTestId("tool-call").last();
    await permission.getByRole("button", { name: "Allow once" }).click();
    await waitFor(async () => /completed/.test(await tool.innerText()), stepMs, "the tool call to complete");
    await waitFor(
      async () => /Answered: Allow once/.test(await permission.innerText()),
      stepMs,
      "the answer",
    );
  };
  return { agentText, send, sendTurn, allowOnce, turns };
}
