/**
 * The server token, kept for this tab only (sessionStorage: gone when the tab closes, never sent
 * anywhere but as the `Authorization` header). A link may carry it in the fragment, `#token=…`,
 * which browsers never send to the server; it is moved to storage and wiped from the address bar.
 */
const STORAGE_KEY = "sandbox-agent.token";
const FRAGMENT = /^#token=([^&]*)/;

/** Moves a `#token=…` fragment into storage; whether there was one. */
export function takeTokenFromFragment(): boolean {
  const match = FRAGMENT.exec(location.hash);
  if (!match) return false;
  const token = decodeURIComponent(match[1]!);
  if (token) storeToken(token);
  history.replaceState(null, "", location.pathname + location.search);
  return true;
}

export function storedToken(): string | undefined {
  return sessionStorage.getItem(STORAGE_KEY) ?? undefined;
}

export function storeToken(token: string): void {
  sessionStorage.setItem(STORAGE_KEY, token);
}

export function forgetToken(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}
