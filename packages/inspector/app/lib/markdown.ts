/**
 * Agent text is untrusted: markdown is rendered by `marked` and the HTML sanitized by DOMPurify
 * (no scripts, handlers, frames, forms or styles: the page's Content-Security-Policy allows inline
 * styles for xterm.js, so a `style` attribute here could lay a message over the page's own
 * buttons). Images load only from `data:` URLs, so a message cannot make the page fetch anything
 * (the Content-Security-Policy would block it anyway).
 */
import DOMPurify from "dompurify";
import { Marked } from "marked";

const marked = new Marked({ gfm: true, breaks: false, async: false });

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
