/**
 * The server's counters, kept as plain numbers from start (a few map lookups per request and per
 * connection). Turning them into the Prometheus text format (`prometheus.ts`) is loaded with the
 * first `GET /v2/metrics`.
 */

/** Upper bounds (seconds) of the request-latency histogram buckets. */
export const LATENCY_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
];

export type Labels = Readonly<Record<string, string>>;

/** The series key of a label set (its values in order). A loop, not `Object.values().join()`: every request counts 3–4 series. */
function keyOf(labels: Labels): string {
  let key = "";
  for (const name in labels) key += labels[name] + "\u0000";
  return key;
}

/** A counter per label set. */
export class Counter {
  private readonly series = new Map<string, { labels: Labels; value: number }>();

  inc(labels: Labels, by = 1): void {
    const key = keyOf(labels);
    const entry = this.series.get(key);
    if (entry) entry.value += by;
    else this.series.set(key, { labels, value: by });
  }

  entries(): Iterable<{ labels: Labels; value: number }> {
    return this.series.values();
  }
}

export interface HistogramSeries {
  labels: Labels;
  /** Count per bucket of `LATENCY_BUCKETS` (not cumulative), then the overflow. */
  counts: number[];
  sum: number;
  count: number;
}

/** A latency histogram per label set, with `LATENCY_BUCKETS`. */
export class Histogram {
  private readonly series = new Map<string, HistogramSeries>();

  observe(labels: Labels, seconds: number): void {
    const key = keyOf(labels);
    let entry = this.series.get(key);
    if (!entry) {
      entry = { labels, counts: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
      this.series.set(key, entry);
    }
    let bucket = LATENCY_BUCKETS.findIndex((bound) => seconds <= bound);
    if (bucket === -1) bucket = LATENCY_BUCKETS.length;
    entry.counts[bucket]!++;
    entry.sum += seconds;
    entry.count++;
  }

  entries(): Iterable<HistogramSeries> {
    return this.series.values();
  }
}

/** Everything counted since start; gauges (connections open, agents alive…) are read at scrape time. */
export class ServerMetrics {
  readonly startedAt = Date.now();
  readonly connectionsOpened = new Counter();
  readonly connectionsClosed = new Counter();
  readonly agentExits = new Counter();
  events = 0;
  readonly requests = new Counter();
  readonly requestSeconds = new Histogram();
  readonly responseBytes = new Counter();
  readonly requestBytes = new Counter();
}
