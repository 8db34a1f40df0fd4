/** Quotes `value` as one POSIX shell word: `'…'`, with embedded single quotes as `'\''`. */
export function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}
