import type { RunningServer } from "@sandbox-agent/testkit";

/**
 * One sample of the server's `GET /v2/metrics` (`name` with its labels, as written there). Tests
 * wait on it for what a client cannot see, e.g. events the server produced while no reader was
 * attached.
 */
export async function metric(server: RunningServer, series: string): Promise<number> {
  const text = await (await fetch(`${server.baseUrl}/v2/metrics`, { headers: server.headers() })).text();
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  if (line === undefined) throw new Error(`no ${series} in /v2/metrics`);
  return Number(line.slice(series.length + 1));
}

/** Events the server produced so far (agent messages and its own), over every connection. */
export function eventsProduced(server: RunningServer): Promise<number> {
  return metric(server, "sandbox_agent_events_total");
}
