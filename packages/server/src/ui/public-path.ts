/**
 * Where the inspector is served. Its files are a static build, the same on every server, holding no
 * data: they are public, so a browser can load the page before it has the token (a navigation cannot
 * carry an `Authorization` header). Everything the page shows comes from `/v2/`, behind the token.
 */
export const INSPECTOR_PATH = "/ui/";

export function isInspectorPath(pathname: string): boolean {
  return pathname === "/ui" || pathname.startsWith(INSPECTOR_PATH);
}
