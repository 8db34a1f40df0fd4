import { useState } from "preact/hooks";
import type { RawEnvelope } from "../lib/connection.js";
import { json } from "../lib/format.js";

const SHOWN = 500;

function summary(envelope: RawEnvelope): string {
  const m = envelope.message;
  if ("method" in m) return "id" in m && m.id != null ? `${m.method} #${String(m.id)}` : m.method;
  if ("error" in m && m.error) return `error #${String(m.id)} (${m.error.code})`;
  return "id" in m ? `result #${String(m.id)}` : "message";
}

function Row({ envelope }: { envelope: RawEnvelope }) {
  const [open, setOpen] = useState(false);
  return (
    <>
      <tr class={`raw-row ${envelope.direction}`} onClick={() => setOpen(!open)} data-testid="raw-row">
        <td class="num">{envelope.seq}</td>
        <td class="event-id" data-testid="event-id">
          {envelope.eventId ?? ""}
        </td>
        <td class="dir" title={envelope.direction}>
          {envelope.direction === "inbound" ? "←" : "→"}
        </td>
        <td class="method">{summary(envelope)}</td>
        <td class="time">{new Date(envelope.at).toLocaleTimeString()}</td>
      </tr>
      {open && (
        <tr class="raw-json">
          <td colSpan={5}>
            <pre>{json(envelope.message)}</pre>
          </td>
        </tr>
      )}
    </>
  );
}

/** The JSON-RPC messages of the connection (optionally one session's), with SSE event ids. */
export function RawView({ envelopes }: { envelopes: RawEnvelope[] }) {
  const [all, setAll] = useState(false);
  const shown = all ? envelopes : envelopes.slice(-SHOWN);
  return (
    <div class="raw">
      {envelopes.length > shown.length && (
        <button class="link" onClick={() => setAll(true)}>
          show all {envelopes.length} messages
        </button>
      )}
      <table class="raw-table">
        <thead>
          <tr>
            <th>#</th>
            <th>event id</th>
            <th />
            <th>message</th>
            <th>time</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((envelope) => (
            <Row key={envelope.seq} envelope={envelope} />
          ))}
        </tbody>
      </table>
    </div>
  );
}
