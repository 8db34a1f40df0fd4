import { useMemo } from "preact/hooks";
import { renderMarkdown } from "../lib/markdown.js";

export function Markdown({ text }: { text: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div class="markdown" dangerouslySetInnerHTML={{ __html: html }} />;
}
