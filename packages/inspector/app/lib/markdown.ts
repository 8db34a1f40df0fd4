/**
 * Agent text is untrusted: markdown is rendered by `marked` and the HTML sanitized by DOMPurify
 * (no scripts, handlers, frames, forms or styles: the page's Content-Security-Policy allows inline
 * styles for xterm.js, so a `style` attribute here could lay a message over the page's own
 * buttons). Images load only from `data:` URLs, so a message cannot make the page fetch anything
 * (the Content-Security-Policy would block it anyway).
 *
 * HTML the agent writes itself (`<img onerror=…>`, `<b>`) is shown as the text it is, never parsed:
 * Chromium reports a CSP violation for every inline handler in HTML it merely parses (DOMParser,
 * `<template>`, inert documents alike), so sanitizing after parsing would flood the console with
 * refusals for handlers that never run, and text is what an inspector should show of them anyway.
 */
import DOMPurify from "dompurify";
import { Marked } from "marked";

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};
const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);

const marked = new Marked({
  gfm: true,
  breaks: false,
  async: false,
  renderer: { html: ({ text }) => escapeHtml(text) },
});

DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
  if (node.tagName === "IMG" && !(node.getAttribute("src") ?? "").startsWith("data:image/")) node.remove();
});

export function renderMarkdown(text: string): string {
  const html = marked.parse(text) as string;
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ["style", "form", "input"],
    FORBID_ATTR: ["style"],
  });
}
