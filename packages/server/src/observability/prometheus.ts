import { readdirSync } from "node:fs";
import { VERSION } from "../version.js";
import { LATENCY_BUCKETS, type Counter, type Histogram, type Labels, type ServerMetrics } from "./metrics.js";

/** Values read at scrape time rather than counted. */
export interface Gauges {
  connectionsOpen: number;
  agentsRunning: number;
  sseReaders: number;
  processesRunning: number;
}

export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** The metrics in the Prometheus text exposition format (version 0.0.4). */
export function exposition(metrics: ServerMetrics, gauges: Gauges): string {
  const out: string[] = [];
  const family = (name: string, type: "counter" | "gauge" | "histogram", help: string) =>
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  const gauge = (name: string, help: string, value: number, labels: Labels = {}) => {
    family(name, "gauge", help);
    out.push(`${name}${labelText(labels)} ${value}`);
  };
  const counter = (name: string, help: string, series: Counter) => {
    family(name, "counter", help);
    for (const { labels, value } of series.entries()) out.push(`${name}${labelText(labels)} ${value}`);
  };

  gauge("sandbox_agent_info", "The server's version (always 1).", 1, { version: VERSION });
  gauge(
    "sandbox_agent_connections_open",
    "ACP connections open (initialized, not yet closed).",
    gauges.connectionsOpen,
  );
  gauge(
    "sandbox_agent_agents_running",
    "Agent processes alive: starting, running, or stopping after their connection closed.",
    gauges.agentsRunning,
  );
  gauge("sandbox_agent_sse_readers", "Connections with an SSE reader attached.", gauges.sseReaders);
  gauge(
    "sandbox_agent_processes_running",
    "Processes of the process API (and ACP terminals) running.",
    gauges.processesRunning,
  );
  counter(
    "sandbox_agent_connections_opened_total",
    "ACP connections opened, by agent.",
    metrics.connectionsOpened,
  );
  counter(
    "sandbox_agent_connections_closed_total",
    "ACP connections closed, by agent and reason.",
    metrics.connectionsClosed,
  );
  counter(
    "sandbox_agent_agent_exits_total",
    "Agent processes gone, by agent and how (ok, error, signal, spawn_failed).",
    metrics.agentExits,
  );
  family(
    "sandbox_agent_events_total",
    "counter",
    "Events sent towards clients: agent messages and the server's own.",
  );
  out.push(`sandbox_agent_events_total ${metrics.events}`);
  counter(
    "sandbox_agent_http_requests_total",
    "HTTP requests answered, by method, route and status.",
    metrics.requests,
  );
  histogram(
    out,
    "sandbox_agent_http_request_duration_seconds",
    "Time from a request's arrival to the end of its response, by method and route (SSE streams left out).",
    metrics.requestSeconds,
  );
  counter(
    "sandbox_agent_http_response_bytes_total",
    "Response body bytes sent, by method and route.",
    metrics.responseBytes,
  );
  counter(
    "sandbox_agent_http_request_bytes_total",
    "Request body bytes announced by Content-Length, by method and route.",
    metrics.requestBytes,
  );
  processMetrics(out, family, metrics.startedAt);
  return out.join("\n") + "\n";
}

function histogram(out: string[], name: string, help: string, series: Histogram): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} histogram`);
  for (const { labels, counts, sum, count } of series.entries()) {
    let cumulative = 0;
    LATENCY_BUCKETS.forEach((bound, i) => {
      cumulative += counts[i]!;
      out.push(`${name}_bucket${labelText({ ...labels, le: String(bound) })} ${cumulative}`);
    });
    out.push(`${name}_bucket${labelText({ ...labels, le: "+Inf" })} ${count}`);
    out.push(`${name}_sum${labelText(labels)} ${sum}`, `${name}_count${labelText(labels)} ${count}`);
  }
}

/** The standard `process_*` metrics of Prometheus client libraries. */
function processMetrics(
  out: string[],
  family: (name: string, type: "counter" | "gauge", help: string) => void,
  startedAt: number,
): void {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  family("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.");
  out.push(`process_cpu_seconds_total ${(cpu.user + cpu.system) / 1e6}`);
  family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  out.push(`process_resident_memory_bytes ${memory.rss}`);
  family("process_heap_bytes", "gauge", "V8 heap in use, in bytes.");
  out.push(`process_heap_bytes ${memory.heapUsed}`);
  family("process_start_time_seconds", "gauge", "Start time of the server since the Unix epoch, in seconds.");
  out.push(`process_start_time_seconds ${startedAt / 1000}`);
  const fds = openDescriptors();
  if (fds !== undefined) {
    family("process_open_fds", "gauge", "Open file descriptors.");
    out.push(`process_open_fds ${fds}`);
  }
}

function openDescriptors(): number | undefined {
  try {
    return readdirSync("/proc/self/fd").length;
  } catch {
    return undefined;
  }
}

function labelText(labels: Labels): string {
  const entries = Object.entries(labels);
  if (entries.length === 0) return "";
  return `{${entries.map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`).join(",")}}`;
}
