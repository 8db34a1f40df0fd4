import type { ContentBlock, ToolCallContent } from "@agentclientprotocol/sdk";
import { useEffect, useRef } from "preact/hooks";
import type { ConnectionModel } from "../lib/connection.js";
import { json } from "../lib/format.js";
import type { Item, ToolCallState } from "../lib/timeline.js";
import { DiffView } from "./DiffView.js";
import { Markdown } from "./Markdown.js";

function Blocks({ blocks, markdown }: { blocks: ContentBlock[]; markdown: boolean }) {
  return (
    <>
      {blocks.map((block, i) => {
        switch (block.type) {
          case "text":
            return markdown ? (
              <Markdown key={i} text={block.text} />
            ) : (
              <p key={i} class="plain">
                {block.text}
              </p>
            );
          case "image":
            return (
              <img
                key={i}
                class="inline-image"
                alt="image from the agent"
                src={`data:${block.mimeType};base64,${block.data}`}
              />
            );
          case "resource_link":
            return (
              <div key={i} class="resource">
                link: {block.name || block.uri}
              </div>
            );
          case "resource":
            return (
              <div key={i} class="resource">
                resource: {block.resource.uri}
              </div>
            );
          default:
            return (
              <div key={i} class="resource">
                [{block.type}]
              </div>
            );
        }
      })}
    </>
  );
}

function ToolContent({ content }: { content: ToolCallContent }) {
  if (content.type === "diff")
    return <DiffView path={content.path} oldText={content.oldText} newText={content.newText} />;
  if (content.type === "terminal") return <div class="resource">terminal {content.terminalId}</div>;
  return <Blocks blocks={[content.content]} markdown={false} />;
}

const STATUS_LABEL: Record<string, string> = {
  pending: "pending",
  in_progress: "running",
  completed: "completed",
  failed: "failed",
};

function ToolCall({ call }: { call: ToolCallState }) {
  return (
    <div class={`tool status-${call.status}`} data-testid="tool-call">
      <div class="tool-head">
        <span class="tool-kind">{call.kind ?? "tool"}</span>
        <span class="tool-title">{call.title || call.toolCallId}</span>
        <span class={`status status-${call.status}`}>{STATUS_LABEL[call.status] ?? call.status}</span>
      </div>
      {call.locations.length > 0 && (
        <div class="tool-locations">
          {call.locations.map((l) => (
            <code key={`${l.path}:${l.line ?? ""}`}>{l.line ? `${l.path}:${l.line}` : l.path}</code>
          ))}
        </div>
      )}
      {call.content.map((c, i) => (
        <ToolContent key={i} content={c} />
      ))}
      {(call.rawInput !== undefined || call.rawOutput !== undefined) && (
        <details class="tool-io">
          <summary>input and output</summary>
          {call.rawInput !== undefined && (
            <>
              <h4>input</h4>
              <pre>{json(call.rawInput)}</pre>
            </>
          )}
          {call.rawOutput !== undefined && (
            <>
              <h4>output</h4>
              <pre>{json(call.rawOutput)}</pre>
            </>
          )}
        </details>
      )}
    </div>
  );
}

function ItemView({ item, connection }: { item: Item; connection: ConnectionModel }) {
  switch (item.kind) {
    case "user":
      return (
        <div class="msg user" data-testid="user-message">
          <Blocks blocks={item.blocks} markdown={false} />
        </div>
      );
    case "agent":
      return (
        <div class="msg agent" data-testid="agent-message">
          <Blocks blocks={item.blocks} markdown />
        </div>
      );
    case "thought":
      return (
        <details class="thought">
          <summary>Thought</summary>
          <p class="plain">{item.text}</p>
        </details>
      );
    case "tool":
      return <ToolCall call={item.call} />;
    case "plan":
      return (
        <div class="plan" data-testid="plan">
          <div class="plan-title">Plan</div>
          <ul>
            {item.entries.map((entry, i) => (
              <li key={i} class={`plan-${entry.status}`}>
                <input
                  type="checkbox"
                  checked={entry.status === "completed"}
                  disabled
                  aria-label={entry.status}
                />
                <span>{entry.content}</span>
                {entry.status === "in_progress" && <span class="badge">in progress</span>}
                {entry.priority === "high" && <span class="badge warn">high</span>}
              </li>
            ))}
          </ul>
        </div>
      );
    case "permission":
      return (
        <div class={`permission${item.answer ? " answered" : ""}`} data-testid="permission">
          <div class="permission-title">
            Permission requested: <strong>{item.toolCall.title ?? item.toolCall.toolCallId}</strong>
          </div>
          {item.answer ? (
            <div class="permission-answer">
              {item.answer.outcome === "selected"
                ? `Answered: ${item.options.find((o) => o.optionId === (item.answer as { optionId: string }).optionId)?.name ?? item.answer.optionId}`
                : "Cancelled"}
            </div>
          ) : (
            <div class="permission-options">
              {item.options.map((option) => (
                <button
                  key={option.optionId}
                  class={option.kind.startsWith("allow") ? "primary" : "danger"}
                  onClick={() =>
                    connection.answer(item.requestKey, { outcome: "selected", optionId: option.optionId })
                  }
                >
                  {option.name}
                </button>
              ))}
            </div>
          )}
        </div>
      );
    case "turn":
      return (
        <div class="turn-end" data-testid="turn-end">
          <span>turn ended: {item.stopReason}</span>
        </div>
      );
    case "error":
      return (
        <div class="error-item" role="alert">
          <strong>{item.title}</strong>
          <div>{item.message}</div>
          {item.detail && (
            <details open>
              <summary>stderr</summary>
              <pre>{item.detail}</pre>
            </details>
          )}
        </div>
      );
    case "ended":
      return (
        <div class="error-item ended" role="alert">
          <strong>Session ended: {item.reason}</strong>
          {(item.exitCode !== null || item.signal) && (
            <div>
              exit code {item.exitCode ?? "–"}
              {item.signal ? `, signal ${item.signal}` : ""}
            </div>
          )}
          {item.stderrTail && (
            <details open>
              <summary>stderr (last lines)</summary>
              <pre>{item.stderrTail}</pre>
            </details>
          )}
        </div>
      );
    case "note":
      return <div class="note">{item.text}</div>;
  }
}

/** The session's timeline as a chat; follows new output while scrolled to the bottom. */
export function Conversation({ connection, items }: { connection: ConnectionModel; items: Item[] }) {
  const ref = useRef<HTMLDivElement>(null);
  const pinned = useRef(true);
  const revs = items.reduce((n, i) => n + i.rev, items.length);
  useEffect(() => {
    const el = ref.current;
    if (el && pinned.current) el.scrollTop = el.scrollHeight;
  }, [revs]);
  return (
    <div
      class="conversation"
      ref={ref}
      data-testid="conversation"
      onScroll={(e) => {
        const el = e.currentTarget;
        pinned.current = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
      }}
    >
      {items.length === 0 && <div class="empty">No messages yet. Send a prompt below.</div>}
      {items.map((item) => (
        <ItemView key={item.key} item={item} connection={connection} />
      ))}
    </div>
  );
}
