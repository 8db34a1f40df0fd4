import { test } from "node:test";

/**
 * Whether this run must have every optional service (container engine, browser, bubblewrap, …).
 * `.ci/run` sets `SANDBOX_AGENT_CI=1`: there a missing service is a failure, not a skip, so a broken
 * install step cannot hide behind green skips.
 */
export const servicesRequired = process.env.SANDBOX_AGENT_CI === "1";

/**
 * Skip gate for tests that need a service a user may lack. `missing` is why it is unavailable (and
 * how to get it), or undefined when it is there. Use as `describe(name, { skip: needService(...) }, …)`:
 * under plain `npm test` it returns the skip reason; under `.ci/run` it also registers a failing test.
 */
export function needService(service: string, missing: string | undefined): string | false {
  if (missing === undefined) return false;
  const reason = `${service} is not available: ${missing}`;
  if (servicesRequired) {
    test(`${service} is available (required under .ci/run)`, () => {
      throw new Error(reason);
    });
  }
  return reason;
}
