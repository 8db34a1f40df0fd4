/**
 * Shown when the server documents `/v2/processes` in its OpenAPI document. The process list, logs
 * and terminals (xterm.js over the SDK's `terminal(id)`) belong here once the SDK has its processes
 * client; until then the tab says what the server offers.
 */
export function ProcessesView() {
  return (
    <div class="page">
      <h2>Processes</h2>
      <p class="muted">
        This server has a processes API (<code>/v2/processes</code>). Listing processes, following their logs
        and opening terminals from this page is not built yet.
      </p>
    </div>
  );
}
