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

/** One series of a counter: its labels and its value. */
export interface CounterSeries {
  readonly labels: Labels;
  value: number;
}

/** A counter per label set. */
export class Counter {
  private readonly series = new Map<string, CounterSeries>();

  inc(labels: Labels, by = 1): void {
    this.of(labels).value += by;
  }

  /** The series of `labels`, made (at 0) if it is new: the caller adds to it at once. */
  of(labels: Labels): CounterSeries {
    const key = keyOf(labels);
    let entry = this.series.get(key);
    if (!entry) this.series.set(key, (entry = { labels, value: 0 }));
    return entry;
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
    observeIn(this.of(labels), seconds);
  }

  /** The series of `labels`, made (empty) if it is new: the caller observes into it at once. */
  of(labels: Labels): HistogramSeries {
    const key = keyOf(labels);
    let entry = this.series.get(key);
    if (!entry) {
      entry = { labels, counts: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0), sum: 0, count: 0 };
      this.series.set(key, entry);
    }
    return entry;
  }

  entries(): Iterable<HistogramSeries> {
    return this.series.values();
  }
}

/** Counts `seconds` into the series' bucket (the first bound it does not pass, else the overflow). */
function observeIn(series: HistogramSeries, seconds: number): void {
  let bucket = 0;
  while (bucket < LATENCY_BUCKETS.length && !(seconds <= LATENCY_BUCKETS[bucket]!)) bucket++;
  series.counts[bucket]!++;
  series.sum += seconds;
  series.count++;
}

/**
 * The series one kind of request (method, route, status) counts into, found once: a request then
 * costs three map lookups by values whose hashes V8 keeps (node's method names, the route
 * templates, a small integer), where it made four label objects and their keys (bench/README.md,
 * "The request path past the router"). A series is made when it is first counted into, as `inc` would make it.
 */
interface RequestSeries {
  readonly withStatus: Labels;
  readonly labels: Labels;
  requests?: CounterSeries;
  seconds?: HistogramSeries;
  responseBytes?: CounterSeries;
  requestBytes?: CounterSeries;
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
  private readonly requestSeries = new Map<string, Map<string, Map<number, RequestSeries>>>();

  /**
   * One request answered: `requests`, `requestSeconds` (unless `seconds` is undefined: a stream),
   * `responseBytes` and, when it had a body, `requestBytes`, each under `{ method, route }` (and
   * `status` for `requests`).
   */
  countRequest(
    method: string,
    route: string,
    status: number,
    seconds: number | undefined,
    responseBytes: number,
    requestBytes: number,
  ): void {
    const series = this.seriesOf(method, route, status);
    (series.requests ??= this.requests.of(series.withStatus)).value++;
    if (seconds !== undefined) observeIn((series.seconds ??= this.requestSeconds.of(series.labels)), seconds);
    (series.responseBytes ??= this.responseBytes.of(series.labels)).value += responseBytes;
    if (requestBytes > 0) (series.requestBytes ??= this.requestBytes.of(series.labels)).value += requestBytes;
  }

  private seriesOf(method: string, route: string, status: number): RequestSeries {
    let routes = this.requestSeries.get(method);
    if (routes === undefined) this.requestSeries.set(method, (routes = new Map()));
    let statuses = routes.get(route);
    if (statuses === undefined) routes.set(route, (statuses = new Map()));
    let series = statuses.get(status);
    if (series === undefined) {
      series = { withStatus: { method, route, status: String(status) }, labels: { method, route } };
      statuses.set(status, series);
    }
    return series;
  }
}
