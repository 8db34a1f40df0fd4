import { useState } from "preact/hooks";

/** Asks for the server token; nothing of the server is shown before it is accepted. */
export function TokenGate({
  rejected,
  onToken,
}: {
  rejected: boolean;
  onToken: (token: string) => Promise<void>;
}) {
  const [token, setToken] = useState("");
  const [busy, setBusy] = useState(false);
  return (
    <div class="gate">
      <form
        class="gate-card"
        onSubmit={(e) => {
          e.preventDefault();
          setBusy(true);
          void onToken(token.trim()).finally(() => setBusy(false));
        }}
      >
        <h1>
          sandbox-agent <span class="muted">inspector</span>
        </h1>
        <p>This server requires a token. It is kept in this tab only and sent as a bearer header.</p>
        <input
          type="password"
          autoComplete="off"
          placeholder="Server token"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          autoFocus
          data-testid="token-input"
        />
        {rejected && (
          <div class="form-error" data-testid="token-error">
            The server did not accept this token.
          </div>
        )}
        <button class="primary" type="submit" disabled={busy || !token.trim()}>
          Sign in
        </button>
        <p class="muted small-print">
          Tip: open <code>/ui/#token=…</code> to sign in from a link; the token never goes into a URL sent to
          the server.
        </p>
      </form>
    </div>
  );
}
