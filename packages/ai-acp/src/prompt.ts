import type { ContentBlock, PromptCapabilities } from "@agentclientprotocol/sdk";
import type { ContentPart, ModelMessage } from "@tanstack/ai";
import type { BuildPromptContext } from "./config.js";
import { withOutputSchemaInstruction } from "./structured-output.js";

/**
 * Default history → prompt mapping. A fresh session gets the whole
 * conversation as a transcript; a warm or resumed one only the newest user
 * message, since the agent already holds the rest. Images of the newest user
 * message ride along as image blocks (removed later if the agent cannot take them).
 */
export function defaultBuildPrompt(ctx: BuildPromptContext): ContentBlock[] {
  const lastUser = [...ctx.messages].reverse().find((m) => m.role === "user");
  const earlier = ctx.resumed
    ? []
    : ctx.messages.slice(0, lastUser ? ctx.messages.lastIndexOf(lastUser) : undefined);
  const sections: string[] = [];
  if (!ctx.resumed && ctx.systemPrompts.length > 0) sections.push(ctx.systemPrompts.join("\n\n"));
  const transcript = earlier.map(transcriptLine).filter((line) => line !== "");
  if (transcript.length > 0) sections.push(`Conversation so far:\n${transcript.join("\n")}`);
  let text = lastUser ? textOf(lastUser.content) : "";
  if (sections.length > 0) text = `${sections.join("\n\n")}\n\n${text}`;
  if (ctx.outputSchema) text = withOutputSchemaInstruction(text, ctx.outputSchema);
  return [{ type: "text", text }, ...(lastUser ? mediaBlocks(lastUser.content) : [])];
}

/**
 * Drops content the agent did not advertise (`promptCapabilities`), replacing
 * it with a short text note so the prompt stays truthful about what was omitted.
 */
export function fitToCapabilities(
  blocks: ContentBlock[],
  caps: PromptCapabilities | undefined,
): ContentBlock[] {
  return blocks.map((block) => {
    if (block.type === "image" && !caps?.image) return note("an image");
    if (block.type === "audio" && !caps?.audio) return note("an audio clip");
    if (block.type === "resource" && !caps?.embeddedContext) {
      const resource = block.resource;
      return "text" in resource
        ? { type: "text", text: `Content of ${resource.uri}:\n${resource.text}` }
        : { type: "resource_link", uri: resource.uri, name: resource.uri };
    }
    return block;
  });
}

export function toBlocks(prompt: string | ContentBlock[]): ContentBlock[] {
  return typeof prompt === "string" ? [{ type: "text", text: prompt }] : prompt;
}

function note(what: string): ContentBlock {
  return { type: "text", text: `[${what} was attached but this agent does not accept it]` };
}

function transcriptLine(message: ModelMessage): string {
  const text = textOf(message.content);
  if (message.role === "tool") return text ? `Tool result (${message.toolCallId ?? "?"}): ${text}` : "";
  if (!text) return "";
  return `${message.role === "user" ? "User" : "Assistant"}: ${text}`;
}

function textOf(content: ModelMessage["content"]): string {
  if (content === null) return "";
  if (typeof content === "string") return content;
  return content
    .filter((part): part is Extract<ContentPart, { type: "text" }> => part.type === "text")
    .map((part) => part.content)
    .join("\n");
}

function mediaBlocks(content: ModelMessage["content"]): ContentBlock[] {
  if (content === null || typeof content === "string") return [];
  const blocks: ContentBlock[] = [];
  for (const part of content) {
    if (part.type !== "image" && part.type !== "audio") continue;
    if (part.source.type === "data") {
      blocks.push({ type: part.type, data: part.source.value, mimeType: part.source.mimeType });
    } else {
      blocks.push({ type: "resource_link", uri: part.source.value, name: part.source.value });
    }
  }
  return blocks;
}
